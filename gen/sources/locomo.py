"""LoCoMo: a list of samples, a single sample, or a bare `conversation` dict."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any, NoReturn

from gen.calendar_names import parse_locomo_date
from gen.conversation import MIN_YEAR, Conversation, DataWarning, Session, Turn
from gen.errors import GenError
from gen.sources._io import require_list, require_str

SESSION_KEY = re.compile(r"^session_(\d+)$")
MAX_SESSION_NUMBER = 10_000  # the N of session_N: LoCoMo's conversations have at most 35 sessions
DATE_EXAMPLE = 'a date like "1:56 pm on 8 May, 2023"'
YEAR_AT_END = re.compile(r"(\d+)\s*$")
EXPECTED_FILE = "a LoCoMo JSON file: a list of samples, one sample, or a bare conversation dict"


def parse_date(text: Any, *, file, record: str, field: str) -> datetime:
    value = require_str(text, file=file, record=record, field=field, expected=DATE_EXAMPLE)
    year = YEAR_AT_END.search(value)
    if year and int(year.group(1)) < MIN_YEAR:
        raise GenError(
            f"the year of {value!r} is {int(year.group(1))}, before {MIN_YEAR}",
            file=file,
            record=record,
            field=field,
            expected=f"a four-digit year, {MIN_YEAR} to 9999, in {DATE_EXAMPLE}",
        )
    try:
        return parse_locomo_date(value)
    except ValueError:
        raise GenError(
            f"cannot parse date {value!r}",
            file=file,
            record=record,
            field=field,
            expected=f"{DATE_EXAMPLE}: hour:minute am/pm on day month, year",
        ) from None


def as_samples(values: Iterable[Any], default_id: str, file: Any) -> Iterator[Any]:
    """The three accepted shapes as samples {"sample_id", "conversation"}: `values` are the items of a top-level
    list (samples), or the one top-level object (a sample, or a bare conversation dict)."""
    for value in values:
        if isinstance(value, dict) and "conversation" not in value and "speaker_a" in value:
            yield {"sample_id": default_id, "conversation": value}
        else:
            yield value


def parse(data: Any, origin: Any, default_id: str = "conversation") -> Iterator[Conversation]:
    """`data`: the parsed file (a list of samples, one sample, or a bare conversation dict), or an iterator
    over its samples as `gen.sources._io.stream_records` gives them."""
    values = [data] if isinstance(data, dict) else data
    if not isinstance(values, Iterable) or isinstance(values, str | bytes):
        raise GenError("unrecognised top-level value", file=origin, expected=EXPECTED_FILE)
    for position, sample in enumerate(as_samples(values, default_id, origin)):
        if not isinstance(sample, dict) or not isinstance(sample.get("conversation"), dict):
            raise GenError(
                "sample has no `conversation` object",
                file=origin,
                record=f"sample {position}",
                field="conversation",
                expected=EXPECTED_FILE,
            )
        sample_id = str(sample.get("sample_id") or f"{default_id}-{position}")
        yield parse_conversation(sample["conversation"], sample_id, origin)


def parse_conversation(conversation: dict, sample_id: str, origin) -> Conversation:
    speakers = conversation_speakers(conversation, sample_id, origin)
    numbers = session_numbers(conversation, sample_id, origin)
    sessions: list[Session] = []
    for number in numbers:  # a session_N_date_time without session_N is ignored
        label = f"session_{number}"
        record = f"{sample_id}, {label}"
        start = parse_date(
            conversation.get(f"{label}_date_time"), file=origin, record=record, field=f"{label}_date_time"
        )
        raw_turns = require_list(
            conversation[label], file=origin, record=record, field=label, expected="a list of turns"
        )
        if not raw_turns:
            raise GenError("empty session", file=origin, record=record, field=label, expected="at least one turn")
        turns = tuple(parse_turn(raw, speakers, origin, record, index) for index, raw in enumerate(raw_turns))
        previous_start = sessions[-1].start if sessions else None
        if previous_start is not None and start <= previous_start:
            raise GenError(
                f"session starts {start:%Y-%m-%d %H:%M}, not after {sessions[-1].label} "
                f"({previous_start:%Y-%m-%d %H:%M})",
                file=origin,
                record=record,
                field=f"{label}_date_time",
                expected="sessions in chronological order",
            )
        sessions.append(Session(turns=turns, start=start, label=label))
    refuse_repeated_turn_ids(sessions, sample_id, origin)
    return Conversation(
        conversation_id=f"locomo/{sample_id}",
        speakers=speakers,
        sessions=tuple(sessions),
        metadata={"source_format": "locomo", "sample_id": sample_id},
        source_file=str(origin),
    )


def conversation_speakers(conversation: dict, sample_id: str, origin) -> tuple[str, str]:
    speakers = (
        require_str(conversation.get("speaker_a"), file=origin, record=sample_id, field="speaker_a"),
        require_str(conversation.get("speaker_b"), file=origin, record=sample_id, field="speaker_b"),
    )
    if speakers[0] == speakers[1]:  # every turn would belong to both: who said what is lost
        raise GenError(
            f"speaker_a and speaker_b are both {speakers[0]!r}",
            file=origin,
            record=sample_id,
            field="speaker_b",
            expected="two different speaker names",
        )
    return speakers


def session_numbers(conversation: dict, sample_id: str, origin) -> list[int]:
    """The N of every session_N key, in order; numbers skipped on the way are named in a warning (the sessions
    are numbered by their order, so the output's session numbers then differ from the source's)."""
    numbers = sorted(
        session_number(m.group(1), sample_id, origin) for key in conversation if (m := SESSION_KEY.match(key))
    )
    if not numbers:
        raise GenError(
            "no sessions",
            file=origin,
            record=sample_id,
            field="session_1",
            expected="keys session_N with a list of turns",
        )
    if skipped := sorted(set(range(1, numbers[-1])) - set(numbers)):  # numbers[-1] <= MAX_SESSION_NUMBER
        renumbered = [f"session_{n} is session {index}" for index, n in enumerate(numbers, start=1) if n != index]
        warnings.warn(
            DataWarning(
                f"{origin}: {sample_id}: no {', '.join(f'session_{n}' for n in skipped)}; sessions are numbered in "
                f"order, so {', '.join(renumbered)} in the output"
            ),
            stacklevel=2,
        )
    return numbers


def session_number(digits: str, sample_id: str, origin) -> int:
    """The N of a session_N key, refused past MAX_SESSION_NUMBER before it is read as a number: the sessions
    skipped are listed, and a key like session_99999999 would stand for a hundred million of them."""
    if len(digits) > len(str(MAX_SESSION_NUMBER)) or int(digits) > MAX_SESSION_NUMBER:
        raise GenError(
            f"session number {digits[:20]}{'…' if len(digits) > 20 else ''} is too large",
            file=origin,
            record=sample_id,
            field=f"session_{digits[:20]}",
            expected=f"keys session_1 to session_{MAX_SESSION_NUMBER:,}",
        )
    return int(digits)


def refuse_repeated_turn_ids(sessions: list[Session], sample_id: str, origin) -> None:
    """A dia_id names one turn: records point back to the corpus by it, so two turns with one id are refused."""
    seen: dict[str, str] = {}
    for session in sessions:
        for index, turn in enumerate(session.turns):
            where = f"{session.label}, turn {index + 1}"
            if turn.source_turn_id is None:
                continue
            if turn.source_turn_id in seen:
                raise GenError(
                    f"turn id {turn.source_turn_id!r} is used twice: {seen[turn.source_turn_id]} and {where}",
                    file=origin,
                    record=f"{sample_id}, {where}",
                    field="dia_id",
                    expected="a different dia_id for every turn of a conversation",
                )
            seen[turn.source_turn_id] = where


def parse_turn(raw: Any, speakers: tuple[str, str], origin: Any, record: str, index: int) -> Turn:
    speaker = raw.get("speaker") if isinstance(raw, dict) else None
    text = raw.get("text") if isinstance(raw, dict) else None
    turn_id = raw.get("dia_id") if isinstance(raw, dict) else None
    if speaker not in speakers or not isinstance(text, str) or not text.strip() or not isinstance(turn_id, str | None):
        turn_error(raw, speakers, origin, record, index)
    caption = raw.get("blip_caption")
    return Turn(
        speaker=speakers[speakers.index(speaker)],  # the conversation's own string: one copy, not one per turn
        text=text,
        source_turn_id=turn_id,
        image_caption=caption if isinstance(caption, str) else None,
    )


def turn_error(raw: Any, speakers: tuple[str, str], origin: Any, record: str, index: int) -> NoReturn:
    """The one error a bad turn gets (checked only once a turn has failed the quick test in parse_turn)."""
    turn_id = raw.get("dia_id") if isinstance(raw, dict) else None
    where = f"{record}, turn {turn_id if isinstance(turn_id, str) and turn_id else index + 1}"
    if not isinstance(raw, dict):
        raise GenError("turn is not an object", file=origin, record=where, expected="{speaker, text, dia_id}")
    if not isinstance(turn_id, str | None):
        raise GenError(f"got {type(turn_id).__name__}", file=origin, record=where, field="dia_id", expected="a string")
    speaker = require_str(raw.get("speaker"), file=origin, record=where, field="speaker")
    if speaker not in speakers:
        raise GenError(
            f"speaker {speaker!r} is neither speaker_a nor speaker_b",
            file=origin,
            record=where,
            field="speaker",
            expected=" or ".join(repr(s) for s in speakers),
        )
    require_str(raw.get("text"), file=origin, record=where, field="text")
    raise AssertionError("turn_error is called only for a bad turn")
