"""The judge's call: the prompt, the reply it must give, and one engine step over the answered questions.

Through the engine every call is cached (a re-run makes none; an interrupted one resumes), rate-limited, and
its reply parsed into :class:`Reply`; a reply that does not parse gets one correction round, then the
question is given up with the reason and the raw reply (see gen/llm/engine.py).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from pydantic import BaseModel, field_validator

from gen.errors import Stopped
from gen.llm.task import Outcome, Task, render_messages
from gen.teabag_judge.items import Question

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from gen.llm.engine import Engine

PROMPT = "prompts/teabag_judge.j2"
STEP = "teabag_judge"


class Reply(BaseModel):
    """What the judge must answer: a short reason first (it says why before it decides), then the verdict."""

    reason: str = ""
    verdict: Literal["Correct", "Incorrect"]

    @field_validator("verdict", mode="before")
    @classmethod
    def _any_case(cls, value: object) -> object:
        # "correct" or " INCORRECT " mean the same; anything else still fails (and goes to the correction round)
        return value.strip().capitalize() if isinstance(value, str) else value


def judge_task(question: Question, answer: str, endpoint: str) -> Task:
    return Task(
        item_id=question.question_id,
        endpoint=endpoint,
        parser=Reply,
        messages=render_messages(
            PROMPT,
            asker=question.asker,
            answerer=question.answerer,
            question=question.question,
            correct_answer=question.correct_answer,
            contradicted_fact=question.contradicted_fact,
            answer=answer,
        ),
    )


def ask_judge(
    engine: Engine,
    questions: Sequence[Question],
    answers: Mapping[str, str],
    endpoint: str,
    max_reject_rate: float | None,
) -> dict[str, Outcome]:
    """question_id → the judge's outcome, for every question given here (all of them answered)."""
    tasks = [judge_task(q, answers[q.question_id], endpoint) for q in questions]
    try:
        outcomes = engine.run_step(STEP, tasks, max_reject_rate=max_reject_rate, reject_option=REJECT_OPTION)
    except Stopped as stop:
        raise stopped(stop, engine) from None
    return {outcome.item_id: outcome for outcome in outcomes}


REJECT_OPTION = "max_reject_rate of the judging endpoint in the llm: section"


def stopped(stop: Stopped, engine: Engine) -> Stopped:
    """The engine's stop, with the first failures shown (there is no run folder to keep them in) and how to
    resume."""
    for reject in engine.rejects[:5]:
        log.warning("not judged: %s: %s: %s", reject["item_id"], reject["kind"], reject["reason"])
    return Stopped(
        f"{stop.message}; no verdicts file was written; every reply received is cached, so the same command resumes",
        record=stop.record,
        field=stop.field,
        expected=stop.expected,
    )
