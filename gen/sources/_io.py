"""Reading source files: JSON documents and JSON lines, with errors that name the file and line."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ijson

from gen.errors import GenError


def read_text(path: Path, expected: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GenError("file not found", file=path, expected=expected) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GenError(f"cannot read file: {exc}", file=path, expected=expected) from None


def read_json(path: Path, expected: str) -> Any:
    text = read_text(path, expected)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise GenError(
            f"not valid JSON ({exc.msg})", file=path, record=f"line {exc.lineno}, column {exc.colno}", expected=expected
        ) from None


def read_json_or_jsonl(path: Path, expected: str) -> list[dict]:
    """A JSON list, a single JSON object, or JSON lines (one object per line; blank lines skipped)."""
    text = read_text(path, expected)
    if text.lstrip().startswith("["):
        return list(read_json(path, expected))
    try:  # one (possibly pretty-printed) object; JSON lines fail fast here with "Extra data" after line 1
        whole = json.loads(text)
        return [whole] if isinstance(whole, dict) else list(whole)
    except json.JSONDecodeError:
        pass
    records = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise GenError(
                f"not valid JSON ({exc.msg})", file=path, record=f"line {line_number}", expected=expected
            ) from None
    if not records:
        raise GenError("file holds no records", file=path, expected=expected)
    return records


def stream_records(path: Path, expected: str) -> Iterator[Any]:
    """The records of a JSON list (item by item), of JSON lines (line by line) or of one JSON document. Only
    a single document is read whole: a corpus in the other two layouts reads in the memory of its largest record."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise GenError("file not found", file=path, expected=expected) from None
    except OSError as exc:
        raise GenError(f"cannot read file: {exc}", file=path, expected=expected) from None
    with handle:
        if handle.read(64).lstrip()[:1] == b"[":
            handle.seek(0)
            yield from _list_items(handle, path, expected)
            return
        handle.seek(0)
        if _first_line_is_json(handle):
            handle.seek(0)
            yield from _json_lines(handle, path, expected)
            return
    yield from read_json_or_jsonl(path, expected)  # one document, maybe pretty-printed; or a broken file


def _first_line_is_json(handle: Any) -> bool:
    for line in handle:
        if line.strip():
            try:
                json.loads(line)
            except (json.JSONDecodeError, UnicodeDecodeError):
                return False
            return True
    return False


def _json_lines(handle: Any, path: Path, expected: str) -> Iterator[Any]:
    found = False
    for line_number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            yield json.loads(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise GenError(
                f"cannot read file: {exc}", file=path, record=f"line {line_number}", expected=expected
            ) from None
        except json.JSONDecodeError as exc:
            raise GenError(
                f"not valid JSON ({exc.msg})", file=path, record=f"line {line_number}", expected=expected
            ) from None
        found = True
    if not found:
        raise GenError("file holds no records", file=path, expected=expected)


def _list_items(handle: Any, path: Path, expected: str) -> Iterator[Any]:
    try:
        yield from ijson.items(handle, "item", use_float=True)
    except (ijson.JSONError, UnicodeDecodeError):
        read_json(path, expected)  # the standard parser names the line and column of the problem
        raise GenError("not valid JSON", file=path, expected=expected) from None


def require_str(value: Any, *, file, record: str, field: str, expected: str = "a non-empty string") -> str:
    if not isinstance(value, str) or not value.strip():
        shown = "missing" if value is None else f"got {json.dumps(value)[:60]}"
        raise GenError(shown, file=file, record=record, field=field, expected=expected)
    return value


def require_list(value: Any, *, file, record: str, field: str, expected: str) -> list:
    if not isinstance(value, list):
        shown = "missing" if value is None else f"got {type(value).__name__}"
        raise GenError(shown, file=file, record=record, field=field, expected=expected)
    return value
