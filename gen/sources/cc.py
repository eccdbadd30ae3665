"""Conversation Chronicles layout: `first_session_dialogue` / `first_session_speakers` ... `fifth_...`,
with `time_interval` phrases ("A few days after") mapped to durations through a table the recipe can extend."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from datetime import timedelta

from gen.conversation import Conversation, Session, Turn
from gen.errors import GenError
from gen.sources._io import require_list, require_str

ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")

# Our reading of each phrase as one duration; a recipe overrides or extends it with `interval_phrases`.
DEFAULT_INTERVALS = {
    "a few hours after": "3 hours",
    "a few days after": "3 days",
    "a few weeks after": "3 weeks",
    "a few months after": "90 days",
    "a couple of years after": "730 days",
}
DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(minute|hour|day|week)s?\s*$", re.IGNORECASE)


def normalise(phrase: str) -> str:
    return " ".join(phrase.lower().split())


def parse_duration(text: str, *, where: str) -> timedelta:
    match = DURATION.match(text)
    if not match:
        raise GenError(
            f"cannot read duration {text!r}",
            record=where,
            field="interval_phrases",
            expected='a duration like "3 days", "12 hours", "2 weeks" or "30 minutes"',
        )
    number, unit = float(match.group(1)), match.group(2).lower()
    try:
        return timedelta(**{unit + "s": number})
    except OverflowError:
        raise GenError(
            f"duration {text!r} is too long", record=where, field="interval_phrases", expected="at most 999999999 days"
        ) from None


def interval_table(extra: dict[str, str] | None) -> dict[str, timedelta]:
    table = {**DEFAULT_INTERVALS, **{normalise(k): v for k, v in (extra or {}).items()}}
    return {phrase: parse_duration(value, where=f"phrase {phrase!r}") for phrase, value in table.items()}


def parse(
    records: Iterable[dict],
    origin,
    *,
    interval_phrases: dict[str, str] | None = None,
    default_interval: str | None = None,
) -> Iterator[Conversation]:
    table = interval_table(interval_phrases)
    for position, record in enumerate(records):
        if not isinstance(record, dict):
            raise GenError(
                "record is not an object",
                file=origin,
                record=f"record {position}",
                expected="a Conversation Chronicles episode",
            )
        episode = str(record.get("dataID") or f"episode-{position}")
        yield parse_episode(record, episode, origin, table, default_interval)


def parse_episode(record: dict, episode: str, origin, table, default_interval: str | None) -> Conversation:
    ordinals = [o for o in ORDINALS if f"{o}_session_dialogue" in record]
    if not ordinals:
        raise GenError(
            "no sessions",
            file=origin,
            record=episode,
            field="first_session_dialogue",
            expected="keys <ordinal>_session_dialogue and <ordinal>_session_speakers",
        )
    refuse_skipped_sessions(ordinals, record, episode, origin)
    intervals = interval_phrases_of(record, episode, origin, len(ordinals), default_interval)
    sessions, speakers = [], []
    for number, ordinal in enumerate(ordinals, start=1):
        where = f"{episode}, session {number}"
        texts = require_list(
            record.get(f"{ordinal}_session_dialogue"),
            file=origin,
            record=where,
            field=f"{ordinal}_session_dialogue",
            expected="a list of utterances",
        )
        names = require_list(
            record.get(f"{ordinal}_session_speakers"),
            file=origin,
            record=where,
            field=f"{ordinal}_session_speakers",
            expected="a list of speaker names, one per utterance",
        )
        if not texts:
            raise GenError(
                "empty session",
                file=origin,
                record=where,
                field=f"{ordinal}_session_dialogue",
                expected="at least one utterance",
            )
        if len(names) != len(texts):
            raise GenError(
                f"{len(names)} speakers for {len(texts)} utterances",
                file=origin,
                record=where,
                field=f"{ordinal}_session_speakers",
                expected="one speaker per utterance",
            )
        turns = []
        for index, (name, text) in enumerate(zip(names, texts)):
            turn_where = f"{where}, turn {index + 1}"
            name = require_str(name, file=origin, record=turn_where, field=f"{ordinal}_session_speakers").strip()
            text = require_str(text, file=origin, record=turn_where, field=f"{ordinal}_session_dialogue").strip()
            if name not in speakers:
                speakers.append(name)
            turns.append(Turn(speaker=name, text=text))
        gap_before = None if number == 1 else interval(intervals[number - 1], table, origin, where)
        sessions.append(Session(turns=tuple(turns), gap_before=gap_before, label=f"{ordinal}_session"))
    if len(speakers) != 2:
        raise GenError(
            f"{len(speakers)} distinct speakers ({', '.join(speakers)})",
            file=origin,
            record=episode,
            field="<ordinal>_session_speakers",
            expected="exactly two speakers",
        )
    metadata = {
        "source_format": "cc",
        "relationship": record.get("relationship"),
        "summary": record.get("summary"),
        "time_interval": intervals,
    }
    return Conversation(
        conversation_id=f"cc/{episode}",
        speakers=(speakers[0], speakers[1]),
        sessions=tuple(sessions),
        metadata=metadata,
        source_file=str(origin),
    )


def refuse_skipped_sessions(ordinals: list[str], record: dict, episode: str, origin) -> None:
    """Sessions must run first, second, ... with none left out: time_interval gives the gap before each session
    by position, so a skipped session would give every later session the wrong gap."""
    expected = list(ORDINALS[: ORDINALS.index(ordinals[-1]) + 1])
    if skipped := [o for o in expected if o not in ordinals]:
        raise GenError(
            f"no {', '.join(f'{o}_session_dialogue' for o in skipped)}, but {ordinals[-1]}_session_dialogue is there",
            file=origin,
            record=episode,
            field=f"{skipped[0]}_session_dialogue",
            expected="sessions first, second, ... with none skipped (their time_interval phrases go by position)",
        )


def interval_phrases_of(record: dict, episode: str, origin, count: int, default_interval: str | None) -> list[str]:
    phrases = record.get("time_interval")
    if phrases is None:
        if default_interval is None:
            raise GenError(
                "missing",
                file=origin,
                record=episode,
                field="time_interval",
                expected="a list of interval phrases, or the source option `default_interval`",
            )
        return ["Start"] + [default_interval] * (count - 1)
    phrases = require_list(
        phrases,
        file=origin,
        record=episode,
        field="time_interval",
        expected="a list of interval phrases, the first 'Start'",
    )
    if len(phrases) < count:
        raise GenError(
            f"{len(phrases)} phrases for {count} sessions",
            file=origin,
            record=episode,
            field="time_interval",
            expected="one phrase per session",
        )
    return [str(p) for p in phrases]


def interval(phrase: str, table: dict[str, timedelta], origin, where: str) -> timedelta:
    duration = table.get(normalise(phrase))
    if duration is None:
        raise GenError(
            f"unknown interval phrase {phrase!r}",
            file=origin,
            record=where,
            field="time_interval",
            expected=f"one of {sorted(table)}, or map it with the source option "
            f'`interval_phrases: {{"{phrase}": "3 days"}}`',
        )
    return duration
