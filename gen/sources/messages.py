"""Streams of messages → conversations: the one place every reader of people's own logs goes through (chat_logs,
CSV/TSV, the Hub's chat `messages` layout, ShareGPT, a ChatGPT export), so the clock, ordering, speaker and
session rules are the same whatever the format (docs/timestamps.md, "Observed clocks").

A reader yields `Said` messages in file order. `conversations` gathers them by conversation and builds each:

- the clock: the source entry's `clock`, or by default `observed` when the source's first message has a time
  and `simulated` when it has none. On an observed clock every message must have a time (one error naming the
  file, the line and the field otherwise) and keeps it; on a simulated one only each session's first time is
  used (as a LoCoMo date is), and without times sessions follow one another a day apart;
- times are whole seconds (a fraction is dropped, as the log writes them) and naive: a time with an offset, and
  a Unix time, is converted to UTC by the reader (`utc_naive`);
- within a session, messages keep file order and their times must not go back (same-time messages are kept in
  file order); sessions are ordered by their first time, and one that starts before the previous one ends is
  refused naming both;
- a conversation has exactly two speakers.

Memory: a conversation's messages may be spread over the file (a log of several chats sorted by time is), so
each message is written to an anonymous temporary file as it is read and the conversations are read back one at
a time: what is held is one conversation and an offset per message, never the file.
"""

from __future__ import annotations

import itertools
import marshal
import os
import tempfile
from array import array
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from gen.conversation import OBSERVED, SIMULATED, Conversation, Session, Turn
from gen.errors import GenError

SIMULATED_GAP = timedelta(days=1)  # between sessions of a simulated clock that has no times at all
SPAN_SLACK = 1 << 20  # read a conversation's stretch of the spill file at once when it wastes at most this much


@dataclass(frozen=True, slots=True)
class Said:
    """One message as a reader found it. `where` names its place for errors ("line 12", "item 3, message 4")."""

    conversation: str
    speaker: str
    text: str
    time: datetime | None
    session: str | None  # messages with the same value are one sitting; None: sittings by pauses
    where: str

    def packed(self) -> bytes:
        stamp = None if self.time is None else self.time.isoformat()
        return marshal.dumps((self.speaker, self.text, stamp, self.session, self.where))

    @staticmethod
    def unpacked(conversation: str, blob: bytes) -> Said:
        speaker, text, stamp, session, where = marshal.loads(blob)
        return Said(
            conversation, speaker, text, None if stamp is None else datetime.fromisoformat(stamp), session, where
        )


def utc_naive(moment: datetime) -> datetime:
    """A time as the log writes it: whole seconds, no zone (a time with an offset is converted to UTC first)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.replace(microsecond=0)


def from_unix(seconds: float) -> datetime:
    """A Unix time (seconds since 1970, UTC) as a naive UTC time of whole seconds."""
    return datetime(1970, 1, 1) + timedelta(seconds=int(seconds // 1))


@dataclass(frozen=True)
class Rules:
    """What a source entry says about its messages."""

    origin: Any  # the file (or hf:owner/name), for errors
    prefix: str  # of conversation ids: "chat_logs" → chat_logs/<conversation>
    clock: str | None  # None: decided by the first message
    break_minutes: float | None  # without session values: a pause longer than this starts a sitting
    source_format: str


class ClockOf:
    """The clock of one source: the declared one, or the one its first message implies; every message of an
    observed source must have a time."""

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.clock = rules.clock

    def check(self, message: Said) -> None:
        if self.clock is None:
            self.clock = OBSERVED if message.time is not None else SIMULATED
        if self.clock == OBSERVED and message.time is None:
            declared = "declares `clock: observed`" if self.rules.clock else "has times from its first message on"
            raise GenError(
                f"this message has no time, and the source {declared}",
                file=self.rules.origin,
                record=message.where,
                field="time",
                expected="a time on every message of an observed source, or `clock: simulated` in the source entry",
            )


def conversations(messages: Iterable[Said], rules: Rules) -> Iterator[Conversation]:
    """The conversations of a message stream, in the order their first message comes."""
    clock = ClockOf(rules)
    with Spill() as spill:
        for message in messages:
            clock.check(message)
            spill.add(message)
        for key, said in spill.conversations():
            yield build(key, said, rules, clock.clock or SIMULATED)


class Spill:
    """Messages written to an anonymous temporary file as they come, read back one conversation at a time."""

    def __init__(self) -> None:
        self.file = tempfile.TemporaryFile(prefix="gen-messages-")  # noqa: SIM115 (closed by __exit__)
        self.end = 0
        self.places: dict[str, tuple[array, array]] = {}  # conversation → (offsets, lengths), in first-seen order

    def __enter__(self) -> Spill:
        return self

    def __exit__(self, *exc: object) -> None:
        self.file.close()

    def add(self, message: Said) -> None:
        blob = message.packed()
        self.file.write(blob)
        offsets, lengths = self.places.setdefault(message.conversation, (array("q"), array("q")))
        offsets.append(self.end)
        lengths.append(len(blob))
        self.end += len(blob)

    def conversations(self) -> Iterator[tuple[str, list[Said]]]:
        self.file.flush()
        descriptor = self.file.fileno()
        for key in list(self.places):
            offsets, lengths = self.places.pop(key)
            first, last = offsets[0], offsets[-1] + lengths[-1]
            own = sum(lengths)
            if last - first <= 2 * own + SPAN_SLACK:  # the usual case: its messages lie close together
                stretch = os.pread(descriptor, last - first, first)
                blobs = [stretch[o - first : o - first + n] for o, n in zip(offsets, lengths)]
            else:
                blobs = [os.pread(descriptor, n, o) for o, n in zip(offsets, lengths)]
            yield key, [Said.unpacked(key, blob) for blob in blobs]


def sittings(said: list[Said], gap: timedelta | None) -> list[list[Said]]:
    """Messages split into sittings in file order: at each new `session` value, or (without session values) at a
    pause longer than `gap`."""
    found: list[list[Said]] = []
    previous: Said | None = None
    for message in said:
        if previous is None:
            new = True
        elif message.session is not None or previous.session is not None:
            new = message.session != previous.session
        else:
            new = (
                gap is not None
                and message.time is not None
                and previous.time is not None
                and message.time - previous.time > gap
            )
        if new:
            found.append([])
        found[-1].append(message)
        previous = message
    return found


def build(key: str, said: list[Said], rules: Rules, clock: str) -> Conversation:
    speakers = list(dict.fromkeys(message.speaker for message in said))
    if len(speakers) != 2:
        raise GenError(
            f"{len(speakers)} distinct speakers ({', '.join(speakers[:5])})",
            file=rules.origin,
            record=f"conversation {key}, from {said[0].where}",
            field="speaker",
            expected="exactly two speakers per conversation",
        )
    gap = timedelta(minutes=rules.break_minutes) if rules.break_minutes else None
    groups = sittings(said, gap)
    for group in groups:
        in_time_order(key, group, rules)
    if any(group[0].time is not None for group in groups):
        groups = in_session_order(key, groups, rules, clock)
    sessions = []
    for number, group in enumerate(groups, start=1):
        start = group[0].time
        turns = tuple(Turn(m.speaker, m.text, time=m.time if clock == OBSERVED else None) for m in group)
        gap_before = None if start is not None or number == 1 else SIMULATED_GAP
        sessions.append(
            Session(turns, start=start, gap_before=gap_before, label=f"session {number} ({group[0].where})")
        )
    return Conversation(
        conversation_id=f"{rules.prefix}/{key}",
        speakers=(speakers[0], speakers[1]),
        sessions=tuple(sessions),
        metadata={"source_format": rules.source_format},
        source_file=str(rules.origin),
        clock=clock,
    )


def in_time_order(key: str, group: list[Said], rules: Rules) -> None:
    for previous, message in itertools.pairwise(group):
        if previous.time is not None and message.time is not None and message.time < previous.time:
            raise GenError(
                f"this message ({message.time:%Y-%m-%d %H:%M:%S}) is earlier than the one before it "
                f"({previous.where}, {previous.time:%Y-%m-%d %H:%M:%S}) in conversation {key}",
                file=rules.origin,
                record=message.where,
                field="time",
                expected="the messages of a session in time order (messages at the same time keep file order)",
            )


def in_session_order(key: str, groups: list[list[Said]], rules: Rules, clock: str) -> list[list[Said]]:
    """Sessions by their first time (stable); on an observed clock a session that starts before the previous one
    ends is refused. On a simulated clock a session without a time keeps its place."""
    if any(group[0].time is None for group in groups):
        return groups
    ordered = sorted(groups, key=lambda group: group[0].time or datetime.min)
    if clock == OBSERVED:
        for previous, current in itertools.pairwise(ordered):
            last, first = previous[-1].time, current[0].time
            assert last is not None and first is not None  # every message of an observed source has a time
            if first < last:
                raise GenError(
                    f"this session starts at {first:%Y-%m-%d %H:%M:%S}, before the session from {previous[0].where} "
                    f"ends at {last:%Y-%m-%d %H:%M:%S} (conversation {key})",
                    file=rules.origin,
                    record=current[0].where,
                    field="time",
                    expected="sessions of one conversation that do not overlap in time",
                )
    return ordered
