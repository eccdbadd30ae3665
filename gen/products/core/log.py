"""Time-stamped per-response logs (config `log`), and the invariants of the timestamps (docs/timestamps.md)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gen.calendar_names import weekday_name
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
    """Each check over every response (or consecutive pair); a failure's detail is written only when it fails."""
    stamps = [datetime.fromisoformat(row["timestamp"]) for row in group]

    def where(position: int) -> str:
        return f"{conversation_id} response {group[position]['response_index']}"

    checks.add(
        "response_index is 0..n-1 in order",
        len(group),
        [where(p) for p, row in enumerate(group) if row["response_index"] != p],
    )
    week_of: dict[str, tuple[str, str]] = {}  # day → (day name, ISO week): many responses share a day
    disagreeing = []
    for position, (row, stamp) in enumerate(zip(group, stamps)):
        day = stamp.date().isoformat()
        if day not in week_of:
            week_of[day] = (weekday_name(stamp), f"{stamp:%G-W%V}")
        if (row["date"], row["time"], row["day_name"], row["week"]) != (day, f"{stamp:%H:%M:%S}", *week_of[day]):
            disagreeing.append(where(position))
    checks.add("date, time, day_name and week agree with timestamp", len(group), disagreeing)
    check_pairs(group, stamps, gap, checks, where)
    padding = [row["is_padding"] for row in group]
    checks.check("padding responses come last", padding == sorted(padding), conversation_id)


@dataclass
class PairChecks:
    """The two checks of one kind of consecutive pair (same session, or the next session)."""

    order_name: str
    gap_name: str
    pairs: int = 0
    order_failures: list[str] = field(default_factory=list)
    gap_failures: list[str] = field(default_factory=list)


def check_pairs(
    group: list[dict], stamps: list[datetime], gap: timedelta, checks: Checks, where: Callable[[int], str]
) -> None:
    """Consecutive responses: time never goes back; within a session turns count up and gaps stay short;
    across sessions the next session starts at its first turn after a long gap."""
    if len(group) < 2:
        return
    decreasing: list[str] = []
    within = PairChecks("turn_index counts up within a session", "gaps within a session stay below session_gap_minutes")
    across = PairChecks("sessions follow in order", "gaps between sessions exceed session_gap_minutes")
    for position in range(1, len(group)):
        row, previous, delta = group[position], group[position - 1], stamps[position] - stamps[position - 1]
        if delta < timedelta(0):
            decreasing.append(where(position))
        if row["session_index"] == previous["session_index"]:
            kind, in_order, gap_ok = within, row["turn_index"] == previous["turn_index"] + 1, delta < gap
        else:
            in_order = row["session_index"] == previous["session_index"] + 1 and row["turn_index"] == 0
            kind, gap_ok = across, delta > gap
        kind.pairs += 1
        if not in_order:
            kind.order_failures.append(where(position))
        if not gap_ok:
            kind.gap_failures.append(f"{where(position)}: {delta}")
    checks.add("timestamps never decrease", len(group) - 1, decreasing)
    second_starts_a_session = group[1]["session_index"] != group[0]["session_index"]
    for kind in (across, within) if second_starts_a_session else (within, across):  # as they first apply
        if kind.pairs:
            checks.add(kind.order_name, kind.pairs, kind.order_failures)
            checks.add(kind.gap_name, kind.pairs, kind.gap_failures)
