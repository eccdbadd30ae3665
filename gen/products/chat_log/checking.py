"""The independent validators of log and conversations: the timestamp invariants and each conversation's clock,
recomputed from the written strings alone (parsed back), never from the timeline code."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from gen.calendar_names import weekday_name
from gen.conversation import OBSERVED
from gen.products.base import Record, Unit
from gen.products.checks import Checks
from gen.recipe import TimelineSpec


def check_log(unit: Unit, group: list[dict], session_gap_minutes: float, checks: Checks) -> None:
    """Check the timestamp invariants from the written strings alone (parsed back), against the source's turn
    count: every real turn once, padding after them."""
    conversation = unit.conversation
    real_turns = sum(len(session.turns) for session in conversation.sessions)
    real = [row for row in group if not row["is_padding"]]
    checks.check(
        "one record per real turn",
        len(real) == real_turns,
        f"{unit.conversation_id}: {len(real)} records, {real_turns} turns",
    )
    gap = timedelta(minutes=session_gap_minutes)
    if conversation.clock == OBSERVED:
        check_observed(unit, real, checks)
        check_conversation(unit.conversation_id, group, None, checks)
    else:
        check_conversation(unit.conversation_id, group, gap, checks)


def check_observed(unit: Unit, real: list[dict], checks: Checks) -> None:
    """An observed clock: each real response's written timestamp is its source turn's own time (the session
    gap rules do not apply: the sessions and their spacing are the source's)."""
    times = [turn.time for session in unit.conversation.sessions for turn in session.turns]
    checks.add(
        "observed timestamps are the source's own times",
        len(real),
        [
            f"{unit.conversation_id} response {row['response_index']}: {row['timestamp']} != {time}"
            for row, time in zip(real, times)
            if time is None or row["timestamp"] != time.isoformat(timespec="seconds")
        ],
    )


def check_conversation(conversation_id: str, group: list[dict], gap: timedelta | None, checks: Checks) -> None:
    """`gap`: session_gap_minutes on a simulated clock; None on an observed one (no gap rules)."""
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
    group: list[dict], stamps: list[datetime], gap: timedelta | None, checks: Checks, where: Callable[[int], str]
) -> None:
    """Consecutive responses: time never goes back; within a session turns count up and (with a `gap`) gaps stay
    short; across sessions the next session starts at its first turn (with a `gap`, after a long pause)."""
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
            kind, in_order, gap_ok = within, row["turn_index"] == previous["turn_index"] + 1, gap is None or delta < gap
        else:
            in_order = row["session_index"] == previous["session_index"] + 1 and row["turn_index"] == 0
            kind, gap_ok = across, gap is None or delta > gap
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
            if gap is not None:
                checks.add(kind.gap_name, kind.pairs, kind.gap_failures)


def check_conversations(unit: Unit, rows: list[dict], timeline: TimelineSpec, checks: Checks) -> None:
    """Recompute now, current session and counts from the `log` records, not from the record code."""
    log = unit.records_of("log")
    where = unit.conversation_id
    if not checks.check(
        "one record per conversation",
        len(rows) == 1 and rows[0]["conversation_id"] == where,
        f"{where}: {len(rows)} records",
    ):
        return
    row = rows[0]
    offset = timedelta(minutes=timeline.now_offset_minutes)
    last = max(datetime.fromisoformat(r["timestamp"]) for r in log)
    checks.check("now = last response + now_offset_minutes", datetime.fromisoformat(row["now"]) == last + offset, where)
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
    check_padding_start(row, log, timeline, checks)


def check_padding_start(row: Record, log: Sequence[Record], timeline: TimelineSpec, checks: Checks) -> None:
    """The padding offset is one `after_minutes` allows, and the padding session starts at the later of the
    last real session's start + that offset and its last response + session_gap_minutes + 1 minute."""
    where, offset = row["conversation_id"], row["padding_after_minutes"]
    if row["padding_session"] is None:
        checks.check("no padding offset without a padding session", offset is None, where)
        return
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
