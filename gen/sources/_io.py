"""Reading source files: JSON documents and JSON lines, with errors that name the file and line."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gen import strict_json
from gen.errors import GenError
from gen.strict_json import Broken, line_and_column


def read_text(path: Path, expected: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise GenError("file not found", file=path, expected=expected) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise GenError(f"cannot read file: {exc}", file=path, expected=expected) from None


def reason_and_offset(error: Exception) -> tuple[str, int | None]:
    if isinstance(error, Broken):
        return error.reason, error.offset
    assert isinstance(error, json.JSONDecodeError)
    return f"not valid JSON ({error.msg})", error.pos


def broken(path: Path, text: str, error: Exception, expected: str, record: str | None = None) -> GenError:
    """One message for a text that is not accepted: what is wrong and where (record, line and column)."""
    reason, offset = reason_and_offset(error)
    place = ", ".join(part for part in (record, line_and_column(text, offset) if offset is not None else None) if part)
    return GenError(reason, file=path, record=place or None, expected=expected)


def read_json(path: Path, expected: str) -> Any:
    text = read_text(path, expected)
    try:
        return strict_json.loads(text)
    except (Broken, json.JSONDecodeError) as exc:
        raise broken(path, text, exc, expected) from None


def read_json_or_jsonl(path: Path, expected: str) -> list[dict]:
    """A JSON list, a single JSON object, or JSON lines (one object per line; blank lines skipped)."""
    text = read_text(path, expected)
    if text.lstrip().startswith("["):
        return list(read_json(path, expected))
    try:  # one (possibly pretty-printed) object; JSON lines fail fast here with "Extra data" after line 1
        whole = strict_json.loads(text)
        return [whole] if isinstance(whole, dict) else list(whole)
    except json.JSONDecodeError:
        pass
    except Broken as exc:
        raise broken(path, text, exc, expected) from None
    records = []
    for line_number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            records.append(line_record(path, line, line_number, expected))
    if not records:
        raise GenError("file holds no records", file=path, expected=expected)
    return records


def line_record(path: Path, line: str, line_number: int, expected: str) -> Any:
    text = line.rstrip("\r\n")
    try:
        return strict_json.loads(text)
    except (Broken, json.JSONDecodeError) as exc:
        reason, offset = reason_and_offset(exc)
        where = f"line {line_number}" + (f", column {offset + 1}" if offset is not None else "")
        raise GenError(reason, file=path, record=where, expected=expected) from None


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
                strict_json.loads(line.decode("utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                return False
            except Broken:
                return True  # JSON lines, one of them broken: _json_lines says where
            return True
    return False


def _json_lines(handle: Any, path: Path, expected: str) -> Iterator[Any]:
    found = False
    for line_number, line in enumerate(handle, start=1):
        if not line.strip():
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise GenError(
                f"cannot read file: {exc}", file=path, record=f"line {line_number}", expected=expected
            ) from None
        yield line_record(path, text, line_number, expected)
        found = True
    if not found:
        raise GenError("file holds no records", file=path, expected=expected)


BLANKS = re.compile(r"\s*")
CHUNK = 1 << 20  # characters read at a time from a JSON list; an item larger than this is read in growing pieces


def _list_items(handle: Any, path: Path, expected: str) -> Iterator[Any]:
    """The items of a JSON list, one at a time, in the memory of the largest item."""
    reader = ListReader(io.TextIOWrapper(handle, encoding="utf-8"))
    number = 0
    try:
        reader.expect("[")
        if reader.peek() == "]":
            reader.position += 1
            return
        while True:
            yield reader.item()
            number += 1
            if reader.expect(",]") == "]":
                break
        if reader.peek() != "":
            raise json.JSONDecodeError("Extra data", reader.buffer, reader.position)
    except (Broken, json.JSONDecodeError) as exc:
        reason, offset = reason_and_offset(exc)
        where = ", ".join([f"item {number}", *([reader.place(offset)] if offset is not None else [])])
        raise GenError(reason, file=path, record=where, expected=expected) from None
    except UnicodeDecodeError as exc:
        raise GenError(f"cannot read file: {exc}", file=path, expected=expected) from None


class ListReader:
    """A window on a JSON list's text: items decoded where they start, more text read when one runs past the
    window's end; the text before the current item is dropped (its lines counted, for error positions)."""

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.buffer = ""
        self.position = 0
        self.lines_dropped = 0
        self.columns_dropped = 0
        self.ended = False

    def more(self, size: int = CHUNK) -> bool:
        piece = self.reader.read(size)
        self.ended = not piece
        self.buffer += piece
        return bool(piece)

    def peek(self) -> str:
        """The next character that is not white space ("" at the end), reading on as needed."""
        while True:
            self.position = BLANKS.match(self.buffer, self.position).end()  # type: ignore[union-attr]
            if self.position < len(self.buffer) or not self.more():
                return self.buffer[self.position : self.position + 1]

    def expect(self, allowed: str) -> str:
        found = self.peek()
        if found == "" or found not in allowed:
            wanted = " or ".join(repr(c) for c in allowed)
            raise json.JSONDecodeError(f"Expecting {wanted}", self.buffer, self.position)
        self.position += 1
        return found

    def item(self) -> Any:
        self.peek()
        self.drop_read()
        while True:
            try:
                value, end = strict_json.decode(self.buffer, self.position)
            except json.JSONDecodeError:
                if not self.ended and self.more(max(CHUNK, len(self.buffer))):  # maybe cut short: read on
                    continue
                raise
            self.position = end
            return value

    def drop_read(self) -> None:
        """Forget the text before the current item, counting the lines and the columns of the current line it
        held, so a place in the window can still be named by the file's line and column."""
        read = self.buffer[: self.position]
        newlines = read.count("\n")
        self.lines_dropped += newlines
        self.columns_dropped = len(read) - read.rfind("\n") - 1 if newlines else self.columns_dropped + len(read)
        self.buffer, self.position = self.buffer[self.position :], 0

    def place(self, offset: int) -> str:
        """The file's line and column of an offset into the window."""
        line = self.buffer.count("\n", 0, offset)
        column = offset - self.buffer.rfind("\n", 0, offset) if line else self.columns_dropped + offset + 1
        return f"line {self.lines_dropped + line + 1}, column {column}"


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
