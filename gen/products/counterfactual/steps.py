"""The three checked LLM steps of TeaBag (plus the optional verify call), as items, prompts and checks.

teabag/summaries   one item per history session: its turns → numbered short facts about the speakers
teabag/questions   one item per episode: every summary in order → two counterfactual questions, one per asker
teabag/verify      (option `verify`) the two questions and the summaries → does each presupposition contradict them?
teabag/session6    one item per question: the last history session → a new session ending with that question
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gen.llm.step import CheckedStep, Problem, Verify
from gen.llm.task import Task, render_messages
from gen.products.counterfactual import quality, replies
from gen.products.counterfactual.episodes import Episode
from gen.products.counterfactual.options import STEPS
from gen.products.counterfactual.options import TeaBagOptions as Options
from gen.recipe import Recipe
from gen.templating import Templates

NAME = "teabag"
SUMMARY_STEP, QUESTION_STEP, VERIFY_STEP, SESSION_STEP = (
    f"{NAME}/{s}" for s in ("summaries", "questions", "verify", "session6")
)
PROMPTS = {
    "summary": "prompts/teabag_summary.j2",
    "question": "prompts/teabag_questions.j2",
    "verify": "prompts/teabag_verify.j2",
    "session6": "prompts/teabag_session6.j2",
}
PLACEHOLDER = "(written by the previous step)"  # what planned prompts show in place of earlier replies


@dataclass(frozen=True)
class SummaryItem:
    episode: Episode
    session: int  # 1-based

    @property
    def item_id(self) -> str:
        return f"{self.episode.episode_id}/summary-{self.session}"


@dataclass(frozen=True)
class QuestionItem:
    episode: Episode
    summaries: tuple[tuple[str, ...], ...]  # facts per history session, in order

    @property
    def item_id(self) -> str:
        return f"{self.episode.episode_id}/questions"


@dataclass(frozen=True)
class SessionItem:
    episode: Episode
    question: replies.Question

    @property
    def number(self) -> int:
        """1 when the first speaker asks, 2 when the second does."""
        return self.episode.speakers.index(self.question.asker) + 1

    @property
    def item_id(self) -> str:
        return question_id(self.episode.episode_id, self.number)


def question_id(episode_id: str, number: int) -> str:
    return f"{episode_id}/teabag-{number}"


def endpoint_of(options: Options, step: str) -> str:
    chosen: str | None = getattr(options, f"{step}_endpoint")
    return chosen or options.endpoint


def summary_rows(summaries: tuple[tuple[str, ...], ...]) -> list[dict[str, Any]]:
    return [{"session": number, "facts": list(facts)} for number, facts in enumerate(summaries, start=1)]


# --- tasks ----------------------------------------------------------------------------------------------


def summary_task(item: SummaryItem, options: Options, sample: int, templates: Templates) -> Task:
    episode = item.episode
    return Task(
        item_id=item.item_id,
        endpoint=endpoint_of(options, "summary"),
        sample=sample,
        parser=replies.Summary,
        messages=render_messages(
            PROMPTS["summary"],
            templates,
            speakers=list(episode.speakers),
            session=item.session,
            turns=episode.history()[item.session - 1]["turns"],
            max_facts=replies.MAX_FACTS,
        ),
    )


def question_task(item: QuestionItem, options: Options, sample: int, templates: Templates) -> Task:
    episode = item.episode
    return Task(
        item_id=item.item_id,
        endpoint=endpoint_of(options, "question"),
        sample=sample,
        parser=replies.Counterfactuals,
        messages=render_messages(
            PROMPTS["question"],
            templates,
            speakers=list(episode.speakers),
            summaries=summary_rows(item.summaries),
            last_session=episode.sessions,
        ),
    )


def verify_task(item: QuestionItem, questions: list[replies.Question], options: Options, templates: Templates) -> Task:
    episode = item.episode
    return Task(
        item_id=item.item_id,
        endpoint=endpoint_of(options, "verify"),
        parser=replies.Verdicts,
        messages=render_messages(
            PROMPTS["verify"],
            templates,
            speakers=list(episode.speakers),
            summaries=summary_rows(item.summaries),
            last_session=episode.sessions,
            questions=[q.to_dict() for q in questions],
        ),
    )


def session_task(item: SessionItem, options: Options, sample: int, templates: Templates) -> Task:
    episode = item.episode
    return Task(
        item_id=item.item_id,
        endpoint=endpoint_of(options, "session6"),
        sample=sample,
        parser=replies.NewSession,
        messages=render_messages(
            PROMPTS["session6"],
            templates,
            speakers=list(episode.speakers),
            previous=episode.last_session(),
            previous_number=episode.sessions,
            number=episode.sessions + 1,
            asker=item.question.asker,
            answerer=item.question.answerer,
            question=item.question.question,
            min_turns=options.session6_turns.min,
            max_turns=options.session6_turns.max,
        ),
    )


# --- steps ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Provenance:
    """Models and prompt ids every record of the run names."""

    models: dict[str, str | None]
    prompt_ids: dict[str, str | None]
    method: str

    @classmethod
    def of(cls, options: Options, recipe: Recipe) -> Provenance:
        used = [step for step in STEPS if step != "verify" or options.verify]
        models = {step: recipe.llm[endpoint_of(options, step)].model if step in used else None for step in STEPS}
        ids = {step: recipe.templates.fingerprint(PROMPTS[step]) if step in used else None for step in STEPS}
        return cls(models, ids, quality.method_for(options.coherence))


def reject_record(step: str, episode: Episode, reject: dict[str, Any]) -> dict[str, Any]:
    return {"product": NAME, "step": step, "episode_id": episode.episode_id, **reject}


def summary_step(options: Options, templates: Templates) -> CheckedStep[SummaryItem]:
    return CheckedStep(
        name=SUMMARY_STEP,
        task=lambda item, sample: summary_task(item, options, sample, templates),
        prepare=lambda item, reply: replies.summary_facts(reply),
        check=lambda item, facts: replies.summary_problems(facts, item.episode.speakers),
        item_id=lambda item: item.item_id,
        describe=lambda facts: {"facts": facts},
        record=lambda item, reject: reject_record(SUMMARY_STEP, item.episode, reject),
    )


def question_step(options: Options, templates: Templates) -> CheckedStep[QuestionItem]:
    verify: Verify[QuestionItem] = Verify(
        VERIFY_STEP,
        task=lambda item, questions: verify_task(item, questions, options, templates),
        judge=lambda item, verdicts: replies.verdict_problem(verdicts, 2),
    )
    return CheckedStep(
        name=QUESTION_STEP,
        task=lambda item, sample: question_task(item, options, sample, templates),
        prepare=lambda item, reply: replies.questions_of(reply, item.episode.speakers),
        check=lambda item, questions: replies.question_problems(questions, item.episode.speakers),
        item_id=lambda item: item.item_id,
        describe=lambda questions: {"questions": [q.to_dict() for q in questions]},
        record=lambda item, reject: reject_record(QUESTION_STEP, item.episode, reject),
        verify=verify if options.verify else None,
    )


def session_step(options: Options, templates: Templates) -> CheckedStep[SessionItem]:
    low, high = options.session6_turns.min, options.session6_turns.max
    floors = options.min_quality.model_dump()
    method = quality.method_for(options.coherence) if any(v is not None for v in floors.values()) else None

    def check(item: SessionItem, turns: list[dict[str, str]]) -> list[Problem]:
        found = replies.session_problems(
            turns, item.episode.speakers, item.question.asker, item.question.question, low, high
        )
        if method is not None and not found:  # the scores of a session that is otherwise right
            under = quality.below(quality.scores([t["text"] for t in turns], method), floors)
            found += [Problem("low quality", "; ".join(under))] if under else []
        return found

    def describe(turns: list[dict[str, str]]) -> dict[str, Any]:
        scored = quality.scores([t["text"] for t in turns], method) if method is not None else {}
        return {"session6": turns, **scored}

    return CheckedStep(
        name=SESSION_STEP,
        task=lambda item, sample: session_task(item, options, sample, templates),
        prepare=lambda item, reply: replies.session_lines(reply),
        check=check,
        item_id=lambda item: item.item_id,
        describe=describe,
        record=lambda item, reject: reject_record(SESSION_STEP, item.episode, reject),
    )


# --- planning -------------------------------------------------------------------------------------------


def planned_question(episode: Episode, number: int) -> replies.Question:
    """A stand-in question for planned session-6 prompts (the real one is known only after the questions step)."""
    asker = episode.speakers[number - 1]
    answerer = episode.speakers[2 - number]
    return replies.Question(asker, answerer, PLACEHOLDER, PLACEHOLDER, PLACEHOLDER)
