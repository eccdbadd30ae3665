"""Time-stamped per-response logs (config `log`), and the invariants of the timestamps (docs/timestamps.md)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta

from gen.products.base import BuildContext, ConfigSpec, ConversationProduct, Needs, Record, Records, Unit
from gen.products.checks import Checks
from gen.products.schema import BOOL, DATE, INT64, STRING, TIMESTAMP, Schema, schema
from gen.recipe import StrictModel
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
        "day_name": stamp.strftime("%A"),
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


class Options(StrictModel):
    pass


class Log(ConversationProduct[Options]):
    name = "log"
    description = "one record per response with its simulated timestamp"
    Options = Options
    configs = (ConfigSpec("log", "one record per response with its simulated timestamp", features()),)
    needs = Needs(timelines=True)

    def records(self, unit: Unit, ctx: BuildContext) -> Iterator[tuple[str, Record]]:
        for row in records(unit.stamped):
            yield "log", row

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        """Check the timestamp invariants from the written strings alone (parsed back), against the source's
        turn count: every real turn once, padding after them."""
        group = records["log"]
        conversation = unit.conversation
        real_turns = sum(len(session.turns) for session in conversation.sessions)
        real = [row for row in group if not row["is_padding"]]
        checks.check(
            "one record per real turn",
            len(real) == real_turns,
            f"{unit.conversation_id}: {len(real)} records, {real_turns} turns",
        )
        gap = timedelta(minutes=ctx.recipe.timeline.session_gap_minutes)
        check_conversation(unit.conversation_id, group, gap, checks)


def check_conversation(conversation_id: str, group: list[dict], gap: timedelta, checks: Checks) -> None:
    stamps = [datetime.fromisoformat(row["timestamp"]) for row in group]
    for position, (row, stamp) in enumerate(zip(group, stamps)):
        where = f"{conversation_id} response {row['response_index']}"
        checks.check("response_index is 0..n-1 in order", row["response_index"] == position, where)
        checks.check(
            "date, time, day_name and week agree with timestamp",
            (row["date"], row["time"], row["day_name"], row["week"])
            == (f"{stamp:%Y-%m-%d}", f"{stamp:%H:%M:%S}", f"{stamp:%A}", f"{stamp:%G-W%V}"),
            where,
        )
        if position == 0:
            continue
        previous, delta = group[position - 1], stamp - stamps[position - 1]
        checks.check("timestamps never decrease", delta >= timedelta(0), where)
        if row["session_index"] == previous["session_index"]:
            checks.check(
                "turn_index counts up within a session", row["turn_index"] == previous["turn_index"] + 1, where
            )
            checks.check("gaps within a session stay below session_gap_minutes", delta < gap, f"{where}: {delta}")
        else:
            checks.check(
                "sessions follow in order",
                row["session_index"] == previous["session_index"] + 1 and row["turn_index"] == 0,
                where,
            )
            checks.check("gaps between sessions exceed session_gap_minutes", delta > gap, f"{where}: {delta}")
    padding = [row["is_padding"] for row in group]
    checks.check("padding responses come last", padding == sorted(padding), conversation_id)
