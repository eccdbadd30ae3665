"""What both time-query products build from a base question: its question ids, its worded windows (the base
question with its time phrases) and the window fields (with their features) every question about it carries."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gen.hashing import stable_id
from gen.products.date_words import Yearless
from gen.products.schema import DATE, INT64, STRING, TIMESTAMP, Type, list_of, struct
from gen.products.temporal.options import TimeQueriesOptions, WindowOptions
from gen.products.temporal.windows import BaseQuestion, abstention_questions, base_questions
from gen.products.temporal.wordings import Wordings
from gen.timeline import Timeline


def question_id(*parts: Any) -> str:
    return stable_id(parts)


def window_fields(base: BaseQuestion, now: str, current_session: int) -> dict:
    """The fields every question about a window carries (shared with ambiguous_time_queries)."""
    return {
        "params": dict(base.params),
        "now": now,
        "current_session": current_session,
        "relevant_response_indices": list(base.relevant),
        "num_relevant": len(base.relevant),
    }


def worded_windows(
    timeline: Timeline, options: WindowOptions, wordings: Wordings
) -> Iterator[tuple[BaseQuestion, list[tuple[str, str]], dict]]:
    """Each base question of the conversation, with its (time phrase, style) pairs and the window fields its
    variants share (shared with ambiguous_time_queries, never changed)."""
    yield from worded(timeline, base_questions(timeline, options), wordings)


def worded_abstentions(
    timeline: Timeline, options: TimeQueriesOptions, wordings: Wordings, seed: int
) -> Iterator[tuple[BaseQuestion, list[tuple[str, str]], dict]]:
    """`worded_windows` for the abstention questions (time_queries only): the same phrases, so a wording never
    tells an empty window from a real one."""
    yield from worded(timeline, abstention_questions(timeline, options, seed), wordings)


def worded(
    timeline: Timeline, bases: Iterator[BaseQuestion], wordings: Wordings
) -> Iterator[tuple[BaseQuestion, list[tuple[str, str]], dict]]:
    yearless = Yearless((r.timestamp.date() for r in timeline.responses), until=timeline.today)
    now, current = timeline.now.isoformat(timespec="seconds"), timeline.current_session
    for base in bases:
        phrases = wordings.phrases(base.test, base.params, yearless.ok(base.params))
        yield base, phrases, window_fields(base, now, current)


def window_features() -> dict[str, Type]:
    """The features of `window_fields`, in the same order."""
    ints = ("session", "first_session", "last_session", "sessions_ago", "days_ago", "months_ago", "days")
    dates = ("date", "first_date", "last_date")
    strings = ("month", "weekday")  # "2023-05" and "Monday": no date type fits them
    return {
        "params": struct(
            {
                **{k: INT64 for k in ints},
                **{k: DATE for k in dates},
                **{k: STRING for k in strings},
            }
        ),
        "now": TIMESTAMP,
        "current_session": INT64,
        "relevant_response_indices": list_of(INT64),
        "num_relevant": INT64,
    }
