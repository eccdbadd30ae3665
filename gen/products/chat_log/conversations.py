"""One record per conversation: speakers, session starts, now, current session, counts (config `conversations`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from gen.products.base import BuildContext, ConfigSpec, ConversationProduct, Needs, Record, Records, Unit
from gen.products.chat_log import checking
from gen.products.chat_log.options import ConversationsOptions
from gen.products.chat_log.source_metadata import (
    METADATA_SHAPES,
    OTHER_METADATA,
    metadata_feature,
    personas_list,
    source_metadata,
)
from gen.products.checks import Checks
from gen.products.schema import DATE, FLOAT64, INT64, STRING, TIMESTAMP, Schema, list_of, schema, struct
from gen.timeline import Timeline

DESCRIPTION = "one record per conversation: speakers, session starts, now, current session, counts"


def record(timeline: Timeline) -> dict:
    conversation = timeline.conversation
    metadata = dict(conversation.metadata)
    return {
        "conversation_id": timeline.conversation_id,
        "speaker_a": conversation.speakers[0],
        "speaker_b": conversation.speakers[1],
        "clock": conversation.clock,
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
            "clock": STRING,
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


class Conversations(ConversationProduct[ConversationsOptions]):
    """Written whenever a product needs timelines: questions refer to its `now` and `current_session`."""

    name = "conversations"
    description = DESCRIPTION
    Options = ConversationsOptions
    configs = (ConfigSpec("conversations", DESCRIPTION, features()),)
    needs = Needs(timelines=True, products=("log",))

    def records(self, unit: Unit, ctx: BuildContext) -> Iterator[tuple[str, Record]]:
        yield "conversations", record(unit.stamped)

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        checking.check_conversations(unit, records["conversations"], ctx.recipe.timeline, checks)
