"""Persona pseudo-dialogues with SQL storage labels (configs `persona_sql` and `persona_sql_episodes`;
docs/persona-sql.md).

Each episode's two personas are interleaved into a pseudo-dialogue (dialogue.py) and cut into pairs of
consecutive lines. Pair by pair, a model sees the pair's second line, its speaker, the table definition and
the table as it stands (templates/prompts/persona_sql_label.j2) and answers with SQL that stores the line's
facts in that speaker's row. The reply is checked while it is parsed (labels.py: sqlglot, then the sandbox,
then the rows), so a label that fails any check gets the engine's one correction round with the error shown;
one that fails again is in the run's rejects with the reason and the raw reply, its pair is written with
`label_status: "rejected"` and an unchanged table, and the episode goes on from that table.

Pairs depend on the labels before them (the table they show), so labelling runs in rounds over pair positions:
round k labels pair k of every episode of the batch at once, through the shared checked step.

With `retrieval_labels`, episodes that carry a memory question (MSC-Self-Instruct) get a SELECT over the final
table (templates/prompts/persona_sql_retrieve.j2), run read-only in the same sandbox, with the values it
returns and the option's target range beside them.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from gen.errors import GenError
from gen.llm.step import CheckedStep, StepPolicy, StepResult, most_calls
from gen.llm.step import run as run_step
from gen.llm.task import Task
from gen.products.base import (
    BuildContext,
    ConfigSpec,
    Needs,
    Product,
    Record,
    Records,
    Unit,
)
from gen.products.checks import Checks
from gen.products.persona.options import PersonaSQLOptions
from gen.products.persona.sandbox import TableSchema, dump
from gen.products.persona.steps import (
    LABEL_PROMPT,
    NAME,
    RETRIEVE_PROMPT,
    RETRIEVE_STEP,
    Episode,
    PairItem,
    episode_of,
    item_at,
    label_step,
    load_schema,
    retrieval_id,
    retrieve_step,
)
from gen.products.schema import BOOL, INT64, STRING, Schema, list_of, schema, struct
from gen.recipe import Recipe

if TYPE_CHECKING:
    from gen.products.persona import labels

EPISODES = "persona_sql_episodes"
STORED, REJECTED = "stored", "rejected"


# --- the labelling rounds -------------------------------------------------------------------------------


class Labeller:
    """Labels a batch of episodes: storage rounds over pair positions, then the retrieval labels."""

    def __init__(self, options: PersonaSQLOptions, schema: TableSchema, ctx: BuildContext) -> None:
        self.options, self.schema, self.ctx = options, schema, ctx
        self.model = ctx.recipe.llm[options.endpoint].model
        self.prompt_id = ctx.templates.fingerprint(LABEL_PROMPT)
        self.schema_id = ctx.templates.fingerprint(options.schema_template)

    def label(self, episodes: list[Episode]) -> None:
        rounds = max((len(e.lines) - 1 for e in episodes), default=0)
        step = label_step(self.options, self.schema, self.ctx.templates)
        for index in range(rounds):
            items = [item_at(e, index) for e in episodes if index < len(e.lines) - 1]
            result, failed = self.failure_reasons(step, items)
            for item in items:
                accepted = result.accepted.get(item.item_id)
                self.add_pair(item, accepted.value if accepted else None, failed.get(item.item_id))
        if self.options.retrieval_labels:
            self.retrieve([e for e in episodes if e.question[0]])

    def policy(self) -> StepPolicy:
        return self.options.step_policy(NAME, self.ctx.recipe, retries=0)  # the correction round is the second chance

    def failure_reasons(self, step: CheckedStep, items: Sequence[Any]) -> tuple[StepResult, dict[str, str]]:
        """Run the step; its result, and item id → the reason of each item the engine gave up on (after the
        correction round), which the engine has put in its rejects with the raw reply."""
        engine = self.ctx.llm()
        before = len(engine.rejects)
        result = run_step(step, engine, items, self.policy())
        failed = {r["item_id"]: r["reason"] for r in engine.rejects[before:] if r.get("step") == step.name}
        return result, failed

    def add_pair(self, item: PairItem, stored: labels.Stored | None, reason: str | None) -> None:
        episode = item.episode
        after = stored.rows_after if stored is not None else list(item.rows)
        episode.records.append(
            {
                "episode_id": episode.episode_id,
                "pair_index": item.index,
                "turns": [item.first.to_dict(), item.second.to_dict()],
                "target_speaker": item.second.speaker,
                "schema_ddl_id": self.schema_id,
                "table_before": dump(item.rows),
                "label_sql": stored.statements if stored is not None else [],
                "table_after": dump(after),
                "label_status": STORED if stored is not None else REJECTED,
                "reject_reason": None if stored is not None else (reason or "no label"),
                "model": self.model,
                "prompt_id": self.prompt_id,
            }
        )
        episode.rows = after

    def retrieve(self, episodes: list[Episode]) -> None:
        step = retrieve_step(self.options, self.schema, self.ctx.templates)
        result, failed = self.failure_reasons(step, episodes)
        for episode in episodes:
            accepted = result.accepted.get(retrieval_id(episode))
            episode.retrieval = retrieval_fields(
                accepted.value if accepted else None,
                failed.get(retrieval_id(episode)),
                self.options,
                self.ctx.templates.fingerprint(RETRIEVE_PROMPT),
            )


def retrieval_fields(
    found: labels.Retrieved | None, reason: str | None, options: PersonaSQLOptions, prompt_id: str
) -> dict:
    low, high = options.retrieval_min_fields, options.retrieval_max_fields
    return {
        "retrieval_status": STORED if found is not None else REJECTED,
        "retrieval_reject_reason": None if found is not None else (reason or "no label"),
        "retrieval_sql": found.statement if found is not None else None,
        "retrieved": json.dumps({"columns": found.columns, "rows": found.rows}, ensure_ascii=False)
        if found is not None
        else None,
        "retrieved_fields": found.fields if found is not None else None,
        "retrieval_target_min": low,
        "retrieval_target_max": high,
        "retrieval_in_target": (low <= found.fields <= high) if found is not None else None,
        "retrieval_prompt_id": prompt_id,
    }


NO_RETRIEVAL = {
    "retrieval_status": "none",
    "retrieval_reject_reason": None,
    "retrieval_sql": None,
    "retrieved": None,
    "retrieved_fields": None,
    "retrieval_target_min": None,
    "retrieval_target_max": None,
    "retrieval_in_target": None,
    "retrieval_prompt_id": None,
}


def episode_record(episode: Episode, schema_id: str, model: str) -> Record:
    question, answer = episode.question
    rejected = [r["pair_index"] for r in episode.records if r["label_status"] == REJECTED]
    return {
        "episode_id": episode.episode_id,
        "source_format": episode.unit.conversation.metadata.get("source_format", ""),
        "personas": [{"speaker": s, "facts": episode.facts[s]} for s in episode.speakers],
        "lines": [line.to_dict() for line in episode.lines],
        "pairs": len(episode.records),
        "rejected_pairs": rejected,
        "schema_ddl_id": schema_id,
        "final_table": dump(episode.rows),
        "memory_question": question,
        "gold_answer": answer,
        **(episode.retrieval or NO_RETRIEVAL),
        "model": model,
    }


# --- schema ---------------------------------------------------------------------------------------------


def pair_features() -> Schema:
    turn = struct({"speaker": STRING, "text": STRING})
    return schema(
        {
            "episode_id": STRING,
            "pair_index": INT64,
            "turns": list_of(turn),
            "target_speaker": STRING,
            "schema_ddl_id": STRING,
            "table_before": STRING,
            "label_sql": list_of(STRING),
            "table_after": STRING,
            "label_status": STRING,
            "reject_reason": STRING,
            "model": STRING,
            "prompt_id": STRING,
        }
    )


def episode_features() -> Schema:
    return schema(
        {
            "episode_id": STRING,
            "source_format": STRING,
            "personas": list_of(struct({"speaker": STRING, "facts": list_of(STRING)})),
            "lines": list_of(struct({"speaker": STRING, "text": STRING})),
            "pairs": INT64,
            "rejected_pairs": list_of(INT64),
            "schema_ddl_id": STRING,
            "final_table": STRING,
            "memory_question": STRING,
            "gold_answer": STRING,
            "retrieval_status": STRING,
            "retrieval_reject_reason": STRING,
            "retrieval_sql": STRING,
            "retrieved": STRING,
            "retrieved_fields": INT64,
            "retrieval_target_min": INT64,
            "retrieval_target_max": INT64,
            "retrieval_in_target": BOOL,
            "retrieval_prompt_id": STRING,
            "model": STRING,
        }
    )


PAIR_DESCRIPTION = (
    "a pair of pseudo-dialogue lines with the SQL that stores the second line's facts, and the table before and after"
)
EPISODE_DESCRIPTION = (
    "an episode's personas, pseudo-dialogue and final table, with its memory question and retrieval label where "
    "the source has one"
)


class PersonaSQL(Product[PersonaSQLOptions]):
    name = NAME
    description = "persona pseudo-dialogues with SQL storage labels, executed and checked in a sandbox"
    Options = PersonaSQLOptions
    configs = (
        ConfigSpec(NAME, PAIR_DESCRIPTION, pair_features()),
        ConfigSpec(EPISODES, EPISODE_DESCRIPTION, episode_features()),
    )
    needs = Needs(llm=True)

    def __init__(self, options: PersonaSQLOptions) -> None:
        super().__init__(options)
        self.episodes_taken = 0  # max_episodes counts over the whole run, batch after batch

    def check_recipe(self, recipe: Recipe, where: str) -> None:
        try:
            load_schema(self.options, recipe.templates)
        except GenError as exc:
            raise GenError(
                exc.message,
                file=recipe.file,
                field=f"{where}.{exc.field or 'schema'}",
                expected=exc.expected or f"a DDL template ({self.options.schema_template})",
            ) from None

    def take(self, units: Sequence[Unit]) -> list[Unit]:
        """The units still within max_episodes (the rest get no records)."""
        limit = self.options.max_episodes
        room = len(units) if limit is None else max(0, limit - self.episodes_taken)
        taken = list(units[:room])
        self.episodes_taken += len(taken)
        return taken

    def build(self, units: Sequence[Unit], ctx: BuildContext) -> Iterator[Records]:
        schema = load_schema(self.options, ctx.templates)
        taken = self.take(units)
        episodes = [episode_of(unit, self.options, schema) for unit in taken]
        labeller = Labeller(self.options, schema, ctx)
        if episodes:
            labeller.label(episodes)
        by_id = {e.episode_id: e for e in episodes}
        for unit in units:
            episode = by_id.get(unit.conversation_id)
            if episode is None:
                yield self.empty_records()
                continue
            yield {NAME: episode.records, EPISODES: [episode_record(episode, labeller.schema_id, labeller.model)]}

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        from gen.products.persona.checking import Expected, check_episode  # sqlglot: only when persona_sql runs

        schema = load_schema(self.options, ctx.templates)
        endpoint = ctx.recipe.llm.get(self.options.endpoint)
        schema_id = ctx.templates.fingerprint(self.options.schema_template)
        expected = Expected(schema, self.options, schema_id, endpoint.model if endpoint else None)
        check_episode(unit.conversation, records[NAME], records[EPISODES], expected, checks)

    def llm_tasks(self, units: Sequence[Unit], ctx: BuildContext) -> list[tuple[str, list[Task], int]]:
        """Every pair's first call, episode by episode. A pair's prompt shows the table the earlier labels
        leave, which is known only once they are: planned prompts show the table as the earlier labels of
        this plan would leave it if each stored nothing (the seeded table), so `cached` counts the first pair
        of each episode exactly and later pairs only when their earlier pairs stored nothing."""
        schema = load_schema(self.options, ctx.templates)
        limit = self.options.max_episodes
        episodes = [episode_of(u, self.options, schema) for u in list(units)[: limit or len(units)]]
        items = [item_at(e, k) for e in episodes for k in range(len(e.lines) - 1)]
        rules = self.options.step_policy(NAME, ctx.recipe, retries=0)
        step = label_step(self.options, schema, ctx.templates)
        steps = [(NAME, [step.task(item, 0) for item in items], most_calls(step, len(items), rules))]
        if self.options.retrieval_labels:
            asked = [e for e in episodes if e.question[0]]
            retrieve = retrieve_step(self.options, schema, ctx.templates)
            tasks = [retrieve.task(e, 0) for e in asked]
            steps.append((RETRIEVE_STEP, tasks, most_calls(retrieve, len(asked), rules)))
        return steps

    def count(self, config: str, records: Sequence[Record]) -> Counter:
        counts: Counter = Counter()
        for row in records:
            if config == NAME:
                counts["pairs", row["label_status"]] += 1
                if row["label_status"] == REJECTED:
                    counts["reasons", str(row["reject_reason"]).split(":")[0]] += 1
                counts["statements", ""] += len(row["label_sql"])
            else:
                counts["episodes", ""] += 1
                counts["retrieval", row["retrieval_status"]] += 1
                counts["in_target", str(row["retrieval_in_target"])] += 1
        return counts

    def summary(self, config: str, counts: Counter) -> dict:
        if config == NAME:
            return {
                "pairs": counts["pairs", STORED] + counts["pairs", REJECTED],
                "stored": counts["pairs", STORED],
                "rejected": counts["pairs", REJECTED],
                "statements": counts["statements", ""],
                "rejected_by_reason": {reason: n for (key, reason), n in sorted(counts.items()) if key == "reasons"},
            }
        return {
            "episodes": counts["episodes", ""],
            "retrieval": {status: counts["retrieval", status] for status in ("none", STORED, REJECTED)},
            "retrieval_in_target": counts["in_target", "True"],
        }
