"""Canonical conversations → time-stamped responses, padding session, now/today/current session.

On an observed clock (Conversation.clock) every real response keeps its source's time and the sessions are the
source's, however close; only the padding session's times are simulated, after the last real response.

The rules are described in docs/timestamps.md (timestamps) and docs/padding-and-now.md (padding, now).
"""

from __future__ import annotations

import random
from bisect import bisect_left
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from fractions import Fraction
from pathlib import Path
from typing import Protocol, runtime_checkable

from gen.conversation import OBSERVED, Conversation, Session, Turn
from gen.errors import GenError
from gen.recipe import MinutesRange, PaddingSpec, TimelineSpec
from gen.sources._io import read_json, require_list, require_str


@dataclass(frozen=True, slots=True)
class Response:
    response_index: int  # 0-based over the whole conversation, padding last
    session_index: int  # 1-based
    turn_index: int  # 0-based within the session
    speaker: str
    text: str
    timestamp: datetime
    is_padding: bool
    source_turn_id: str | None = None
    image_caption: str | None = None


@dataclass(frozen=True)
class Timeline:
    conversation: Conversation
    responses: tuple[Response, ...]
    session_starts: tuple[datetime, ...]  # padding session included
    num_real_sessions: int
    now: datetime
    padding_donors: tuple[str, ...] = ()
    padding_after_minutes: float | None = None  # the offset chosen for this conversation; None without padding

    @property
    def conversation_id(self) -> str:
        return self.conversation.conversation_id

    @property
    def today(self) -> date:
        return self.now.date()

    @property
    def current_session(self) -> int:
        return len(self.session_starts) + 1

    @property
    def has_padding(self) -> bool:
        return len(self.session_starts) > self.num_real_sessions


def stamp_offsets(turns: Sequence[Turn], seconds_per_word: float) -> list[int]:
    """Seconds from the session start to each response: floor(seconds_per_word × words so far, own included).
    Exact arithmetic, so 0.46 × 50 is 23 and not 22.999…"""
    rate = Fraction(str(seconds_per_word))
    numerator, denominator = rate.numerator, rate.denominator
    offsets, words = [], 0
    for turn in turns:
        words += turn.word_count
        offsets.append(numerator * words // denominator)
    return offsets


def simulated_times(
    conversation: Conversation, session: Session, start: datetime, spec: TimelineSpec
) -> list[datetime]:
    """Each turn's time on a simulated clock: the session's start plus the speaking time of the turns before."""
    offsets = stamp_offsets(session.turns, spec.seconds_per_word)
    refuse_long_response(conversation, session, offsets, spec)
    return [start + timedelta(seconds=s) for s in offsets]


def refuse_long_response(conversation: Conversation, session: Session, offsets: list[int], spec: TimelineSpec) -> None:
    """On a simulated clock a response takes its words × seconds_per_word, and the gap to the response before it
    is that time; a response long enough for it to reach session_gap_minutes would break the rule that splits
    sessions back out of the log (no gap inside a session reaches it). Refused here, naming the response and the
    settings, rather than by the log validator once every product is built."""
    gap_seconds = spec.session_gap_minutes * 60
    for position in range(1, len(offsets)):
        taken = offsets[position] - offsets[position - 1]
        if taken >= gap_seconds:
            turn = session.turns[position]
            raise GenError(
                f"response {position + 1} of {session.label or 'a session'} has {turn.word_count:,} words, which "
                f"take {taken:,} s at seconds_per_word {spec.seconds_per_word:g}: not below session_gap_minutes "
                f"{spec.session_gap_minutes:g}, so the session would split in two",
                file=conversation.source_file,
                record=conversation.conversation_id,
                field="timeline.session_gap_minutes",
                expected=f"a session_gap_minutes above {taken / 60:,.1f} or a lower seconds_per_word in the recipe's "
                "timeline, or the source's own times (`clock: observed`)",
            )


def ceil_to_second(moment: datetime) -> datetime:
    return moment if not moment.microsecond else moment.replace(microsecond=0) + timedelta(seconds=1)


@runtime_checkable
class DonorPool(Protocol):
    """Where donor padding draws from: the ids of the source's conversations that have sessions, sorted, and
    each of them by id (gen/sources/store.py keeps a run's on disk; `Donors` holds a few in memory)."""

    def donor_ids(self) -> Sequence[str]: ...
    def donor(self, conversation_id: str) -> Conversation: ...


class Donors:
    """A donor pool of conversations held in memory."""

    def __init__(self, conversations: Iterable[Conversation]) -> None:
        self._by_id = {c.conversation_id: c for c in conversations if c.sessions}
        self._ids = sorted(self._by_id)

    def donor_ids(self) -> Sequence[str]:
        return self._ids

    def donor(self, conversation_id: str) -> Conversation:
        return self._by_id[conversation_id]


def build_timeline(
    conversation: Conversation, spec: TimelineSpec, donors: DonorPool | Iterable[Conversation] = (), seed: int = 0
) -> Timeline:
    pool = donors if isinstance(donors, DonorPool) else Donors(donors)
    try:
        return place_on_clock(conversation, spec, pool, seed)
    except OverflowError:  # a date near the year 9999 and long gaps: a timestamp past what a date can hold
        raise GenError(
            "a timestamp would fall after the year 9999",
            file=conversation.source_file,
            record=conversation.conversation_id,
            field="session start",
            expected="session dates and timeline settings (gaps, offsets, seconds_per_word) that stay within "
            "the years 1000 to 9999",
        ) from None


def place_on_clock(conversation: Conversation, spec: TimelineSpec, donors: DonorPool, seed: int) -> Timeline:
    sessions = list(conversation.sessions)
    gap = timedelta(minutes=spec.session_gap_minutes)
    starts: list[datetime] = []
    stamped: list[list[datetime]] = []
    observed = conversation.clock == OBSERVED
    for number, session in enumerate(sessions, start=1):
        if observed:  # the source's own times; its reader refused missing times and overlaps (sources/messages.py)
            starts.append(session_start(session, starts, stamped, spec))
            stamped.append([turn.time or starts[-1] for turn in session.turns])
            continue
        start = session_start(session, starts, stamped, spec)
        if stamped and start - stamped[-1][-1] <= gap:
            start = resolve_overlap(conversation, sessions, number, start, stamped[-1][-1], spec)
        starts.append(start)
        stamped.append(simulated_times(conversation, session, start, spec))

    padding, donor_ids = padding_turns(conversation, spec.padding, donors, seed)
    after_minutes = padding_offset(spec.padding, seed, conversation.conversation_id) if padding else None
    if padding:
        assert after_minutes is not None
        last_start, last_response = starts[-1], stamped[-1][-1]
        start = ceil_to_second(
            max(last_start + timedelta(minutes=after_minutes), last_response + gap + timedelta(minutes=1))
        )
        sessions.append(Session(turns=tuple(padding), start=start, label="padding"))
        starts.append(start)
        stamped.append(simulated_times(conversation, sessions[-1], start, spec))

    responses: list[Response] = []
    for session_number, (session, stamps) in enumerate(zip(sessions, stamped), start=1):
        is_padding = session_number > len(conversation.sessions)
        for turn_index, (turn, stamp) in enumerate(zip(session.turns, stamps)):
            responses.append(
                Response(
                    response_index=len(responses),
                    session_index=session_number,
                    turn_index=turn_index,
                    speaker=turn.speaker,
                    text=turn.text,
                    timestamp=stamp,
                    is_padding=is_padding,
                    source_turn_id=None if is_padding else turn.source_turn_id,
                    image_caption=turn.image_caption,
                )
            )
    now = responses[-1].timestamp + timedelta(minutes=spec.now_offset_minutes)
    return Timeline(
        conversation=conversation,
        responses=tuple(responses),
        session_starts=tuple(starts),
        num_real_sessions=len(conversation.sessions),
        now=now,
        padding_donors=tuple(donor_ids),
        padding_after_minutes=after_minutes,
    )


def padding_offset(spec: PaddingSpec, seed: int, conversation_id: str) -> float:
    """`after_minutes` for one conversation. A list or range is sampled from (seed, conversation id) alone,
    on its own stream, so the choice is the same in any worker and does not move the donor choice."""
    option = spec.after_minutes
    if not isinstance(option, (list, MinutesRange)):
        return float(option)
    rng = random.Random(f"{seed}/padding-offset/{conversation_id}")
    choices = option if isinstance(option, list) else option.choices
    return float(rng.choice(choices))


def session_start(
    session: Session, starts: list[datetime], stamped: list[list[datetime]], spec: TimelineSpec
) -> datetime:
    if session.start is not None:
        return session.start
    if not starts:
        return spec.anchor_start.replace(microsecond=0)
    return ceil_to_second(stamped[-1][-1] + (session.gap_before or timedelta(0)))


def resolve_overlap(
    conversation: Conversation,
    sessions: list[Session],
    number: int,
    start: datetime,
    previous_end: datetime,
    spec: TimelineSpec,
) -> datetime:
    if spec.shift_overlapping:
        return previous_end + timedelta(minutes=spec.session_gap_minutes + 1)
    previous, current = sessions[number - 2], sessions[number - 1]
    raise GenError(
        f"{previous.label or f'session {number - 1}'} ends at {previous_end:%Y-%m-%d %H:%M:%S}, "
        f"which is not more than {spec.session_gap_minutes:g} minutes before "
        f"{current.label or f'session {number}'} starts at {start:%Y-%m-%d %H:%M:%S}",
        file=conversation.source_file,
        record=conversation.conversation_id,
        field="session start",
        expected="sessions separated by more than timeline.session_gap_minutes, or timeline.shift_overlapping: true",
    )


def padding_turns(
    conversation: Conversation, spec: PaddingSpec, donors: DonorPool, seed: int
) -> tuple[list[Turn], list[str]]:
    if spec.mode == "none":
        return [], []
    if spec.mode == "file":
        assert spec.path is not None  # PaddingSpec requires a path in mode `file`
        return file_padding(spec.path, conversation.speakers), []
    return donor_padding(conversation, spec.target_words, donors, seed)


def donor_padding(
    conversation: Conversation, target_words: int, donors: DonorPool, seed: int
) -> tuple[list[Turn], list[str]]:
    """Consecutive sessions of a donor chosen by seed (wrapping round, then the next donor by id) until the
    target. Only the donors used are read."""
    ids = donors.donor_ids()
    if not any(i != conversation.conversation_id for i in ids[:2]):  # ids are distinct: two hold another one
        raise GenError(
            "padding mode `donor` needs another conversation from the same source, and there is none",
            file=conversation.source_file,
            record=conversation.conversation_id,
            field="timeline.padding.mode",
            expected="a source with two or more conversations, or padding mode `none` or `file`",
        )
    read: dict[str, Conversation] = {}

    def donor(donor_id: str) -> Conversation:
        if donor_id not in read:
            read[donor_id] = donors.donor(donor_id)
        return read[donor_id]

    def session_words(donor_id: str) -> list[int]:
        return [session.word_count for session in donor(donor_id).sessions]

    turns: list[Turn] = []
    used: list[str] = []
    words = 0
    for donor_id, begin in donor_choice(conversation.conversation_id, ids, session_words, target_words, seed):
        chosen = donor(donor_id)
        rename = dict(zip(chosen.speakers, conversation.speakers))
        used.append(donor_id)
        for session in chosen.sessions[begin:] + chosen.sessions[:begin]:
            turns.extend(Turn(speaker=rename.get(t.speaker, t.speaker), text=t.text) for t in session.turns)
            words += session.word_count
            if words >= target_words:
                return turns, used
    return turns, used


def donor_choice(
    conversation_id: str,
    ids: Sequence[str],
    session_words: Callable[[str], Sequence[int]],
    target_words: int,
    seed: int,
) -> list[tuple[str, int]]:
    """(donor id, first session) of every donor a conversation's padding reads, in order: from the donor drawn
    by seed, each with its sessions from one drawn by seed (wrapping round), until their words reach the
    target. It needs each donor's words per session only, so a run can tell which conversations a shard
    will read without reading them (gen/pipeline/executors.py sends a Ray task only those)."""
    own = bisect_left(ids, conversation_id)
    if own < len(ids) and ids[own] == conversation_id:  # never its own donor
        ids = [*ids[:own], *ids[own + 1 :]]
    if not ids:
        return []
    rng = random.Random(f"{seed}/{conversation_id}")
    first = rng.randrange(len(ids))
    chosen: list[tuple[str, int]] = []
    words = 0
    for step in range(len(ids)):
        donor_id = ids[(first + step) % len(ids)]
        counts = list(session_words(donor_id))
        begin = rng.randrange(len(counts))
        chosen.append((donor_id, begin))
        for count in counts[begin:] + counts[:begin]:
            words += count
            if words >= target_words:
                return chosen
    return chosen


def file_padding(path: Path, speakers: tuple[str, str]) -> list[Turn]:
    """A JSON list of {speaker, text}; its speakers, in order of appearance, become the conversation's two."""
    raw = require_list(
        read_json(path, "a JSON list of {speaker, text}"),
        file=path,
        record="top level",
        field="(list)",
        expected="a JSON list of {speaker, text}",
    )
    names: list[str] = []
    turns = []
    for index, item in enumerate(raw):
        where = f"turn {index + 1}"
        item = item if isinstance(item, dict) else {}
        name = require_str(item.get("speaker"), file=path, record=where, field="speaker")
        text = require_str(item.get("text"), file=path, record=where, field="text")
        if name not in names:
            names.append(name)
        if len(names) > 2:
            raise GenError(
                f"a third speaker {name!r}",
                file=path,
                record=where,
                field="speaker",
                expected="a dialogue between two speakers",
            )
        turns.append(Turn(speaker=speakers[names.index(name)], text=text))
    if not turns:
        raise GenError("no turns", file=path, expected="a JSON list of {speaker, text}")
    return turns
