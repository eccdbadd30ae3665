"""JSON lines: the one encoder every written record goes through, and the one reader of gen's own files."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from gen.errors import GenError

_encode = json.JSONEncoder(ensure_ascii=False).encode


def encode_line(record: dict[str, Any]) -> str:
    """One record as a line of UTF-8 JSON (keys in the record's order, ", " and ": " separators)."""
    return _encode(record) + "\n"


def write_jsonl(path: Path, rows: Iterable[dict[str, Any]]) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(encode_line(row))
            count += 1
    return count


def write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False, default=str) + "\n", encoding="utf-8")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """The records of a JSONL file gen wrote; a bad line is an error naming the file and line."""
    with Path(path).open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise GenError(f"not valid JSON: {exc.msg}", file=path, record=f"line {number}") from None
            if not isinstance(row, dict):
                raise GenError("a record is not a JSON object", file=path, record=f"line {number}")
            yield row
