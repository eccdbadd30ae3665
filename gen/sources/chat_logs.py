"""Your own chat logs: JSON lines (or a JSON list), one message per record:

    {"conversation": "c1", "speaker": "Ann", "text": "Hi!", "time": "2023-05-08 13:56"}

with an optional "session" (any string or number) that groups messages into sittings; without it, a sitting
ends where the next message of the conversation comes more than `session_break_minutes` later. Every message
has a time, so the clock is observed by default: each message keeps its own time (`clock: simulated` keeps
only each sitting's first time and simulates the rest from the speaking rate, as for LoCoMo). The clock,
ordering, speaker and session rules are gen/sources/messages.py's, shared with the other message readers.

Times are read as ISO 8601 directly and otherwise by python-dateutil, in the forms people have
(`2023-05-08 13:56`, `2023-05-08T13:56:04`, `8 May 2023, 1:56 pm`, `May 8, 2023 1:56 PM`, `05/08/2023`). A
time without a date is refused. A time with a UTC offset is converted to UTC; a source mixes the two kinds
only at the cost of an error naming the line (TimeReader). A numeric date whose first two numbers could both
be a month (05/08/23) is read by the source option `dayfirst`; without it such a date is refused rather than
guessed. A two-digit year is put in the century that brings it nearest today (dateutil's rule).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

from dateutil import parser as dates

from gen.conversation import Conversation
from gen.errors import GenError
from gen.recipe import SourceSpec
from gen.sources._io import require_str
from gen.sources.messages import Rules, Said, conversations, utc_naive

EXPECTED = (
    'JSON lines, one message each: {"conversation": ..., "speaker": ..., "text": ..., "time": ...} '
    '(and optionally "session")'
)
ISO_START = re.compile(r"^\d{4}-\d{2}-\d{2}")
NUMERIC_DATE = re.compile(r"^\s*(\d{1,2})[/.-](\d{1,2})[/.-]\d{2,4}\b")
NO_DATE = datetime(1, 1, 1)  # dateutil fills what a text leaves out from this; year 1 means no date was given
DEFAULT_BREAK_MINUTES = 30.0  # a pause longer than a coffee break ends a sitting
TIME_FORMS = "a local date and time such as 2023-05-08 13:56 or 8 May 2023, 1:56 pm"


def read_time(text: str, dayfirst: bool | None, origin: Any, where: str, field: str = "time") -> datetime:
    """A text time: ISO 8601 directly (the common case, and fast), other forms through dateutil. A time with an
    offset keeps it here (TimeReader converts it)."""
    if ISO_START.match(text):
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            pass  # e.g. "2023-05-08 1:56 pm": dateutil reads it
    numeric = NUMERIC_DATE.match(text)
    if numeric and dayfirst is not None and int(numeric[2 if dayfirst else 1]) > 12:
        order = "day first" if dayfirst else "month first"
        raise GenError(
            f"the date of {text!r} cannot be read {order}, as the source entry's `dayfirst` says",
            file=origin,
            record=where,
            field=field,
            expected=f"every numeric date of the file {order}, or the right `dayfirst`",
        )
    if numeric and dayfirst is None and int(numeric[1]) <= 12 and int(numeric[2]) <= 12 and numeric[1] != numeric[2]:
        raise GenError(
            f"the date of {text!r} reads as day first or month first",
            file=origin,
            record=where,
            field=field,
            expected="set `dayfirst: true` (8/5 is 8 May) or `dayfirst: false` (8/5 is August 5) in the source entry",
        )
    try:
        with warnings.catch_warnings():
            # a zone name dateutil does not know (EST, CEST) would otherwise be dropped with a warning, and the
            # time read as local: hours away from when it was said
            warnings.simplefilter("error", dates.UnknownTimezoneWarning)
            # dayfirst only for day/month dates: dateutil would read 2023-05-08 as 5 August under it
            value = dates.parse(text, dayfirst=bool(dayfirst) and numeric is not None, default=NO_DATE)
    except dates.UnknownTimezoneWarning:
        raise GenError(
            f"the time {text!r} names a time zone gen cannot convert",
            file=origin,
            record=where,
            field=field,
            expected=f"{TIME_FORMS}, with a UTC offset (+01:00, Z) rather than a zone's name",
        ) from None
    except (ValueError, OverflowError):
        raise GenError(
            f"cannot read the time {text!r}", file=origin, record=where, field=field, expected=TIME_FORMS
        ) from None
    if value.year == 1:
        raise GenError(f"the time {text!r} has no date", file=origin, record=where, field=field, expected=TIME_FORMS)
    return value


class TimeReader:
    """Text times of one source: read in the forms people have, with one rule for zones across the source (the
    first time decides: all with an offset, converted to UTC, or all without, kept as local wall-clock times;
    mixing them would put some messages hours away from where they were said)."""

    def __init__(self, dayfirst: bool | None, origin: Any) -> None:
        self.dayfirst, self.origin = dayfirst, origin
        self.zoned: bool | None = None

    def __call__(self, text: str, where: str, field: str = "time") -> datetime:
        value = read_time(text, self.dayfirst, self.origin, where, field)
        zoned = value.tzinfo is not None
        if self.zoned is None:
            self.zoned = zoned
        elif zoned != self.zoned:
            said = "has a UTC offset" if zoned else "has no UTC offset"
            raise GenError(
                f"the time {text!r} {said}, unlike the source's first time",
                file=self.origin,
                record=where,
                field=field,
                expected="every time of a source with an offset (converted to UTC) or every time without one "
                "(kept as local times)",
            )
        return in_utc(value, text, self.origin, where, field)


def in_utc(value: datetime, text: str, origin: Any, where: str, field: str) -> datetime:
    """`value` as the log writes it (utc_naive), or one error naming the place: an offset of a day or more
    (+9999, UTC-99) is no offset a clock has, and converting a time of year 1 or 9999 can leave the calendar."""
    try:
        return utc_naive(value)
    except (ValueError, OverflowError):
        raise GenError(
            f"the time {text!r} has no place in UTC (its offset is not under 24 hours, or it falls outside the "
            "years 1 to 9999 once converted)",
            file=origin,
            record=where,
            field=field,
            expected=f"{TIME_FORMS}, with an offset between -23:59 and +23:59",
        ) from None


def messages(records: Iterable[tuple[str, Any]], origin: Any, dayfirst: bool | None) -> Iterator[Said]:
    time_of = TimeReader(dayfirst, origin)
    for where, record in records:
        yield read_message(record, where, origin, time_of)


def parse(records: Iterable[tuple[str, Any]], origin: Any, spec: SourceSpec) -> Iterator[Conversation]:
    """Conversations in the order their first message comes (a conversation's messages may be spread over the
    file: gen/sources/messages.py gathers them without holding the file)."""
    rules = Rules(
        origin=origin,
        prefix="chat_logs",
        clock=spec.clock,
        break_minutes=spec.session_break_minutes or DEFAULT_BREAK_MINUTES,
        source_format="chat_logs",
    )
    yield from conversations(messages(records, origin, spec.dayfirst), rules)


def read_message(record: Any, where: str, origin: Any, time_of: TimeReader) -> Said:
    if not isinstance(record, dict):
        raise GenError("a message is not a JSON object", file=origin, record=where, expected=EXPECTED)

    def field(name: str) -> str:
        return require_str(record.get(name), file=origin, record=where, field=name).strip()

    session = record.get("session")
    stamp = record.get("time")
    time = None if stamp is None else time_of(field("time"), where)
    return Said(
        field("conversation"), field("speaker"), field("text"), time, None if session is None else str(session), where
    )
