"""Gold answers of the time queries (config `gold_answers`, docs/gold-answers.md): one per base question, written
by the LLM from exactly the responses of its window, as short claims each citing the responses it rests on.

The base questions come from the records of `time_queries` and/or `ambiguous_time_queries` (option `questions`);
the two share group ids and windows, so a base question in both gets one answer, which every wording of it in
either config takes (their run.json declares `answers_from: gold_answers`, and `gen export` and `gen eval
--answers` read the answer through gen/eval/dataset.py:GoldAnswers). The citation rule is in rules.py and is
checked in the reply parser (a reply breaking it is corrected once, then rejected); `verify: true` adds a call
that checks every claim against what it cites (steps.py). A window without responses gets the abstention answer
(templates/answers/abstention.j2) and no call.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence

from gen.llm.step import most_calls
from gen.llm.task import Task
from gen.products.answers import checking
from gen.products.answers.options import GoldAnswersOptions
from gen.products.answers.steps import (
    NAME,
    PROMPT,
    Item,
    abstained_record,
    abstention,
    answer_step,
    base_questions,
    generate,
    item_of,
    written_record,
)
from gen.products.base import BuildContext, ConfigSpec, Needs, Product, Record, Records, Unit
from gen.products.checks import Checks
from gen.products.schema import BOOL, INT64, STRING, Schema, list_of, schema, struct

DESCRIPTION = "an LLM-written answer per base time query, as claims citing the responses of its window"


def features() -> Schema:
    return schema(
        {
            "group_id": STRING,
            "conversation_id": STRING,
            "test": STRING,
            "relevant_response_indices": list_of(INT64),
            "num_relevant": INT64,
            "answer": STRING,
            "claims": list_of(struct({"text": STRING, "cites": list_of(INT64)})),
            "left_out": list_of(struct({"index": INT64, "why": STRING})),
            "abstained": BOOL,
            "model": STRING,
            "prompt_id": STRING,
            "sample": INT64,
        }
    )


class GoldAnswers(Product[GoldAnswersOptions]):
    name = NAME
    description = DESCRIPTION
    Options = GoldAnswersOptions
    configs = (ConfigSpec(NAME, DESCRIPTION, features()),)
    needs = Needs(timelines=True, llm=True, products=("log", "time_queries"))
    concurrent_batches = True  # nothing is kept from one batch to the next

    def __init__(self, options: GoldAnswersOptions) -> None:
        super().__init__(options)
        self.needs = Needs(timelines=True, llm=True, products=("log", *options.questions))

    def items(self, units: Sequence[Unit]) -> list[Item]:
        return [item_of(unit, base) for unit in units for base in base_questions(unit, self.options.questions)]

    def build(self, units: Sequence[Unit], ctx: BuildContext) -> Iterator[Records]:
        items = self.items(units)
        asked = [item for item in items if item.base.window]
        accepted = generate(ctx, asked, self.options) if asked else {}
        model = ctx.recipe.llm[self.options.endpoint].model
        prompt_id = ctx.templates.fingerprint(PROMPT)
        nothing = abstention(ctx.templates)
        by_conversation: dict[str, list[Record]] = defaultdict(list)
        for item in items:
            if not item.base.window:
                row = abstained_record(item, nothing)
            elif item.item_id in accepted:
                answer, sample = accepted[item.item_id]
                row = written_record(item, answer, sample, model, prompt_id)
            else:
                continue  # rejected: in rejects.jsonl
            by_conversation[item.base.conversation_id].append(row)
        for unit in units:
            yield {NAME: by_conversation.get(unit.conversation_id, [])}

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        endpoint = ctx.recipe.llm.get(self.options.endpoint)
        checking.check_conversation(
            records[NAME],
            unit.records_of("log"),
            {config: unit.records_of(config) for config in self.options.questions},
            checking.Expected(
                endpoint.model if endpoint else None,
                ctx.templates.fingerprint(PROMPT),
                abstention(ctx.templates),
            ),
            checks,
        )

    def llm_tasks(self, units: Sequence[Unit], ctx: BuildContext) -> list[tuple[str, list[Task], int]]:
        items = [item for item in self.items(units) if item.base.window]
        step = answer_step(self.options, ctx.templates)
        policy = self.options.step_policy(NAME, ctx.recipe, retries=self.options.retries)
        return [(NAME, [step.task(item, 0) for item in items], most_calls(step, len(items), policy))]

    def count(self, config: str, records: Sequence[Record]) -> Counter:
        counts: Counter = Counter()
        for row in records:
            counts["answers", row["test"]] += 1
            counts["abstained", row["test"]] += row["abstained"]
            counts["claims", row["test"]] += len(row["claims"])
            counts["left_out", row["test"]] += len(row["left_out"])
        counts["conversations", ""] += bool(records)
        return counts

    def summary(self, config: str, counts: Counter) -> dict:
        tests = sorted({test for (key, test) in counts if key == "answers"})
        return {
            "answers": sum(counts["answers", test] for test in tests),
            "conversations": counts["conversations", ""],
            "by_test": {
                test: {name: counts[name, test] for name in ("answers", "abstained", "claims", "left_out")}
                for test in tests
            },
        }
