"""TeaBag: counterfactual questions, each with a synthetic next session that ends by asking it (configs `teabag`
and `teabag_summaries`; docs/teabag.md).

For each episode with enough sessions (episodes.py), three checked LLM steps (steps.py) run over the whole batch
at once: every history session is summarised into short facts; the summaries, in order, give two questions, one
asked by each speaker, that presuppose something false as of the last session, with the answer a speaker who
remembers would give and the fact they contradict (optionally confirmed by a second call); and each question gets
a new session that follows the last history session and ends with that question, spoken by its asker. Every
answer is checked (replies.py), written again with the next sample index when it fails, and rejected with the
reason and the raw reply after the last round. An episode stops at the first step that rejects it.

Records carry quality scores of the new session (quality.py). The validator (checking.py) re-derives what it can
from the source conversation and the records alone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from gen.errors import GenError
from gen.llm.step import CheckedStep, StepResult, most_calls
from gen.llm.step import run as run_step
from gen.llm.task import Task
from gen.products.base import BuildContext, ConfigSpec, Needs, Product, Record, Records, Reject, Unit
from gen.products.checks import Checks
from gen.products.counterfactual import checking, quality, replies
from gen.products.counterfactual.episodes import Episode, Selection
from gen.products.counterfactual.options import STEPS, TeaBagOptions
from gen.products.counterfactual.steps import (
    NAME,
    PLACEHOLDER,
    Provenance,
    QuestionItem,
    SessionItem,
    SummaryItem,
    planned_question,
    question_step,
    reject_record,
    session_step,
    summary_rows,
    summary_step,
)
from gen.products.schema import BOOL, FLOAT64, INT64, STRING, Schema, Type, list_of, schema, struct
from gen.recipe import Recipe

SUMMARIES = "teabag_summaries"
DESCRIPTION = (
    "a counterfactual question one speaker asks the other, with its correct answer and a synthetic session "
    "leading up to it"
)
SUMMARIES_DESCRIPTION = "an episode's session summaries and its two counterfactual questions"


@dataclass
class Outcome:
    """What the steps made of one episode."""

    episode: Episode
    summaries: tuple[tuple[str, ...], ...] = ()
    questions: list[replies.Question] = field(default_factory=list)
    question_sample: int = 0
    sessions: dict[int, tuple[list[dict[str, str]], int]] = field(default_factory=dict)  # number → (turns, sample)
    rejected_step: str | None = None


# --- the steps over a batch -----------------------------------------------------------------------------


class Pipeline:
    def __init__(self, options: TeaBagOptions, ctx: BuildContext) -> None:
        self.options, self.ctx = options, ctx
        self.policy = options.step_policy(NAME, ctx.recipe, retries=options.retries)

    def run(self, episodes: list[Episode]) -> list[Outcome]:
        outcomes = [Outcome(e) for e in episodes]
        self.summarise(outcomes)
        self.ask([o for o in outcomes if o.rejected_step is None])
        self.stage([o for o in outcomes if o.rejected_step is None])
        return outcomes

    def step(self, step: CheckedStep[Any], items: Sequence[Any]) -> StepResult:
        result = run_step(step, self.ctx.llm(), items, self.policy)
        by_id = {item.item_id: item for item in items}
        for reject in result.rejects:  # items whose every attempt failed a check (failed calls: engine rejects)
            record = reject_record(step.name, by_id[reject["item_id"]].episode, reject)
            details = {k: v for k, v in record.items() if k not in ("product", "item_id", "reason", "raw_text")}
            self.ctx.rejects.append(Reject(NAME, reject["item_id"], reject["reason"], reject["raw_text"], details))
        return result

    def summarise(self, outcomes: list[Outcome]) -> None:
        items = [SummaryItem(o.episode, k) for o in outcomes for k in range(1, o.episode.sessions + 1)]
        result = self.step(summary_step(self.options, self.ctx.templates), items)
        for outcome in outcomes:
            ids = [SummaryItem(outcome.episode, k).item_id for k in range(1, outcome.episode.sessions + 1)]
            if all(i in result.accepted for i in ids):
                outcome.summaries = tuple(tuple(result.accepted[i].value) for i in ids)
            else:
                outcome.rejected_step = "summaries"

    def ask(self, outcomes: list[Outcome]) -> None:
        items = [QuestionItem(o.episode, o.summaries) for o in outcomes]
        result = self.step(question_step(self.options, self.ctx.templates), items)
        for outcome, item in zip(outcomes, items):
            accepted = result.accepted.get(item.item_id)
            if accepted is None:
                outcome.rejected_step = "questions"
                continue
            order = list(outcome.episode.speakers)  # the first speaker's question first, whatever the reply's order
            outcome.questions = sorted(accepted.value, key=lambda q: order.index(q.asker))
            outcome.question_sample = accepted.sample

    def stage(self, outcomes: list[Outcome]) -> None:
        items = [SessionItem(o.episode, q) for o in outcomes for q in o.questions]
        result = self.step(session_step(self.options, self.ctx.templates), items)
        by_episode = {o.episode.episode_id: o for o in outcomes}
        for item in items:
            outcome = by_episode[item.episode.episode_id]
            accepted = result.accepted.get(item.item_id)
            if accepted is None:
                outcome.rejected_step = outcome.rejected_step or "session6"
            else:
                outcome.sessions[item.number] = (accepted.value, accepted.sample)


# --- records --------------------------------------------------------------------------------------------


def question_records(outcome: Outcome, options: TeaBagOptions, seen: Provenance) -> list[Record]:
    episode = outcome.episode
    rows = []
    for number, question in enumerate(outcome.questions, start=1):
        if number not in outcome.sessions:
            continue
        turns, sample = outcome.sessions[number]
        texts = [t["text"] for t in turns]
        rows.append(
            {
                "question_id": SessionItem(episode, question).item_id,
                "episode_id": episode.episode_id,
                "source": episode.source,
                "speakers": list(episode.speakers),
                "history": episode.history(),
                "summaries": summary_rows(outcome.summaries),
                **question.to_dict(),
                "session6": turns,
                "distinct_token_ratio": quality.distinct_ratio(texts),
                "coherence": quality.coherence(texts, seen.method),
                "coherence_method": seen.method,
                "verified": options.verify,
                "model": seen.models["question"],
                "models": dict(seen.models),
                **{f"{step}_prompt_id": seen.prompt_ids[step] for step in STEPS},
                "question_sample": outcome.question_sample,
                "session6_sample": sample,
            }
        )
    return rows


def summaries_record(outcome: Outcome, written: int, seen: Provenance) -> Record:
    episode = outcome.episode
    return {
        "episode_id": episode.episode_id,
        "source": episode.source,
        "speakers": list(episode.speakers),
        "sessions": episode.sessions,
        "summaries": summary_rows(outcome.summaries),
        "questions": [q.to_dict() for q in outcome.questions],
        "teabag_records": written,
        "rejected_step": outcome.rejected_step,
        "model": seen.models["summary"],
        "summary_prompt_id": seen.prompt_ids["summary"],
    }


# --- schema ---------------------------------------------------------------------------------------------


def _turn() -> Type:
    return struct({"speaker": STRING, "text": STRING})


def _summaries() -> Type:
    return list_of(struct({"session": INT64, "facts": list_of(STRING)}))


def _question() -> dict[str, Type]:
    return {k: STRING for k in ("asker", "answerer", "question", "correct_answer", "contradicted_fact")}


def teabag_features() -> Schema:
    return schema(
        {
            "question_id": STRING,
            "episode_id": STRING,
            "source": STRING,
            "speakers": list_of(STRING),
            "history": list_of(struct({"session": INT64, "turns": list_of(_turn())})),
            "summaries": _summaries(),
            **_question(),
            "session6": list_of(_turn()),
            "distinct_token_ratio": FLOAT64,
            "coherence": FLOAT64,
            "coherence_method": STRING,
            "verified": BOOL,
            "model": STRING,
            "models": struct({step: STRING for step in STEPS}),
            **{f"{step}_prompt_id": STRING for step in STEPS},
            "question_sample": INT64,
            "session6_sample": INT64,
        }
    )


def summaries_features() -> Schema:
    return schema(
        {
            "episode_id": STRING,
            "source": STRING,
            "speakers": list_of(STRING),
            "sessions": INT64,
            "summaries": _summaries(),
            "questions": list_of(struct(_question())),
            "teabag_records": INT64,
            "rejected_step": STRING,
            "model": STRING,
            "summary_prompt_id": STRING,
        }
    )


# --- the product ----------------------------------------------------------------------------------------


class TeaBag(Product[TeaBagOptions]):
    name = NAME
    description = "counterfactual questions about an episode's past, each with a synthetic next session that asks it"
    Options = TeaBagOptions
    configs = (
        ConfigSpec(NAME, DESCRIPTION, teabag_features()),
        ConfigSpec(SUMMARIES, SUMMARIES_DESCRIPTION, summaries_features()),
    )
    needs = Needs(llm=True)

    def __init__(self, options: TeaBagOptions) -> None:
        super().__init__(options)
        self.selection = Selection(options.sessions, options.episodes)  # counts over the whole run

    def check_recipe(self, recipe: Recipe, where: str) -> None:
        try:
            quality.method_for(self.options.coherence)
        except GenError as exc:
            raise GenError(exc.message, file=recipe.file, field=f"{where}.coherence", expected=exc.expected) from None

    def build(self, units: Sequence[Unit], ctx: BuildContext) -> Iterator[Records]:
        episodes = self.selection.take(units)
        outcomes = Pipeline(self.options, ctx).run(episodes) if episodes else []
        seen = Provenance.of(self.options, ctx.recipe)
        by_id = {o.episode.episode_id: o for o in outcomes}
        for unit in units:
            outcome = by_id.get(unit.conversation_id)
            if outcome is None:
                yield self.empty_records()
                continue
            rows = question_records(outcome, self.options, seen)
            yield {NAME: rows, SUMMARIES: [summaries_record(outcome, len(rows), seen)]}

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        seen = Provenance.of(self.options, ctx.recipe)
        checking.check_episode(unit.conversation, records[NAME], records[SUMMARIES], self.options, seen, checks)

    def llm_tasks(self, units: Sequence[Unit], ctx: BuildContext) -> list[tuple[str, list[Task], int]]:
        """First-round calls per step. Only the summaries' prompts are known before any call; the later steps'
        prompts show a placeholder where earlier replies go, so their `cached` counts and token estimates are
        lower bounds."""
        options, templates = self.options, ctx.templates
        episodes = Selection(options.sessions, options.episodes).take(units)
        rules = options.step_policy(NAME, ctx.recipe, retries=options.retries)
        blank = tuple((PLACEHOLDER,) for _ in range(options.sessions))
        plan: list[tuple[CheckedStep[Any], list[Any]]] = [
            (summary_step(options, templates), [SummaryItem(e, k) for e in episodes for k in range(1, e.sessions + 1)]),
            (question_step(options, templates), [QuestionItem(e, blank) for e in episodes]),
            (
                session_step(options, templates),
                [SessionItem(e, planned_question(e, n)) for e in episodes for n in (1, 2)],
            ),
        ]
        return [
            (step.name, [step.task(item, 0) for item in items], most_calls(step, len(items), rules))
            for step, items in plan
        ]

    def count(self, config: str, records: Sequence[Record]) -> Counter:
        counts: Counter = Counter()
        for row in records:
            if config == NAME:
                counts["questions", row["source"]] += 1
                counts["session6", "first try" if row["session6_sample"] == 0 else "regenerated"] += 1
                counts["micro", "distinct_token_ratio"] += round(row["distinct_token_ratio"] * 1_000_000)
                counts["micro", "coherence"] += round(row["coherence"] * 1_000_000)
            else:
                counts["episodes", row["source"]] += 1
                counts["complete", ""] += row["teabag_records"] == 2
                if row["rejected_step"]:
                    counts["rejected at", row["rejected_step"]] += 1
        return counts

    def summary(self, config: str, counts: Counter) -> dict:
        if config == NAME:
            total = sum(n for (key, _), n in counts.items() if key == "questions")
            return {
                "questions": total,
                "by_source": {s: n for (key, s), n in sorted(counts.items()) if key == "questions"},
                "session6_first_try": counts["session6", "first try"],
                "session6_regenerated": counts["session6", "regenerated"],
                "mean_distinct_token_ratio": round(counts["micro", "distinct_token_ratio"] / 1e6 / total, 4)
                if total
                else None,
                "mean_coherence": round(counts["micro", "coherence"] / 1e6 / total, 4) if total else None,
            }
        return {
            "episodes": sum(n for (key, _), n in counts.items() if key == "episodes"),
            "by_source": {s: n for (key, s), n in sorted(counts.items()) if key == "episodes"},
            "complete": counts["complete", ""],
            "rejected_at": {step: n for (key, step), n in sorted(counts.items()) if key == "rejected at"},
            "skipped": dict(sorted(self.selection.skipped.items())),
        }
