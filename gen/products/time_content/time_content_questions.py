"""Time+content questions (config `time_content_questions`): LLM-written questions that need the speaker,
a date or session number, and the content together (docs/time-content-questions.md).

The ground truth is fixed before any call: anchors.py picks each question's anchor (one
response, or 2-3 consecutive responses on one topic) and whether it is referred to by date or by session.
The model words the question and its gold answer (templates/prompts/time_content_question.j2, structured output
``{"question": ..., "answer": ...}``); question_rules.py checks the question (names the speaker, contains the date
or session number, is one question, does not copy the anchor) and answer_rules.py the answer (short, says more
than the question, drawn from the anchor; checked as the reply is parsed, so a bad one gets a correction round).
A question that fails is written again with the next sample index, up to ``retries`` times, then recorded in the
run's rejects with the reason. With
``verify: true`` a second call (templates/prompts/time_content_verify.j2) must confirm that the anchor
answers the question and says what the answer says; a "no" counts as a failure like the others.

Items whose call itself failed (transport errors, unparseable or truncated replies, answers that still break the
answer rule after the correction round) are left to the engine, which records them in its own rejects; they are
not retried here.

For `gen plan` / `gen preview`: `llm_tasks` gives the first-round generation tasks in item order.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence

from gen.llm.step import most_calls
from gen.llm.task import Task
from gen.products.base import (
    BuildContext,
    ConfigSpec,
    Needs,
    Product,
    Questions,
    Record,
    Records,
    Unit,
)
from gen.products.checks import Checks
from gen.products.schema import DATE, INT64, STRING, TIMESTAMP, Schema, list_of, schema
from gen.products.time_content.checking import check_conversation
from gen.products.time_content.options import TimeContentQuestionsOptions
from gen.products.time_content.steps import NAME, PROMPT, Item, Written, generate, plan_items, question_step

DESCRIPTION = (
    "LLM-written questions naming a speaker, a date or session, and a topic, about responses chosen beforehand"
)


def record(item: Item, written: Written, sample: int, model: str, prompt_id: str) -> dict:
    anchor = item.anchor
    return {
        "question_id": item.question_id,
        "conversation_id": item.timeline.conversation_id,
        "question": written.question,
        "answer": written.answer,
        "reference_kind": item.slot.kind,
        "speaker": anchor.speaker,
        "relevant_response_indices": anchor.indices,
        "num_relevant": len(anchor.indices),
        "anchor_text": anchor.text,
        "date": anchor.date.isoformat(),
        "session_index": anchor.session_index,
        "now": item.timeline.now.isoformat(timespec="seconds"),
        "current_session": item.timeline.current_session,
        "model": model,
        "prompt_id": prompt_id,
        "sample": sample,
    }


# --- schema and summary ---------------------------------------------------------------------------------


def features() -> Schema:
    return schema(
        {
            "question_id": STRING,
            "conversation_id": STRING,
            "question": STRING,
            "answer": STRING,
            "reference_kind": STRING,
            "speaker": STRING,
            "relevant_response_indices": list_of(INT64),
            "num_relevant": INT64,
            "anchor_text": STRING,
            "date": DATE,
            "session_index": INT64,
            "now": TIMESTAMP,
            "current_session": INT64,
            "model": STRING,
            "prompt_id": STRING,
            "sample": INT64,
        }
    )


class TimeContentQuestions(Product[TimeContentQuestionsOptions]):
    name = NAME
    description = DESCRIPTION
    Options = TimeContentQuestionsOptions
    configs = (ConfigSpec(NAME, DESCRIPTION, features(), questions=Questions("reference_kind", answer_field="answer")),)
    needs = Needs(timelines=True, llm=True, products=("log",))
    concurrent_batches = True  # each batch is planned from its own conversations (the plan memo is a cache)

    def build(self, units: Sequence[Unit], ctx: BuildContext) -> Iterator[Records]:
        options = self.options
        items = plan_items(units, ctx, options)
        accepted = generate(ctx, items, options)
        model = ctx.recipe.llm[options.endpoint].model
        prompt_id = ctx.templates.fingerprint(PROMPT)
        by_conversation: dict[str, list[Record]] = defaultdict(list)
        for item in items:
            if item.question_id in accepted:
                written, sample = accepted[item.question_id]
                by_conversation[item.timeline.conversation_id].append(record(item, written, sample, model, prompt_id))
        for unit in units:
            yield {NAME: by_conversation.get(unit.conversation_id, [])}

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        endpoint = ctx.recipe.llm.get(self.options.endpoint)
        check_conversation(
            records[NAME],
            unit.records_of("log"),
            self.options,
            endpoint.model if endpoint else None,
            ctx.templates.fingerprint(PROMPT),
            checks,
            unit.conversation_id,
            ctx.recipe.timeline.now_offset_minutes,
        )

    def llm_tasks(self, units: Sequence[Unit], ctx: BuildContext) -> list[tuple[str, list[Task], int]]:
        items = plan_items(units, ctx, self.options)
        step = question_step(self.options, ctx.templates)
        bound = most_calls(step, len(items), self.options.step_policy(NAME, ctx.recipe, retries=self.options.retries))
        return [(NAME, [step.task(item, 0) for item in items], bound)]

    def count(self, config: str, records: Sequence[Record]) -> Counter:
        counts: Counter = Counter()
        for row in records:
            counts["questions", row["reference_kind"]] += 1
            counts["first_try" if row["sample"] == 0 else "regenerated", row["reference_kind"]] += 1
            counts["anchor_size", len(row["relevant_response_indices"])] += 1
        counts["conversations", ""] += bool(records)
        return counts

    def summary(self, config: str, counts: Counter) -> dict:
        kinds = sorted({kind for (key, kind) in counts if key == "questions"})
        sizes = sorted(size for (key, size) in counts if key == "anchor_size")
        return {
            "questions": sum(counts["questions", kind] for kind in kinds),
            "conversations": counts["conversations", ""],
            "by_reference_kind": {
                kind: {
                    "questions": counts["questions", kind],
                    "first_try": counts["first_try", kind],
                    "regenerated": counts["regenerated", kind],
                }
                for kind in kinds
            },
            "by_anchor_size": {
                f"{size} response{'s' if size > 1 else ''}": counts["anchor_size", size] for size in sizes
            },
        }
