"""Templated time queries (config `time_queries`): "what did we discuss <time>?" with exact answers.

Each base question is one window of one of the 11 tests (windows.py); it is worded by every question frame ×
time phrase × numeral style from templates/time_queries/ (wordings.py). The validator recomputes each relevant
set from the `log` records (checking.py). The method is described in docs/time-queries.md.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterator, Sequence

from gen.hashing import PrefixedIds
from gen.products.base import BuildContext, ConfigSpec, ConversationProduct, Needs, Questions, Record, Records, Unit
from gen.products.checks import Checks
from gen.products.schema import STRING, Schema, schema
from gen.products.temporal import checking
from gen.products.temporal.checking import seeded_sample_failures
from gen.products.temporal.options import TimeQueriesOptions
from gen.products.temporal.questions import window_features, worded_windows
from gen.products.temporal.sampling import pick
from gen.products.temporal.windows import BaseQuestion
from gen.products.temporal.wordings import SLOT, Wordings

NAME = "time_queries"
DESCRIPTION = "templated questions about what was discussed in a time window, with the relevant responses"


def wordings_of(base: BaseQuestion, phrases: list[tuple[str, str]], wordings: Wordings) -> list[tuple[str, str, str]]:
    """Every (frame, phrase, style) of a base question, phrases outermost, in template order."""
    return [(frame, phrase, style) for phrase, style in phrases for frame in wordings.frames(base.test)]


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


class TimeQueries(ConversationProduct[TimeQueriesOptions]):
    name = NAME
    description = DESCRIPTION
    Options = TimeQueriesOptions
    configs = (
        ConfigSpec(
            NAME,
            DESCRIPTION,
            features(),
            questions=Questions("test", asked_by_speaker_a=True, answers_from="gold_answers"),
        ),
    )
    needs = Needs(timelines=True, products=("log",))

    def records(self, unit: Unit, ctx: BuildContext) -> Iterator[tuple[str, Record]]:
        options = self.options
        wordings = Wordings.for_recipe(ctx.templates, options.numeral_styles)
        seen: set[str] = set()
        in_ids: dict[str, str] = {}  # frame → the frame as its question ids name it
        for base, phrases, fields in worded_windows(unit.stamped, options, wordings):
            group, conversation_id, test = base.group_id, base.conversation_id, base.test
            question_id = PrefixedIds(NAME, conversation_id, test, base.params)  # hashed once per base question
            variants = wordings_of(base, phrases, wordings)
            for frame, phrase, style in pick(variants, options.variant_limit, ctx.seed, NAME, conversation_id, group):
                text = frame.replace(SLOT, phrase)
                if (frame_id := in_ids.get(frame)) is None:
                    frame_id = in_ids[frame] = frame.replace(SLOT, "{time}")
                qid = question_id(frame_id, phrase, style)
                if text in seen:
                    ctx.reject(
                        NAME, qid, "duplicate question text in the conversation", text, conversation_id=conversation_id
                    )
                    continue
                seen.add(text)
                yield (
                    NAME,
                    {
                        "question_id": qid,
                        "group_id": group,
                        "conversation_id": conversation_id,
                        "test": test,
                        "question": text,
                        "time_expression": phrase,
                        **fields,
                    },
                )

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        rows = records[NAME]
        view = checking.check_unit(unit, rows, self.options, checks, NAME, ctx.recipe.timeline.now_offset_minutes)
        duplicates = []
        if len({row["question"] for row in rows}) != len(rows):  # counted only when some text repeats
            duplicates = [text for text, n in Counter(row["question"] for row in rows).items() if n > 1]
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
        return checking.count(records)

    def summary(self, config: str, counts: Counter) -> dict:
        return checking.summary(counts, self.options.tests)


def check_seeded_wordings(
    conversation_id: str,
    rows: Sequence[Record],
    view: checking.LogView,
    options: TimeQueriesOptions,
    ctx: BuildContext,
    checks: Checks,
) -> None:
    """Each base question keeps the seeded sample of its wordings (frames × time phrases, phrases outermost)."""
    wordings = Wordings.for_recipe(ctx.templates, options.numeral_styles)

    def variants(test: str, params: dict, group: str, yearless_ok: bool) -> tuple[int, Callable[[int], Hashable]]:
        phrases, frames = wordings.phrases(test, params, yearless_ok), wordings.frames(test)
        return len(phrases) * len(frames), lambda i: frames[i % len(frames)].replace(SLOT, phrases[i // len(frames)][0])

    kept: defaultdict[str, list[Hashable]] = defaultdict(list)
    for row in rows:
        kept[row["group_id"]].append(row["question"])
    wrong, checked = seeded_sample_failures(conversation_id, kept, view, options, ctx.seed, NAME, variants)
    checks.add("each base question keeps its seeded sample of wordings", checked, wrong)
