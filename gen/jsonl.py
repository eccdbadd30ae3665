"""JSON lines: the one encoder every written record goes through, and the one reader of gen's own files.

Records are encoded with orjson: compact UTF-8 JSON, keys in the record's order, several times faster
than the standard library's encoder, which was the largest single cost of writing a run.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import orjson

from gen import reading
from gen.errors import GenError


def encode_lines(records: Iterable[dict[str, Any]]) -> bytes:
    """Records as lines of compact UTF-8 JSON, one per line."""
    return b"".join(orjson.dumps(record) + b"\n" for record in records)


def write_json(path: Path, data: Any, what: str = "JSON file") -> None:
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n"
    replace_file(path, text.encode("utf-8"), what)


def replace_file(output: Path, data: bytes, what: str) -> None:
    """A file a command was asked to write (`what` says what it holds), all or nothing: written beside the target
    and renamed into place, so an interrupted write never leaves half a file where a whole one was."""
    try:
        mode: int | None = output.lstat().st_mode
    except OSError:  # nothing there yet
        mode = None
    kind = "a symbolic link" if mode is not None and stat.S_ISLNK(mode) else mode and reading.not_a_file(mode)
    if kind:  # renaming over it would replace a device, a pipe or a link with a file: never gen's to replace
        raise GenError(f"the output is {kind}, not a file", file=output, expected=f"a file name for the {what}")
    partial = output.with_name(f".{output.name}.tmp-{os.getpid()}")
    try:
        partial.write_bytes(data)
        partial.replace(output)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise GenError(f"cannot write the {what} ({exc.strerror})", file=output) from None


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a JSONL file gen wrote; a bad line is an error naming the file and line."""
    for number, row in reading.json_lines(Path(path), "JSON lines gen wrote"):
        if not isinstance(row, dict):
            raise GenError("a record is not a JSON object", file=path, record=f"line {number}")
        yield row
