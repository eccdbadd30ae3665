"""MSC in ParlAI's session files, MSC-Self-Instruct records, and MSC persona pairs."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from datetime import timedelta
from typing import Any

from gen.conversation import Conversation, Session, Turn
from gen.errors import GenError
from gen.sources._io import require_list, require_str

SPEAKERS = ("Speaker 1", "Speaker 2")
UNITS = {
    "minute": timedelta(minutes=1),
    "hour": timedelta(hours=1),
    "day": timedelta(days=1),
    "week": timedelta(weeks=1),
}


def gap(previous: dict, *, file, record: str) -> timedelta:
    """`time_num` + `time_unit` of previous dialog k: from the end of session k to the start of session k+1."""
    number, unit = previous.get("time_num"), previous.get("time_unit")
    if not isinstance(number, (int, float)) or not 0 <= number < math.inf:
        raise GenError(f"got {number!r}", file=file, record=record, field="time_num", expected="a number >= 0")
    base = UNITS.get(str(unit).strip().lower().rstrip("s"))
    if base is None:
        raise GenError(
            f"unknown time unit {unit!r}",
            file=file,
            record=record,
            field="time_unit",
            expected=f"one of {', '.join(u + '(s)' for u in UNITS)}",
        )
    try:
        return base * number
    except OverflowError:
        raise GenError(
            f"{number} {unit} is too long",
            file=file,
            record=record,
            field="time_num",
            expected="at most 999999999 days",
        ) from None


def speaker_ids(raw_turns: list[dict]) -> list[str]:
    """ParlAI ids; a numeric worker id in place of 'Speaker N' is resolved by alternation."""
    ids = [turn.get("id") if isinstance(turn, dict) else None for turn in raw_turns]
    known_at, known = next(((i, v) for i, v in enumerate(ids) if v in SPEAKERS), (0, SPEAKERS[0]))
    resolved: list[str] = []
    for index, value in enumerate(ids):
        if value in SPEAKERS:
            resolved.append(value)
        elif resolved:
            resolved.append(SPEAKERS[1 - SPEAKERS.index(resolved[-1])])
        else:  # before the first known id: count back from it
            resolved.append(SPEAKERS[(SPEAKERS.index(known) + known_at - index) % 2])
    return resolved


def session_turns(raw_turns: Any, speakers: list[str], *, file, record: str, field: str) -> tuple[Turn, ...]:
    raw_turns = require_list(raw_turns, file=file, record=record, field=field, expected="a list of turns")
    if not raw_turns:
        raise GenError("empty session", file=file, record=record, field=field, expected="at least one turn")
    turns = []
    for index, (raw, speaker) in enumerate(zip(raw_turns, speakers)):
        where = f"{record}, turn {index + 1}"
        if not isinstance(raw, dict):
            raise GenError("turn is not an object", file=file, record=where, field=field, expected='{"text": ...}')
        text = require_str(raw.get("text"), file=file, record=where, field="text")
        turns.append(Turn(speaker=speaker, text=text.strip()))
    return tuple(turns)


def parse_sessions(record: dict, conversation_id: str, file) -> tuple[Session, ...]:
    previous = require_list(
        record.get("previous_dialogs", []),
        file=file,
        record=conversation_id,
        field="previous_dialogs",
        expected="a list of earlier sessions",
    )
    sessions = []
    for k, dialog in enumerate(previous):
        label = f"previous_dialogs[{k}]"
        raw = dialog.get("dialog") if isinstance(dialog, dict) else None
        raw = require_list(
            raw, file=file, record=f"{conversation_id}, {label}", field="dialog", expected="a list of turns"
        )
        alternating = [SPEAKERS[i % 2] for i in range(len(raw))]  # no ids: alternate from Speaker 1
        turns = session_turns(raw, alternating, file=file, record=f"{conversation_id}, {label}", field="dialog")
        gap_before = (
            gap(previous[k - 1], file=file, record=f"{conversation_id}, previous_dialogs[{k - 1}]") if k else None
        )
        sessions.append(Session(turns=turns, gap_before=gap_before, label=label))
    current = require_list(
        record.get("dialog"), file=file, record=conversation_id, field="dialog", expected="a list of turns"
    )
    turns = session_turns(current, speaker_ids(current), file=file, record=f"{conversation_id}, dialog", field="dialog")
    last_gap = (
        gap(previous[-1], file=file, record=f"{conversation_id}, previous_dialogs[{len(previous) - 1}]")
        if previous
        else None
    )
    sessions.append(Session(turns=turns, gap_before=last_gap, label="dialog"))
    return tuple(sessions)


def episode_id(record: dict, position: int) -> str:
    metadata = record.get("metadata")
    if not isinstance(metadata, dict):
        metadata = {}
    return str(metadata.get("initial_data_id") or record.get("initial_data_id") or f"episode-{position}")


def personas_of(record: dict, key: str, conversation_id: str, file) -> dict[str, list[str]]:
    """Each speaker's persona facts, from `key` (personas, init_personas): two lists of facts, or nothing."""
    personas = record.get(key)
    if not (isinstance(personas, list) and len(personas) == 2):
        return {}
    for i, facts in enumerate(personas):
        require_list(facts, file=file, record=conversation_id, field=f"{key}[{i}]", expected="a list of facts")
    return {SPEAKERS[i]: [str(p) for p in personas[i]] for i in range(2)}


def parse(records: Iterable[dict], origin, prefix: str = "msc") -> Iterator[Conversation]:
    for position, record in enumerate(records):
        if not isinstance(record, dict):
            raise GenError(
                "record is not an object",
                file=origin,
                record=f"line {position + 1}",
                expected="a ParlAI MSC session record",
            )
        conversation_id = f"{prefix}/{episode_id(record, position)}"
        metadata: dict[str, Any] = {"source_format": prefix.replace("-", "_")}
        if isinstance(record.get("self_instruct"), dict):
            metadata["self_instruct"] = {
                "question": record["self_instruct"].get("B"),
                "answer": record["self_instruct"].get("A"),
            }
        initial = personas_of(record, "init_personas", conversation_id, origin)
        if initial:  # the PersonaChat personas the episode began with (persona products may use them)
            metadata["init_personas"] = initial
        for speaker in (1, 2):
            if f"summary_speaker_{speaker}" in record:
                metadata[f"summary_speaker_{speaker}"] = record[f"summary_speaker_{speaker}"]
        yield Conversation(
            conversation_id=conversation_id,
            speakers=SPEAKERS,
            sessions=parse_sessions(record, conversation_id, origin),
            personas=personas_of(record, "personas", conversation_id, origin),
            metadata=metadata,
            source_file=str(origin),
        )


def parse_self_instruct(records: Iterable[dict], origin) -> Iterator[Conversation]:
    return parse(records, origin, prefix="msc-si")


def parse_personas(data: Any, origin) -> Iterator[Conversation]:
    """`{"train": [pair, ...], ...}` or a bare list of `{"Speaker 1": [...], "Speaker 2": [...]}`: personas only."""
    splits = data.items() if isinstance(data, dict) else [("all", data)]
    for split, pairs in splits:
        pairs = require_list(
            pairs, file=origin, record=str(split), field=str(split), expected="a list of persona pairs"
        )
        for position, pair in enumerate(pairs):
            record = f"{split}[{position}]"
            personas = {}
            for speaker in SPEAKERS:
                facts = require_list(
                    pair.get(speaker) if isinstance(pair, dict) else None,
                    file=origin,
                    record=record,
                    field=speaker,
                    expected="a list of persona sentences",
                )
                personas[speaker] = [require_str(f, file=origin, record=record, field=speaker) for f in facts]
            yield Conversation(
                conversation_id=f"msc-personas/{split}-{position}",
                speakers=SPEAKERS,
                sessions=(),
                personas=personas,
                metadata={"source_format": "msc_personas", "split": split},
                source_file=str(origin),
            )
