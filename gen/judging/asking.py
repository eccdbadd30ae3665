"""Asking a judge about a set of cases: the one way every judge of gen calls its model.

A judge is described by a :class:`Rubric`: its engine step, its prompt template (templates/prompts/...) and the
reply it must give, a short reason and then a verdict. Each :class:`Case` is one call: an id and the prompt's
values. :func:`ask` sends them through the shared checked step (gen/llm/step.py) and the engine, so every call is
cached (a second run makes none; an interrupted one resumes), rate-limited and counted like every other LLM call
of gen. A reply that does not parse gets the engine's one correction round; a reply still unusable is a reject
of the step, counted and kept with its reason and raw text as a :class:`Ruling` without a verdict, never guessed.
More rejects than the endpoint's `max_reject_rate` stop the command before anything is written.
"""

from __future__ import annotations

import logging
import typing
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, field_validator

from gen.errors import Stopped

if TYPE_CHECKING:
    from gen.judging.endpoint import Judge
    from gen.llm.config import RunSettings
    from gen.llm.engine import Engine
    from gen.llm.step import StepResult

log = logging.getLogger(__name__)

REJECT_OPTION = "max_reject_rate of the judging endpoint in the llm: section"


class VerdictReply(BaseModel):
    """The base of a judge's reply model: `reason` first (the judge says why before it decides), then `verdict`,
    which each subclass declares as a Literal of its words; a verdict in another case or with spaces around it
    ("Yes", " INCORRECT ") is read as the word it spells, anything else still fails (the correction round)."""

    reason: str = ""

    @field_validator("verdict", mode="before", check_fields=False)
    @classmethod
    def _any_case(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        words = typing.get_args(cls.model_fields["verdict"].annotation)
        return next((word for word in words if word.lower() == value.strip().lower()), value)


@dataclass(frozen=True)
class Rubric:
    step: str  # the engine step of the calls (its counts and rejects are filed under it)
    prompt: str  # the template, relative to templates/
    reply: type[BaseModel]  # the parsed reply: it has `reason` and `verdict`


@dataclass(frozen=True)
class Case:
    item_id: str
    values: dict[str, Any]  # the prompt's variables


@dataclass(frozen=True)
class Ruling:
    """The judge's word on one case: a verdict with its reason, or no verdict and why (`failure`)."""

    verdict: str | None
    reason: str | None = None  # the reason the judge gave with its verdict
    reply: str | None = None  # the judge's raw reply
    failure: str | None = None  # why there is no verdict: the engine's kind and reason
    cached: bool = False


@dataclass
class Judgement:
    rulings: dict[str, Ruling]  # case id → ruling, for every case asked
    about: dict[str, Any] = field(default_factory=dict)  # endpoint, model, prompt and the calls it took


REJECTS_IN = "the verdicts file"


def ask(rubric: Rubric, cases: Sequence[Case], judge: Judge, settings: RunSettings) -> Judgement:
    """Every case judged; `about` says who judged, with which prompt, and what it cost."""
    from gen.llm.engine import Engine
    from gen.templating import template_id

    name, config = judge.name, judge.config
    with Engine({name: config}, settings) as engine:
        rulings = run_cases(engine, rubric, cases, judge) if cases else {}
        report = engine.report()
    step = report["steps"].get(rubric.step, {})
    about = {
        "endpoint": name,
        "model": config.model,
        "fingerprint": report["endpoints"][name]["fingerprint"],
        "prompt": rubric.prompt,
        "prompt_id": template_id(rubric.prompt),
        **{key: step.get(key, 0) for key in ("calls_made", "calls_cached", "input_tokens", "output_tokens")},
        "cost_usd": step.get("cost_usd"),
    }
    return Judgement(rulings, about)


def run_cases(engine: Engine, rubric: Rubric, cases: Sequence[Case], judge: Judge) -> dict[str, Ruling]:
    """One checked step without checks of its own and without regeneration: the verdict's parse is the check (its
    correction round is the engine's), and a judge is asked once per case."""
    from gen.llm.step import CheckedStep, StepPolicy, run
    from gen.llm.task import Task, render_messages

    def task(case: Case, sample: int) -> Task:
        messages = render_messages(rubric.prompt, **case.values)
        return Task(item_id=case.item_id, endpoint=judge.name, parser=rubric.reply, messages=messages, sample=sample)

    step: CheckedStep[Case] = CheckedStep(
        name=rubric.step,
        task=task,
        check=lambda case, reply: (),
        item_id=lambda case: case.item_id,
        rejects_in=REJECTS_IN,
    )
    policy = StepPolicy(retries=0, max_reject_rate=judge.config.max_reject_rate, reject_option=REJECT_OPTION)
    try:
        result = run(step, engine, cases, policy)
    except Stopped as stop:
        raise stopped(stop, engine) from None
    return rulings_of(result)


def rulings_of(result: StepResult) -> dict[str, Ruling]:
    rulings = {
        item_id: Ruling(accepted.value.verdict, accepted.value.reason, accepted.text, cached=accepted.cached)
        for item_id, accepted in result.accepted.items()
    }
    for item_id, outcome in result.failures.items():
        failure = f"{outcome.kind}: {outcome.reason}"
        rulings[item_id] = Ruling(None, reply=outcome.text, failure=failure, cached=outcome.cached)
    return rulings


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
