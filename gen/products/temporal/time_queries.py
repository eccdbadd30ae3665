"""Templated time queries (config `time_queries`): "what did we discuss <time>?" with exact answers.

Each base question is one window of one of the 11 tests (windows.py); it is worded by every question frame ×
time phrase × numeral style from templates/time_queries/ (wordings.py). The validator recomputes each relevant
set from the `log` records (checking.py). The method is described in docs/time-queries.md.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterator, Sequence
from itertools import chain

from gen.hashing import PrefixedIds
from gen.products.base import (
    BuildContext,
    ConfigSpec,
    ConversationProduct,
    Needs,
    Questions,
    Record,
    Records,
    Unit,
    declared_features,
)
from gen.products.checks import Checks
from gen.products.schema import STRING, Schema, schema
from gen.products.temporal import checking
from gen.products.temporal.checking import seeded_sample_failures
from gen.products.temporal.options import TimeQueriesOptions
from gen.products.temporal.questions import window_features, worded_abstentions, worded_windows
from gen.products.temporal.sampling import pick
from gen.products.temporal.windows import BaseQuestion
from gen.products.temporal.wordings import SLOT, Wordings

NAME = "time_queries"
DESCRIPTION = "templated questions about what was discussed in a time window, with the relevant responses"
ABSTENTION = "abstention"  # the field marking a question about a time when nothing was said (option abstentions)


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


def config_spec(abstentions: bool) -> ConfigSpec:
    """The config, with the `abstention` field declared (in run.json and the features) only when the option asks
    for abstention questions: without it the records, the report and the card are what they always were."""
    questions = Questions(
        "test",
        asked_by_speaker_a=True,
        answers_from="gold_answers",
        abstention_field=ABSTENTION if abstentions else None,
    )
    return ConfigSpec(NAME, DESCRIPTION, declared_features(features(), questions.declared()), questions=questions)


class TimeQueries(ConversationProduct[TimeQueriesOptions]):
    name = NAME
    description = DESCRIPTION
    Options = TimeQueriesOptions
    configs = (config_spec(abstentions=False),)
    needs = Needs(timelines=True, products=("log",))

    def __init__(self, options: TimeQueriesOptions) -> None:
        super().__init__(options)
        if options.abstentions is not None:
            self.configs = (config_spec(abstentions=True),)

    def records(self, unit: Unit, ctx: BuildContext) -> Iterator[tuple[str, Record]]:
        options = self.options
        wordings = Wordings.for_recipe(ctx.templates, options.numeral_styles)
        seen: set[str] = set()
        in_ids: dict[str, str] = {}  # frame → the frame as its question ids name it
        marked = options.abstentions is not None  # every record then says whether it is an abstention
        bases = worded_windows(unit.stamped, options, wordings)
        if marked:  # after every real base question, so a real question's text is never the one rejected
            bases = chain(bases, worded_abstentions(unit.stamped, options, wordings, ctx.seed))
        for base, phrases, fields in bases:
            group, conversation_id, test = base.group_id, base.conversation_id, base.test
            mark = {ABSTENTION: base.abstention} if marked else {}
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
                        **mark,
                    },
                )

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        rows, options = records[NAME], self.options
        marked = options.abstentions is not None
        flagged = [row for row in rows if marked and row[ABSTENTION] is True]
        real = [row for row in rows if not (marked and row[ABSTENTION] is True)] if flagged else rows
        offset = ctx.recipe.timeline.now_offset_minutes
        view = checking.check_unit(unit, real, options, checks, NAME, offset, also=flagged)
        abstentions = view.abstention_questions(options, ctx.seed, unit.conversation_id) if marked else []
        if marked:
            checking.check_abstentions(view, flagged, options, ctx.seed, unit.conversation_id, checks)
        duplicates = []
        if len({row["question"] for row in rows}) != len(rows):  # counted only when some text repeats
            duplicates = [text for text, n in Counter(row["question"] for row in rows).items() if n > 1]
        checks.check(
            "no duplicate question text within a conversation",
            not duplicates,
            f"{unit.conversation_id}: {duplicates[:2]}",
        )
        check_seeded_wordings(unit.conversation_id, rows, view, options, ctx, checks, abstentions)
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
        counts = checking.count(records)
        if self.options.abstentions is not None:
            flagged = [row for row in records if row[ABSTENTION] is True]
            counts.update(("abstention_variants", row["test"]) for row in flagged)
            counts.update(
                ("abstention_base_questions", test) for test, _ in {(r["test"], r["group_id"]) for r in flagged}
            )
        return counts

    def summary(self, config: str, counts: Counter) -> dict:
        """The table of every time-query product; with abstentions, also their share of it per test (by_test and
        total count them with the rest)."""
        out = checking.summary(counts, self.options.tests)
        if self.options.abstentions is not None:
            by_test = {
                test: {name: counts[f"abstention_{name}", test] for name in ("base_questions", "variants")}
                for test in self.options.abstaining_tests
            }
            total = {name: sum(row[name] for row in by_test.values()) for name in ("base_questions", "variants")}
            out["abstentions"] = {"by_test": by_test, "total": total}
        return out


def check_seeded_wordings(
    conversation_id: str,
    rows: Sequence[Record],
    view: checking.LogView,
    options: TimeQueriesOptions,
    ctx: BuildContext,
    checks: Checks,
    abstentions: Sequence[tuple[str, dict]] = (),
) -> None:
    """Each base question keeps the seeded sample of its wordings (frames × time phrases, phrases outermost);
    the abstention questions, asked after the others, as well."""
    wordings = Wordings.for_recipe(ctx.templates, options.numeral_styles)

    def variants(test: str, params: dict, group: str, yearless_ok: bool) -> tuple[int, Callable[[int], Hashable]]:
        phrases, frames = wordings.phrases(test, params, yearless_ok), wordings.frames(test)
        return len(phrases) * len(frames), lambda i: frames[i % len(frames)].replace(SLOT, phrases[i // len(frames)][0])

    kept: defaultdict[str, list[Hashable]] = defaultdict(list)
    for row in rows:
        kept[row["group_id"]].append(row["question"])
    wrong, checked = seeded_sample_failures(conversation_id, kept, view, options, ctx.seed, NAME, variants, abstentions)
    checks.add("each base question keeps its seeded sample of wordings", checked, wrong)
