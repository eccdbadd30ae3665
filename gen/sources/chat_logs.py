"""Your own chat logs: JSON lines (or a JSON list), one message per record:

    {"conversation": "c1", "speaker": "Ann", "text": "Hi!", "time": "2023-05-08 13:56"}

with an optional "session" (any string or number) that groups messages into sittings; without it, a sitting
ends where the next message of the conversation comes more than `session_break_minutes` later. Each sitting
starts at its first message's time, as a LoCoMo session starts at its date (the times of later messages are
simulated from the speaking rate, like every source's). Messages of a conversation must be in time order and
by exactly two speakers.

Times are read by python-dateutil in the forms people have (`2023-05-08 13:56`, `2023-05-08T13:56:04`,
`8 May 2023, 1:56 pm`, `May 8, 2023 1:56 PM`, `05/08/2023`), as local times: a time with a zone, or without a
date, is refused. A numeric date whose first two numbers could both be a month (05/08/23) is read by the
source option `dayfirst`; without it such a date is refused rather than guessed. A two-digit year is put in
the century that brings it nearest today (dateutil's rule).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from dateutil import parser as dates

from gen.conversation import Conversation, Session, Turn
from gen.errors import GenError
from gen.sources._io import require_str

# People's own conversations, not a published corpus: the card says so, and `gen push` asks before uploading
# them (gen/personal.py). Every reader may declare it; one that does not reads no one's own logs.
PERSONAL = True
EXPECTED = (
    'JSON lines, one message each: {"conversation": ..., "speaker": ..., "text": ..., "time": ...} '
    '(and optionally "session")'
)
NUMERIC_DATE = re.compile(r"^\s*(\d{1,2})[/.-](\d{1,2})[/.-]\d{2,4}\b")
NO_DATE = datetime(1, 1, 1)  # dateutil fills what a text leaves out from this; year 1 means no date was given
DEFAULT_BREAK_MINUTES = 30.0  # a pause longer than a coffee break ends a sitting
TIME_FORMS = "a local date and time such as 2023-05-08 13:56 or 8 May 2023, 1:56 pm"


def read_time(text: str, dayfirst: bool | None, origin: Any, where: str) -> datetime:
    numeric = NUMERIC_DATE.match(text)
    if numeric and dayfirst is not None and int(numeric[2 if dayfirst else 1]) > 12:
        order = "day first" if dayfirst else "month first"
        raise GenError(
            f"the date of {text!r} cannot be read {order}, as the source entry's `dayfirst` says",
            file=origin,
            record=where,
            field="time",
            expected=f"every numeric date of the file {order}, or the right `dayfirst`",
        )
    if numeric and dayfirst is None and int(numeric[1]) <= 12 and int(numeric[2]) <= 12 and numeric[1] != numeric[2]:
        raise GenError(
            f"the date of {text!r} reads as day first or month first",
            file=origin,
            record=where,
            field="time",
            expected="set `dayfirst: true` (8/5 is 8 May) or `dayfirst: false` (8/5 is August 5) in the source entry",
        )
    try:
        # dayfirst only for day/month dates: dateutil would read 2023-05-08 as 5 August under it
        value = dates.parse(text, dayfirst=bool(dayfirst) and numeric is not None, default=NO_DATE)
    except (ValueError, OverflowError):
        raise GenError(
            f"cannot read the time {text!r}", file=origin, record=where, field="time", expected=TIME_FORMS
        ) from None
    if value.tzinfo is not None or value.year == 1:
        why = "has a time zone" if value.tzinfo is not None else "has no date"
        raise GenError(f"the time {text!r} {why}", file=origin, record=where, field="time", expected=TIME_FORMS)
    return value


@dataclass(frozen=True)
class Message:
    speaker: str
    text: str
    time: datetime
    session: str | None
    where: str  # "record N", for errors


def parse(records: Iterable[Any], origin: Any, dayfirst: bool | None, break_minutes: float) -> Iterator[Conversation]:
    """Conversations in the order their first message comes (a conversation's messages may be spread over the
    file; they are gathered before it is built)."""
    messages: dict[str, list[Message]] = {}
    for number, record in enumerate(records, start=1):
        conversation, message = read_message(record, f"record {number}", origin, dayfirst)
        messages.setdefault(conversation, []).append(message)
    for conversation, said in messages.items():
        yield build(conversation, said, origin, timedelta(minutes=break_minutes))


def read_message(record: Any, where: str, origin: Any, dayfirst: bool | None) -> tuple[str, Message]:
    if not isinstance(record, dict):
        raise GenError("a message is not a JSON object", file=origin, record=where, expected=EXPECTED)

    def field(name: str) -> str:
        return require_str(record.get(name), file=origin, record=where, field=name).strip()

    session = record.get("session")
    time = read_time(field("time"), dayfirst, origin, where)
    message = Message(field("speaker"), field("text"), time, None if session is None else str(session), where)
    return field("conversation"), message


def starts_session(message: Message, previous: Message | None, gap: timedelta) -> bool:
    """The first message, a new `session` value, or (without sessions) a pause longer than `gap`."""
    if previous is None:
        return True
    if message.session is not None or previous.session is not None:
        return message.session != previous.session
    return message.time - previous.time > gap


def build(conversation: str, said: list[Message], origin: Any, gap: timedelta) -> Conversation:
    speakers = list(dict.fromkeys(message.speaker for message in said))
    if len(speakers) != 2:
        raise GenError(
            f"{len(speakers)} distinct speakers ({', '.join(speakers)})",
            file=origin,
            record=f"conversation {conversation}",
            field="speaker",
            expected="exactly two speakers per conversation",
        )
    sessions: list[list[Message]] = []
    previous: Message | None = None
    for message in said:
        if previous is not None and message.time < previous.time:
            raise GenError(
                f"this message is earlier than the one before it in conversation {conversation}",
                file=origin,
                record=message.where,
                field="time",
                expected="each conversation's messages in time order",
            )
        if starts_session(message, previous, gap):
            sessions.append([])
        sessions[-1].append(message)
        previous = message
    return Conversation(
        conversation_id=f"chat_logs/{conversation}",
        speakers=(speakers[0], speakers[1]),
        sessions=tuple(
            Session(tuple(Turn(m.speaker, m.text) for m in turns), start=turns[0].time, label=f"session {k}")
            for k, turns in enumerate(sessions, start=1)
        ),
        metadata={"source_format": "chat_logs"},
        source_file=str(origin),
    )
