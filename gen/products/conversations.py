"""One record per conversation: speakers, session starts, now, current session, counts (SPEC §3.5)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Iterator

from gen.recipe import StrictModel
from gen.timeline import Timeline
from gen.validation import Checks

NAME = "conversations"
DESCRIPTION = "one record per conversation: speakers, session starts, now, current session, counts"


class Options(StrictModel):
    pass


def record(timeline: Timeline) -> dict:
    conversation = timeline.conversation
    metadata = dict(conversation.metadata)
    return {
        "conversation_id": timeline.conversation_id,
        "speaker_a": conversation.speakers[0],
        "speaker_b": conversation.speakers[1],
        "session_starts": [start.isoformat(timespec="seconds") for start in timeline.session_starts],
        "num_sessions": timeline.num_real_sessions,
        "padding_session": len(timeline.session_starts) if timeline.has_padding else None,
        "padding_donors": list(timeline.padding_donors),
        "now": timeline.now.isoformat(timespec="seconds"),
        "today": timeline.today.isoformat(),
        "current_session": timeline.current_session,
        "num_responses": len(timeline.responses),
        "num_padding_responses": sum(r.is_padding for r in timeline.responses),
        "num_words": sum(len(r.text.split()) for r in timeline.responses),
        "personas": [{"speaker": speaker, "facts": facts} for speaker, facts in conversation.personas.items()],
        "source_format": metadata.pop("source_format", ""),
        "source_file": Path(conversation.source_file).name,
        "source_metadata": json.dumps(metadata, sort_keys=True, ensure_ascii=False),
    }


def build(ctx, options: Options) -> Iterator[dict]:
    for timeline in ctx.timelines:
        yield record(timeline)


def validate(rows: list[dict], ctx, options: Options) -> Checks:
    """Recompute now, current session and counts from the timeline's responses, not from the record code."""
    checks = Checks()
    offset = timedelta(minutes=ctx.recipe.timeline.now_offset_minutes)
    by_id = {t.conversation_id: t for t in ctx.timelines}
    checks.check("one record per conversation", len(rows) == len(by_id) == len({r["conversation_id"] for r in rows}),
                 f"{len(rows)} records for {len(by_id)} conversations")
    for row in rows:
        timeline = by_id.get(row["conversation_id"])
        if not checks.check("conversation exists", timeline is not None, row["conversation_id"]):
            continue
        last = max(r.timestamp for r in timeline.responses)
        sessions = {r.session_index for r in timeline.responses}
        checks.check("now = last response + now_offset_minutes",
                     datetime.fromisoformat(row["now"]) == last + offset, row["conversation_id"])
        checks.check("current_session = sessions (padding included) + 1",
                     row["current_session"] == len(sessions) + 1, row["conversation_id"])
        checks.check("response counts match", row["num_responses"] == len(timeline.responses), row["conversation_id"])
    return checks


def features():
    from datasets import Features, List, Value

    return Features({
        "conversation_id": Value("string"), "speaker_a": Value("string"), "speaker_b": Value("string"),
        "session_starts": List(Value("string")), "num_sessions": Value("int64"),
        "padding_session": Value("int64"), "padding_donors": List(Value("string")), "now": Value("string"),
        "today": Value("string"), "current_session": Value("int64"), "num_responses": Value("int64"),
        "num_padding_responses": Value("int64"), "num_words": Value("int64"),
        "personas": List({"speaker": Value("string"), "facts": List(Value("string"))}),
        "source_format": Value("string"), "source_file": Value("string"), "source_metadata": Value("string"),
    })
