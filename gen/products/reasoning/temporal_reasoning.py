"""Temporal reasoning questions (config `temporal_reasoning`): questions about when topics came up, with gold
answers computed from the timeline, no LLM involved.

The topics are phrases of the conversation (topics.py), the base questions and their answers follow from the
topics' dates and "now" (questions.py), the words from templates (wording.py). The validator recomputes every
answer and evidence set from the `log` records (checking.py). docs/temporal-reasoning.md describes the tests.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator, Sequence

from gen.hashing import PrefixedIds, stable_id
from gen.products.base import BuildContext, ConfigSpec, ConversationProduct, Needs, Questions, Record, Records, Unit
from gen.products.checks import Checks
from gen.products.reasoning import checking
from gen.products.reasoning.options import TemporalReasoningOptions
from gen.products.reasoning.questions import base_questions
from gen.products.reasoning.topics import topics
from gen.products.reasoning.wording import answer_text, wordings
from gen.products.schema import DATE, INT64, STRING, TIMESTAMP, Schema, list_of, schema, struct

NAME = "temporal_reasoning"
DESCRIPTION = "questions on when topics came up (last, how long ago, which first, how long between), answers computed"


def features() -> Schema:
    return schema(
        {
            "question_id": STRING,
            "group_id": STRING,
            "conversation_id": STRING,
            "test": STRING,
            "question": STRING,
            "topics": list_of(STRING),
            "answer": STRING,
            "answer_kind": STRING,
            "answer_value": struct({"date": DATE, "days": INT64, "choice": STRING}),
            "now": TIMESTAMP,
            "relevant_response_indices": list_of(INT64),
            "num_relevant": INT64,
        }
    )


def seeded_wordings(found: list[str], limit: int, seed: int, conversation_id: str, group: str) -> list[str]:
    """The wordings a base question keeps: a sample drawn from (seed, conversation, group) alone, in template
    order, so every worker keeps the same ones."""
    if limit >= len(found):
        return found
    rng = random.Random(f"{seed}/{NAME}/{conversation_id}/{group}")
    return [found[i] for i in sorted(rng.sample(range(len(found)), limit))]


class TemporalReasoning(ConversationProduct[TemporalReasoningOptions]):
    name = NAME
    description = DESCRIPTION
    Options = TemporalReasoningOptions
    configs = (
        ConfigSpec(
            NAME,
            DESCRIPTION,
            features(),
            questions=Questions("test", answer_field="answer", asked_by_speaker_a=True, answer_computed=True),
        ),
    )
    needs = Needs(timelines=True, products=("log",))

    def records(self, unit: Unit, ctx: BuildContext) -> Iterator[tuple[str, Record]]:
        timeline, options = unit.stamped, self.options
        conversation_id = unit.conversation_id
        chosen = topics(timeline, options, ctx.seed, NAME)
        rng = random.Random(f"{ctx.seed}/{NAME}/{conversation_id}/pairs")
        now = timeline.now.isoformat(timespec="seconds")
        seen: set[str] = set()
        for base in base_questions(chosen, timeline.today, options, rng):
            group = stable_id([NAME, conversation_id, base.test, base.topics])
            question_id = PrefixedIds(NAME, conversation_id, base.test, base.topics)
            answer = answer_text(base.test, base.answer, ctx.templates)
            found = wordings(base, ctx.templates)
            for text in seeded_wordings(found, options.max_variants_per_group, ctx.seed, conversation_id, group):
                if text in seen:
                    ctx.reject(NAME, question_id(text), "duplicate question text in the conversation", text)
                    continue
                seen.add(text)
                yield (
                    NAME,
                    {
                        "question_id": question_id(text),
                        "group_id": group,
                        "conversation_id": conversation_id,
                        "test": base.test,
                        "question": text,
                        "topics": list(base.topics),
                        "answer": answer,
                        "answer_kind": base.answer.kind,
                        "answer_value": base.answer.value(),
                        "now": now,
                        "relevant_response_indices": list(base.evidence),
                        "num_relevant": len(base.evidence),
                    },
                )

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        log = list(unit.records_of("log"))
        checking.check_conversation(
            log, records[NAME], self.options, ctx.recipe.timeline.now_offset_minutes, checks, unit.conversation_id
        )

    def count(self, config: str, records: Sequence[Record]) -> Counter:
        counts: Counter = Counter()
        for record in records:
            counts[f"questions/{record['test']}"] += 1
        groups = {(record["test"], record["group_id"]) for record in records}
        counts.update(f"base/{test}" for test, _ in groups)
        return counts

    def summary(self, config: str, counts: Counter) -> dict:
        return {
            test: {"base_questions": counts[f"base/{test}"], "questions": counts[f"questions/{test}"]}
            for test in self.options.tests
        }
