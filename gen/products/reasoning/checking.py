"""The validator of temporal_reasoning: every answer and evidence set recomputed from the `log` records.

Nothing here uses the builder's topics, dates or answers. Each response of the log is read back as the strings a
consumer sees (text, date, timestamp, session_index, is_padding); a topic's mentions are found by looking for the
phrase, between spaces, in the text with every run of characters other than a-z turned into one space; "now" is
the last timestamp plus the recipe's now_offset_minutes. From these the checks below recompute what each question
claims.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import date, datetime, timedelta
from typing import Any

from gen.calendar_names import month_name
from gen.products.checks import Checks
from gen.products.reasoning.options import TemporalReasoningOptions

NOT_LETTERS = re.compile(r"[^a-z]+")
KINDS = {"last_mention": "date", "days_ago": "days", "which_first": "choice", "time_between": "days"}


class LogFacts:
    """One conversation's log, reduced to what the answers need."""

    def __init__(self, log: Sequence[dict[str, Any]], now_offset_minutes: float) -> None:
        self.texts = [f" {NOT_LETTERS.sub(' ', r['text'].lower())} " for r in log]
        self.index = [r["response_index"] for r in log]
        self.date = [r["date"] for r in log]
        self.session = [r["session_index"] for r in log]
        self.padding = [r["is_padding"] for r in log]
        self.now = max(datetime.fromisoformat(r["timestamp"]) for r in log) + timedelta(minutes=now_offset_minutes)
        self.today = self.now.date()

    def mentions(self, phrase: str) -> list[int]:
        """Positions (in log order) of the responses that mention the phrase."""
        needle = f" {phrase} "
        return [position for position, text in enumerate(self.texts) if needle in text]


def expected_value(test: str, topics: list[str], found: list[list[int]], facts: LogFacts) -> dict[str, Any] | None:
    """The answer a question's topics call for, from their mentions' date strings; None when the topics do not
    allow one (a pair whose dates overlap, or a topic that was never mentioned)."""
    if not all(found):
        return None
    dates = [sorted({facts.date[p] for p in positions}) for positions in found]
    if test == "last_mention":
        return {"date": dates[0][-1], "days": None, "choice": None}
    if test == "days_ago":
        return {"date": None, "days": (facts.today - date.fromisoformat(dates[0][-1])).days, "choice": None}
    if test == "which_first":
        first, second = dates
        if first[-1] < second[0]:
            return {"date": None, "days": None, "choice": topics[0]}
        if second[-1] < first[0]:
            return {"date": None, "days": None, "choice": topics[1]}
        return None
    if test == "time_between":
        if not all(len(d) == 1 for d in dates) or dates[0][0] >= dates[1][0]:
            return None  # the earlier topic is named first, each on a date of its own
        days = (date.fromisoformat(dates[1][0]) - date.fromisoformat(dates[0][0])).days
        return {"date": None, "days": days, "choice": None}
    return None


def states(answer: str, test: str, value: dict[str, Any]) -> bool:
    """Whether the answer text says the value: a date as day, month name and year; days in digits ("today" for
    none); a choice as the phrase itself."""
    if value["date"] is not None:
        day = date.fromisoformat(value["date"])
        return f"{day.day} {month_name(day.month)} {day.year}" in answer
    if value["days"] is not None:
        if value["days"] == 0 and test == "days_ago":
            return answer == "today"
        return str(value["days"]) in answer.split()
    return answer == value["choice"]


def check_conversation(
    log: Sequence[dict[str, Any]],
    rows: Sequence[dict[str, Any]],
    options: TemporalReasoningOptions,
    now_offset_minutes: float,
    checks: Checks,
    conversation_id: str,
) -> None:
    ids = Counter(row["question_id"] for row in rows)
    texts = Counter(row["question"] for row in rows)
    checks.check("question_id is unique", all(n == 1 for n in ids.values()), conversation_id)
    checks.check(
        "no duplicate question text within a conversation", all(n == 1 for n in texts.values()), conversation_id
    )
    if not rows:
        return
    facts = LogFacts(log, now_offset_minutes)
    for row in rows:
        check_row(row, facts, options, checks)


def check_row(row: dict[str, Any], facts: LogFacts, options: TemporalReasoningOptions, checks: Checks) -> None:
    where = f"{row['question_id']}: {row['question']!r}"
    topics = row["topics"]
    found = [facts.mentions(phrase) for phrase in topics]
    positions = sorted({p for mentions in found for p in mentions})
    sessions = [{facts.session[p] for p in mentions} for mentions in found]
    checks.check(
        "each topic is mentioned, in real sessions only, in at most max_topic_sessions sessions",
        all(found)
        and not any(facts.padding[p] for p in positions)
        and all(len(s) <= options.max_topic_sessions for s in sessions),
        where,
    )
    checks.check(
        "relevant responses are every mention of the topics",
        row["relevant_response_indices"] == [facts.index[p] for p in positions],
        where,
    )
    checks.check("num_relevant is the number of relevant responses", row["num_relevant"] == len(positions), where)
    checks.check("the question names its topics", all(phrase in row["question"] for phrase in topics), where)
    checks.check("now agrees with the log", row["now"] == facts.now.isoformat(timespec="seconds"), where)
    value = expected_value(row["test"], topics, found, facts)
    checks.check(
        "the answer value is the one recomputed from the log",
        value is not None and row["answer_value"] == value and row["answer_kind"] == KINDS[row["test"]],
        f"{where}: {row['answer_value']} / {value}",
    )
    checks.check(
        "the answer text states the answer value",
        states(row["answer"], row["test"], row["answer_value"]),
        f"{where}: {row['answer']!r}",
    )
