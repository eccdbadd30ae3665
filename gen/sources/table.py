"""CSV and TSV files of messages, one row each, under a header that names the columns. The source entry's
`options:` say which column holds what:

    - format: csv              # or tsv (tab-separated)
      path: chats.csv
      options: {speaker: From, text: Message, time: Sent, conversation: Chat, session: Sitting}

`speaker` and `text` are required; `time`, `conversation` (without it the file is one conversation, named by
the file's stem) and `session` are optional. Rows are read one at a time (a quoted cell may span lines), each
line at most reading.max_record_bytes(); errors name the line a row starts on and the column. Times, sittings,
the clock and ordering are chat_logs' rules (gen/sources/messages.py).
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import Field

from gen import reading
from gen.conversation import Conversation
from gen.errors import GenError
from gen.recipe import SourceSpec
from gen.sources.chat_logs import DEFAULT_BREAK_MINUTES, TimeReader
from gen.sources.messages import Rules, Said, conversations
from gen.sources.registry import Records
from gen.validation import InputModel

EXPECTED = "a table with a header row naming its columns, one message per row"
ROLES = ("speaker", "text", "time", "conversation", "session")


class TableOptions(InputModel):
    speaker: str = Field(description="the column of the speaker's name")
    text: str = Field(description="the column of the message")
    time: str | None = Field(default=None, description="the column of the message's date and time")
    conversation: str | None = Field(default=None, description="the column naming the conversation")
    session: str | None = Field(default=None, description="the column naming the sitting")


def rows(path: Path, expected: str, delimiter: str) -> Records:
    """("line N", {column: cell}) per row; the header is the first row."""
    limit = reading.max_record_bytes()
    with reading.open_input(path, expected) as handle:
        lines = bounded_lines(handle, path, expected, limit)
        reader = csv.reader(lines, delimiter=delimiter, strict=True)
        try:
            header = next(reader, None)
            if header is None:
                raise GenError("the file is empty", file=path, expected=expected)
            if len(set(header)) != len(header):
                repeated = next(name for name in header if header.count(name) > 1)
                raise GenError(
                    f"the column {repeated!r} appears twice in the header",
                    file=path,
                    record="line 1",
                    expected=expected,
                )
            start = reader.line_num + 1
            for cells in reader:
                where = f"line {start}"
                start = reader.line_num + 1
                if not any(cell.strip() for cell in cells):
                    continue
                if len(cells) != len(header):
                    raise GenError(
                        f"{len(cells)} cells, and the header names {len(header)} columns",
                        file=path,
                        record=where,
                        expected=expected,
                    )
                yield where, dict(zip(header, cells))
        except csv.Error as exc:
            raise GenError(
                f"not a valid table row ({exc})", file=path, record=f"line {reader.line_num}", expected=expected
            ) from None


def bounded_lines(handle: Any, path: Path, expected: str, limit: int) -> Iterator[str]:
    """Decoded lines, blank ones kept (inside a quoted cell they are text), each at most `limit` bytes."""
    csv.field_size_limit(limit)
    return (text for _, text in reading.lines_of(handle, path, expected, limit, keep_blank=True))


def read_csv(path: Path, expected: str) -> Records:
    return rows(path, expected, ",")


def read_tsv(path: Path, expected: str) -> Records:
    return rows(path, expected, "\t")


def parse(records: Records, origin: Any, spec: SourceSpec, options: TableOptions) -> Iterator[Conversation]:
    time_of = TimeReader(spec.dayfirst, origin)
    named = {role: getattr(options, role) for role in ROLES if getattr(options, role) is not None}
    whole = Path(str(origin)).stem

    def said() -> Iterator[Said]:
        checked = False
        for where, row in records:
            if not checked:
                for role, column in named.items():
                    if column not in row:
                        raise GenError(
                            f"no column {column!r} in the header (it has {', '.join(row)[:200]})",
                            file=origin,
                            record="line 1",
                            field=f"options.{role}",
                            expected="the name of a column of the header row",
                        )
                checked = True

            def cell(role: str, required: bool = True, row: dict = row, where: str = where) -> str | None:
                return cell_of(row, named, role, origin, where, required)

            stamp = cell("time", required=False)
            conversation = (cell("conversation") if "conversation" in named else whole) or whole
            speaker, text = cell("speaker") or "", cell("text") or ""  # required cells: never empty here
            time = None if stamp is None else time_of(stamp, where, named["time"])
            yield Said(conversation, speaker, text, time, cell("session", required=False), where)

    yield from conversations(
        said(), Rules(origin, spec.format, spec.clock, spec.session_break_minutes or DEFAULT_BREAK_MINUTES, spec.format)
    )


def cell_of(row: dict, named: dict[str, str], role: str, origin: Any, where: str, required: bool) -> str | None:
    """The cell of the column named for `role` (None when empty or when no column is named for it); a required
    cell that is empty is an error naming the line and the column."""
    value = row[named[role]].strip() if role in named else ""
    if not value and required:
        raise GenError("the cell is empty", file=origin, record=where, field=named[role], expected="a non-empty cell")
    return value or None
