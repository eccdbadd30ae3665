"""Time-stamped per-response logs (config `log`), and the invariants of the timestamps (docs/timestamps.md)."""

from __future__ import annotations

from collections.abc import Iterator

from gen.calendar_names import weekday_name
from gen.products.base import BuildContext, ConfigSpec, ConversationProduct, Needs, Record, Records, Unit
from gen.products.chat_log import checking
from gen.products.chat_log.options import LogOptions
from gen.products.checks import Checks
from gen.products.schema import BOOL, DATE, INT64, STRING, TIMESTAMP, Schema, schema
from gen.timeline import Response, Timeline


def record(conversation_id: str, response: Response) -> dict:
    stamp = response.timestamp
    year, week, _ = stamp.isocalendar()
    return {
        "conversation_id": conversation_id,
        "response_index": response.response_index,
        "session_index": response.session_index,
        "turn_index": response.turn_index,
        "source_turn_id": response.source_turn_id,
        "speaker": response.speaker,
        "text": response.text,
        "timestamp": stamp.isoformat(timespec="seconds"),
        "date": stamp.date().isoformat(),
        "time": stamp.strftime("%H:%M:%S"),
        "day_name": weekday_name(stamp),
        "week": f"{year}-W{week:02d}",
        "is_padding": response.is_padding,
        "image_caption": response.image_caption,
    }


def records(timeline: Timeline) -> Iterator[dict]:
    for response in timeline.responses:
        yield record(timeline.conversation_id, response)


def features() -> Schema:
    return schema(
        {
            "conversation_id": STRING,
            "response_index": INT64,
            "session_index": INT64,
            "turn_index": INT64,
            "source_turn_id": STRING,
            "speaker": STRING,
            "text": STRING,
            "timestamp": TIMESTAMP,  # the JSONL holds the ISO text; the parquet export parses it
            "date": DATE,
            "time": STRING,
            "day_name": STRING,
            "week": STRING,
            "is_padding": BOOL,
            "image_caption": STRING,
        }
    )


class Log(ConversationProduct[LogOptions]):
    name = "log"
    description = "one record per response with its timestamp (observed or simulated)"
    Options = LogOptions
    configs = (ConfigSpec("log", "one record per response with its timestamp (observed or simulated)", features()),)
    needs = Needs(timelines=True)

    def records(self, unit: Unit, ctx: BuildContext) -> Iterator[tuple[str, Record]]:
        for row in records(unit.stamped):
            yield "log", row

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        checking.check_log(unit, records["log"], ctx.recipe.timeline.session_gap_minutes, checks)
