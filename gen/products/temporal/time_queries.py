"""Templated time queries (config `time_queries`): "what did we discuss <time>?" with exact answers.

Each base question is one window of one of the 11 tests (windows.py); it is worded by every question frame ×
time phrase × numeral style from templates/time_queries/ (wordings.py). The validator recomputes each relevant
set from the `log` records (window_checks.py). The method is described in docs/time-queries.md.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from datetime import date
from typing import Any

from gen.hashing import stable_id
from gen.products.base import BuildContext, ConfigSpec, ConversationProduct, Needs, Record, Records, Unit
from gen.products.checks import Checks
from gen.products.date_words import yearless_dates, yearless_months
from gen.products.schema import DATE, INT64, STRING, TIMESTAMP, Schema, Type, list_of, schema, struct
from gen.products.temporal import window_checks
from gen.products.temporal.windows import BaseQuestion, WindowOptions, base_questions, group_id
from gen.products.temporal.wordings import SLOT, Wordings
from gen.timeline import Timeline

NAME = "time_queries"
DESCRIPTION = "templated questions about what was discussed in a time window, with the relevant responses"


class Options(WindowOptions):
    pass


def question_id(*parts: Any) -> str:
    return stable_id(parts)


class Yearless:
    """Whether a base question's dates and months can be named without their year (date_words.py's rule),
    given every date of the conversation (padding included)."""

    def __init__(self, dates: Iterable[date]):
        dates = set(dates)
        self.dates = yearless_dates(dates)
        self.months = yearless_months(dates)

    def ok(self, p: dict) -> bool:
        days = [date.fromisoformat(p[k]) for k in ("date", "first_date", "last_date") if k in p]
        months = [int(p["month"][5:7])] if "month" in p else []
        return all(d in self.dates for d in days) and all(m in self.months for m in months)


def pick(variants: list, limit: int | None, seed: int, product: str, conversation_id: str, group: str) -> list:
    """All variants, or a sample of `limit` of them kept in their original order. The sample follows from
    (recipe seed, product, conversation, group) alone, so any worker draws the same one."""
    if limit is None or len(variants) <= limit:
        return variants
    rng = random.Random(f"{seed}/{product}/{conversation_id}/{group}")
    return [variants[i] for i in sorted(rng.sample(range(len(variants)), limit))]


def wordings_of(base: BaseQuestion, phrases: list[tuple[str, str]], wordings: Wordings) -> list[tuple[str, str, str]]:
    """Every (frame, phrase, style) of a base question, phrases outermost, in template order."""
    return [(frame, phrase, style) for phrase, style in phrases for frame in wordings.frames(base.test)]


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
    yearless = Yearless(r.timestamp.date() for r in timeline.responses)
    now, current = timeline.now.isoformat(timespec="seconds"), timeline.current_session
    for base in base_questions(timeline, options):
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


def features() -> Schema:
    return schema(
        {
            "question_id": STRING,
            "group_id": STRING,
            "conversation_id": STRING,
            "test": STRING,
            "question": STRING,
            "time_expression": STRING,
            **window_features(),
        }
    )


class TimeQueries(ConversationProduct[Options]):
    name = NAME
    description = DESCRIPTION
    Options = Options
    configs = (ConfigSpec(NAME, DESCRIPTION, features(), retrieval_group="test"),)
    needs = Needs(timelines=True, products=("log",))

    def records(self, unit: Unit, ctx: BuildContext) -> Iterator[tuple[str, Record]]:
        options = self.options
        wordings = Wordings.for_recipe(ctx.templates_dir, options.numeral_styles)
        seen: set[str] = set()
        for base, phrases, fields in worded_windows(unit.stamped, options, wordings):
            group = base.group_id
            variants = wordings_of(base, phrases, wordings)
            for frame, phrase, style in pick(
                variants, options.variant_limit, ctx.seed, NAME, base.conversation_id, group
            ):
                text = frame.replace(SLOT, phrase)
                qid = question_id(
                    NAME, base.conversation_id, base.test, base.params, frame.replace(SLOT, "{time}"), phrase, style
                )
                if text in seen:
                    ctx.reject(
                        NAME,
                        qid,
                        "duplicate question text in the conversation",
                        text,
                        conversation_id=base.conversation_id,
                    )
                    continue
                seen.add(text)
                yield (
                    NAME,
                    {
                        "question_id": qid,
                        "group_id": group,
                        "conversation_id": base.conversation_id,
                        "test": base.test,
                        "question": text,
                        "time_expression": phrase,
                        **fields,
                    },
                )

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        rows = records[NAME]
        view = window_checks.check_unit(unit, rows, self.options, checks, NAME, ctx.recipe.timeline.now_offset_minutes)
        texts = Counter(row["question"] for row in rows)
        duplicates = [text for text, n in texts.items() if n > 1]
        checks.check(
            "no duplicate question text within a conversation",
            not duplicates,
            f"{unit.conversation_id}: {duplicates[:2]}",
        )
        check_seeded_wordings(unit.conversation_id, rows, view, self.options, ctx, checks)
        if rows:
            checks.add(
                "the question contains its time expression",
                len(rows),
                [
                    f"{row['question_id']}: {row['question']!r} / {row['time_expression']!r}"
                    for row in rows
                    if row["time_expression"] not in row["question"]
                ],
            )

    def count(self, config: str, records: Sequence[Record]) -> Counter:
        return window_checks.count(records)

    def summary(self, config: str, counts: Counter) -> dict:
        return window_checks.summary(counts, self.options.tests)


def check_seeded_wordings(
    conversation_id: str,
    rows: Sequence[Record],
    view: window_checks.LogView,
    options: Options,
    ctx: BuildContext,
    checks: Checks,
) -> None:
    """Each base question keeps the seeded sample of its wordings (frames × time phrases, phrases outermost)."""
    wordings = Wordings.for_recipe(ctx.templates_dir, options.numeral_styles)

    def variants(test: str, params: dict, group: str, yearless_ok: bool) -> tuple[int, Callable[[int], Hashable]]:
        phrases, frames = wordings.phrases(test, params, yearless_ok), wordings.frames(test)
        return len(phrases) * len(frames), lambda i: frames[i % len(frames)].replace(SLOT, phrases[i // len(frames)][0])

    kept: defaultdict[str, list[Hashable]] = defaultdict(list)
    for row in rows:
        kept[row["group_id"]].append(row["question"])
    wrong, checked = seeded_sample_failures(conversation_id, kept, view, options, ctx.seed, NAME, variants)
    checks.add("each base question keeps its seeded sample of wordings", checked, wrong)


Variants = Callable[[str, dict, str, bool], tuple[int, Callable[[int], Hashable]]]


def seeded_sample_failures(
    conversation_id: str,
    kept: Mapping[str, list[Hashable]],
    view: window_checks.LogView,
    options: WindowOptions,
    seed: int,
    product: str,
    variants: Variants,
) -> tuple[list[str], int]:
    """The base questions whose kept variants are not the seeded sample: min(limit, variants) drawn, less those
    the conversation already used. Drawn again here from the full list, so a choice that depended on the worker,
    the order of work or a shared random state would show. Returns the failures and how many were checked.

    The base questions, their order and whether their dates may go without the year come from the log (the
    validator's own list of windows); `variants(test, params, group, yearless_ok)` gives how many variants a
    base question has and how to put the i-th into words, so only the drawn ones are."""
    yearless = Yearless(map(date.fromisoformat, set(view.date)))
    seen: set[Hashable] = set()
    wrong = []
    bases = view.base_questions(options)
    for test, params in bases:
        group = group_id(conversation_id, test, params)
        count, variant = variants(test, params, group, yearless.ok(params))
        expected = []
        for i in seeded_draw(count, options.variant_limit, seed, product, conversation_id, group):
            text = variant(i)
            if text not in seen:
                seen.add(text)
                expected.append(text)
        if kept.get(group, []) != expected:
            wrong.append(sample_difference(f"{conversation_id} {test} {params}", kept.get(group, []), expected))
    return wrong, len(bases)


def sample_difference(where: str, kept: Sequence[Hashable], expected: Sequence[Hashable]) -> str:
    """The first text where the kept wordings and the seeded sample part, for the validation report."""
    at = next((i for i, (a, b) in enumerate(zip(kept, expected)) if a != b), min(len(kept), len(expected)))
    first = [texts[at] if at < len(texts) else None for texts in (kept, expected)]
    return f"{where}: {len(kept)} kept, {len(expected)} drawn; wording {at + 1}: {first[0]!r} kept, {first[1]!r} drawn"


def seeded_draw(n: int, limit: int | None, seed: int, product: str, conversation_id: str, group: str) -> Sequence[int]:
    """The positions, in order, of the wordings a base question with n of them keeps. A sample of all n is
    all of them, so the random draw is only made when the limit leaves some out."""
    if limit is None or limit >= n:
        return range(n)
    rng = random.Random(f"{seed}/{product}/{conversation_id}/{group}")
    return sorted(rng.sample(range(n), limit))
