"""One record per conversation: speakers, session starts, now, current session, counts (config `conversations`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path

from gen.products.base import BuildContext, ConfigSpec, ConversationProduct, Needs, Record, Records, Unit
from gen.products.checks import Checks
from gen.products.core.source_metadata import (
    METADATA_SHAPES,
    OTHER_METADATA,
    metadata_feature,
    personas_list,
    source_metadata,
)
from gen.products.schema import DATE, FLOAT64, INT64, STRING, TIMESTAMP, Schema, list_of, schema, struct
from gen.recipe import StrictModel
from gen.timeline import Timeline

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
        "padding_after_minutes": timeline.padding_after_minutes,
        "now": timeline.now.isoformat(timespec="seconds"),
        "today": timeline.today.isoformat(),
        "current_session": timeline.current_session,
        "num_responses": len(timeline.responses),
        "num_padding_responses": sum(r.is_padding for r in timeline.responses),
        "num_words": sum(len(r.text.split()) for r in timeline.responses),
        "personas": personas_list(conversation.personas),
        "source_format": metadata.pop("source_format", ""),
        "source_file": Path(conversation.source_file).name,
        "source_metadata": source_metadata(metadata),
    }


def features() -> Schema:
    return schema(
        {
            "conversation_id": STRING,
            "speaker_a": STRING,
            "speaker_b": STRING,
            "session_starts": list_of(TIMESTAMP),
            "num_sessions": INT64,
            "padding_session": INT64,
            "padding_donors": list_of(STRING),
            "padding_after_minutes": FLOAT64,
            "now": TIMESTAMP,
            "today": DATE,
            "current_session": INT64,
            "num_responses": INT64,
            "num_padding_responses": INT64,
            "num_words": INT64,
            "personas": list_of(struct({"speaker": STRING, "facts": list_of(STRING)})),
            "source_format": STRING,
            "source_file": STRING,
            "source_metadata": struct(
                {
                    **{key: metadata_feature(shape) for key, shape in METADATA_SHAPES.items()},
                    OTHER_METADATA: STRING,
                }
            ),
        }
    )


class Conversations(ConversationProduct[Options]):
    """Written whenever a product needs timelines: questions refer to its `now` and `current_session`."""

    name = "conversations"
    description = DESCRIPTION
    Options = Options
    configs = (ConfigSpec("conversations", DESCRIPTION, features()),)
    needs = Needs(timelines=True, products=("log",))

    def records(self, unit: Unit, ctx: BuildContext) -> Iterator[tuple[str, Record]]:
        yield "conversations", record(unit.stamped)

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        """Recompute now, current session and counts from the `log` records, not from the record code."""
        rows, log = records["conversations"], unit.records_of("log")
        where = unit.conversation_id
        if not checks.check(
            "one record per conversation",
            len(rows) == 1 and rows[0]["conversation_id"] == where,
            f"{where}: {len(rows)} records",
        ):
            return
        row = rows[0]
        offset = timedelta(minutes=ctx.recipe.timeline.now_offset_minutes)
        last = max(datetime.fromisoformat(r["timestamp"]) for r in log)
        checks.check(
            "now = last response + now_offset_minutes", datetime.fromisoformat(row["now"]) == last + offset, where
        )
        checks.check(
            "current_session = sessions (padding included) + 1",
            row["current_session"] == len({r["session_index"] for r in log}) + 1,
            where,
        )
        checks.check(
            "response counts match",
            row["num_responses"] == len(log) and row["num_padding_responses"] == sum(r["is_padding"] for r in log),
            where,
        )
        check_padding_start(row, log, ctx, checks)


def check_padding_start(row: Record, log: Sequence[Record], ctx: BuildContext, checks: Checks) -> None:
    """The padding offset is one `after_minutes` allows, and the padding session starts at the later of the
    last real session's start + that offset and its last response + session_gap_minutes + 1 minute."""
    where, offset = row["conversation_id"], row["padding_after_minutes"]
    if row["padding_session"] is None:
        checks.check("no padding offset without a padding session", offset is None, where)
        return
    timeline = ctx.recipe.timeline
    if not checks.check(
        "the padding offset is one timeline.padding.after_minutes allows",
        offset is not None and timeline.padding.allows(offset),
        f"{where}: {offset}",
    ):
        return
    starts = [datetime.fromisoformat(start) for start in row["session_starts"]]
    last_real = max(datetime.fromisoformat(r["timestamp"]) for r in log if not r["is_padding"])
    earliest = max(
        starts[row["num_sessions"] - 1] + timedelta(minutes=offset),
        last_real + timedelta(minutes=timeline.session_gap_minutes + 1),
    )
    if earliest.microsecond:  # starts fall on whole seconds
        earliest = earliest.replace(microsecond=0) + timedelta(seconds=1)
    checks.check(
        "the padding session starts at the later of (last start + offset) and (last response + gap + 1 minute)",
        starts[row["padding_session"] - 1] == earliest,
        f"{where}: {starts[row['padding_session'] - 1]} != {earliest}",
    )
