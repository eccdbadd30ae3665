"""Reading source files: JSON documents and JSON lines, with errors that name the file and line. Files are
opened, decoded and bounded by gen/reading.py; JSON's rules are gen/strict_json.py's."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gen import reading, strict_json
from gen.errors import GenError
from gen.strict_json import Broken


def read_text(path: Path, expected: str) -> str:
    """A data file read whole: at most reading.max_record_bytes()."""
    return reading.read_text(path, expected, reading.max_record_bytes())


reason_and_offset = reading.json_problem
broken = reading.json_error
read_json = reading.read_json


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
    return reading.json_line(path, line.rstrip("\r\n"), line_number, expected)


def stream_records(path: Path, expected: str) -> Iterator[Any]:
    """The records of a file, without their places (see `numbered_records`)."""
    for _, record in numbered_records(path, expected):
        yield record


def numbered_records(path: Path, expected: str) -> Iterator[tuple[str, Any]]:
    """(place, record) of each record of a JSON list (item by item: "item 0", ...), of JSON lines (line by line:
    "line 3", blank lines counted) or of one JSON document ("record 1"). Only
    a single document is read whole: a corpus in the other two layouts reads in the memory of its largest record
    (each at most reading.max_record_bytes())."""
    limit = reading.max_record_bytes()
    with reading.open_input(path, expected) as handle:
        start = handle.tell()  # after a byte-order mark
        reading.refuse_other_encodings(handle.read(4), path, expected)
        handle.seek(start)
        if handle.read(64).lstrip()[:1] == b"[":
            handle.seek(start)
            for number, item in enumerate(_list_items(handle, path, expected, limit)):
                yield f"item {number}", item  # numbered from 0, as the list's own errors name items
            return
        handle.seek(start)
        if _first_line_is_json(handle, limit):
            handle.seek(start)
            yield from _json_lines(handle, path, expected, limit)
            return
    for number, record in enumerate(read_json_or_jsonl(path, expected), start=1):  # one document, or broken
        yield f"record {number}", record


def _first_line_is_json(handle: Any, limit: int) -> bool:
    while line := handle.readline(limit + 1):
        if line.strip():
            try:
                strict_json.loads(line.decode("utf-8"))
            except (json.JSONDecodeError, UnicodeDecodeError):
                return len(line) > limit  # a line past the limit: _json_lines names it
            except Broken:
                return True  # JSON lines, one of them broken: _json_lines says where
            return True
    return False


def _json_lines(handle: Any, path: Path, expected: str, limit: int) -> Iterator[tuple[str, Any]]:
    found = False
    for line_number, text in reading.lines_of(handle, path, expected, limit):
        yield f"line {line_number}", line_record(path, text, line_number, expected)
        found = True
    if not found:
        raise GenError("file holds no records", file=path, expected=expected)


BLANKS = re.compile(r"\s*")
CHUNK = 1 << 20  # characters read at a time from a JSON list; an item larger than this is read in growing pieces


def _list_items(handle: Any, path: Path, expected: str, limit: int) -> Iterator[Any]:
    """The items of a JSON list, one at a time, in the memory of the largest item (at most `limit` characters)."""
    reader = ListReader(io.TextIOWrapper(handle, encoding="utf-8"), limit)
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
    except ItemTooLarge:
        raise GenError(
            f"the item is larger than {reading.size_text(limit)}",
            file=path,
            record=f"item {number}, {reader.place(0)}",
            expected=f"{expected}; a larger item needs {reading.RECORD_LIMIT_VARIABLE} set higher",
        ) from None
    except UnicodeDecodeError as exc:
        raise GenError(
            f"not UTF-8 text: byte 0x{exc.object[exc.start]:02x} cannot be read; save it as UTF-8",
            file=path,
            record=f"item {number}, {reader.place(len(reader.buffer))}",
            expected=expected,
        ) from None


class ItemTooLarge(Exception):
    pass


class ListReader:
    """A window on a JSON list's text: items decoded where they start, more text read when one runs past the
    window's end; the text before the current item is dropped (its lines counted, for error positions)."""

    def __init__(self, reader: Any, limit: int) -> None:
        self.reader = reader
        self.limit = limit
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
                if len(self.buffer) > self.limit:
                    raise ItemTooLarge from None
                if not self.ended and self.more(min(max(CHUNK, len(self.buffer)), self.limit)):  # maybe cut short
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
