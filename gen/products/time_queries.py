"""Templated time queries (SPEC §4, config `time_queries`): "what did we discuss <time>?" with exact answers.

Each base question is one window of one of the 11 tests (gen/products/time_windows.py); it is worded by
every question frame × time phrase × numeral style from templates/time_queries/ (gen/products/time_phrases.py).
The validator recomputes each relevant set from the `log` records (gen/products/time_checks.py).
"""

from __future__ import annotations

import hashlib
import json
import random
from collections import Counter
from typing import Iterator

from gen.products import time_checks
from gen.products.time_phrases import SLOT, Wordings
from gen.products.time_windows import BaseQuestion, WindowOptions, base_questions
from gen.timeline import Timeline
from gen.validation import Checks

NAME = "time_queries"
DESCRIPTION = "templated questions about what was discussed in a time window, with the relevant responses"
GROUPS_SERVICE = "time_queries.groups"  # group_id → relevant indices, for the ambiguous product's validator


class Options(WindowOptions):
    pass


def question_id(*parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


class Yearless:
    """Whether a date or month can be named without its year: no other date (month) of the conversation has
    the same day and month (the same month name) in another year."""

    def __init__(self, timeline: Timeline):
        dates = {r.timestamp.date() for r in timeline.responses}
        self.day_counts = Counter((d.month, d.day) for d in dates)
        self.month_counts = Counter(m for m, _ in {(d.month, d.year) for d in dates})

    def ok(self, question: BaseQuestion) -> bool:
        p = question.params
        days = [p[k] for k in ("date", "first_date", "last_date") if k in p]
        months = [p["month"]] if "month" in p else []
        return (all(self.day_counts[(int(d[5:7]), int(d[8:10]))] == 1 for d in days)
                and all(self.month_counts[int(m[5:7])] == 1 for m in months))


def pick(variants: list, limit: int | None, seed: int, product: str, group: str) -> list:
    """All variants, or a seeded sample of `limit` of them kept in their original order."""
    if limit is None or len(variants) <= limit:
        return variants
    chosen = sorted(random.Random(f"{seed}/{product}/{group}").sample(range(len(variants)), limit))
    return [variants[i] for i in chosen]


def window_fields(base, now: str, current_session: int) -> dict:
    """The fields every question about a window carries (shared with ambiguous_time_queries)."""
    return {"params": dict(base.params), "now": now, "current_session": current_session,
            "relevant_response_indices": list(base.relevant), "num_relevant": len(base.relevant)}


def build(ctx, options: Options) -> Iterator[dict]:
    wordings = Wordings(ctx.templates_dir, options.numeral_styles)
    groups = ctx.services.setdefault(GROUPS_SERVICE, {})
    for timeline in ctx.timelines:
        yearless = Yearless(timeline)
        now, current = timeline.now.isoformat(timespec="seconds"), timeline.current_session
        seen: set[str] = set()
        for base in base_questions(timeline, options):
            group = base.group_id
            groups[group] = list(base.relevant)
            phrases = wordings.phrases(base, yearless.ok(base))
            variants = [(frame, phrase, style) for phrase, style in phrases for frame in wordings.frames(base.test)]
            for frame, phrase, style in pick(variants, options.max_variants_per_group, ctx.recipe.seed, NAME, group):
                text = frame.replace(SLOT, phrase)
                qid = question_id(NAME, base.conversation_id, base.test, base.params, frame.replace(SLOT, "{time}"),
                                  phrase, style)
                if text in seen:
                    ctx.reject(NAME, qid, "duplicate question text in the conversation", text,
                               conversation_id=base.conversation_id)
                    continue
                seen.add(text)
                yield {
                    "question_id": qid,
                    "group_id": group,
                    "conversation_id": base.conversation_id,
                    "test": base.test,
                    "question": text,
                    "time_expression": phrase,
                    **window_fields(base, now, current),
                }


def validate(rows: list[dict], ctx, options: Options) -> Checks:
    checks = Checks()
    by_conversation = time_checks.check_rows(rows, ctx, options, checks, NAME)
    for conversation_id, group in by_conversation.items():
        texts = Counter(row["question"] for row in group)
        duplicates = [text for text, n in texts.items() if n > 1]
        checks.check("no duplicate question text within a conversation", not duplicates,
                     f"{conversation_id}: {duplicates[:2]}")
        for row in group:
            checks.check("the question contains its time expression", row["time_expression"] in row["question"],
                         f"{row['question_id']}: {row['question']!r} / {row['time_expression']!r}")
    return checks


def summary(rows: list[dict]) -> dict:
    return time_checks.summary(rows)


def params_feature():
    from datasets import Value

    ints = ("session", "first_session", "last_session", "sessions_ago", "days_ago", "months_ago", "days")
    strings = ("date", "first_date", "last_date", "month", "weekday")
    return {**{k: Value("int64") for k in ints}, **{k: Value("string") for k in strings}}


def features():
    from datasets import Features, List, Value

    return Features({
        "question_id": Value("string"), "group_id": Value("string"), "conversation_id": Value("string"),
        "test": Value("string"), "question": Value("string"), "time_expression": Value("string"),
        "params": params_feature(), "now": Value("string"), "current_session": Value("int64"),
        "relevant_response_indices": List(Value("int64")), "num_relevant": Value("int64"),
    })
