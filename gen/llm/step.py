"""The checked LLM step every LLM product uses: generate, check, regenerate, optionally verify, reject.

The engine makes sure a reply arrives and parses; whether it is any good is the product's to say. A product
describes its step once and hands it its items::

    step = CheckedStep(
        name="time_content_questions",
        task=lambda item, sample: question_task(item, options, sample, templates),
        check=lambda item, question: problems(question, item.facts, options.max_overlap, ...),
        item_id=lambda item: item.question_id,
        prepare=lambda item, reply: clean(reply.question),   # the parsed reply -> the product's value
        describe=lambda question: {"question": question},     # how an attempt's value shows in rejects
        verify=Verify("time_content_questions/verify", task=verify_task, judge=judge),
    )
    result = run(step, engine, items, StepPolicy(retries=options.retries))
    result.accepted["conv/q-001"]   # Accepted(value, sample, text, cached); items missing here were given up on
    result.rejects                  # the items whose every attempt failed a check, with the reason and attempts

How it runs, in rounds over every pending item together:

1. round ``k`` (``k = 0 .. retries``) sends each pending item's ``task(item, k)`` as one engine step; the
   sample index enters the cache key, so every round is a new, independently cached generation;
2. each reply is ``prepare``-d and ``check``-ed; an item with problems is pending for the next round;
3. with ``verify``, the items that passed send ``verify.task(item, value)`` as a second engine step (named
   ``verify.name``); ``verify.judge(item, verdict)`` returns a problem (the item is pending again) or None;
4. the items that passed everything are accepted with that round's sample.

An item whose call failed in the engine (request, parse or truncation failure; not cached when planning)
stops there: the engine has already recorded it in ``engine.rejects``, so it is listed in
``StepResult.failed`` only. An item still failing after the last round becomes a reject here, its reason
the first problem of its last attempt, followed by "(after N attempts)".

Counting: the items are the step's items, one each, whatever the rounds and verify calls they take. The step
registers them with the engine (``engine.add_items``) and reports each item's fate where it is decided
(``engine.decide``): accepted after the round that passed it, rejected after the last round; an item whose
call failed is counted rejected by the engine there and then (``run_step(..., items_of=step.name)``), since
its item ends with it. So run.json's ``items``/``ok``/``rejected``, the live line and rejects.jsonl say the
same. ``policy.max_reject_rate`` is a share of those items: more than ``floor(max_reject_rate × items)``
rejected (items over every run of the step name) stops the run, in the engine as failed calls come in or here
after the last round, with the same error. Regenerations never count as rejects.

Every early stop (the reject limit, in the engine or here; an endpoint given up on; a server that keeps
refusing) is a :class:`gen.errors.Stopped` whose ``rejects`` hold, in the shape of the product's rejects
(``step.record``), every item this step rejected so far: the items whose attempts all failed their checks,
and, when the stop came between rounds, the items that had failed a check and were waiting for their next
round. Items whose call failed are in ``engine.rejects``, as always.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel

from gen.errors import Stopped
from gen.llm.accounts.progress import announce
from gen.llm.task import Outcome, Task

if TYPE_CHECKING:
    from gen.llm.accounts.plan import StepPlan
    from gen.llm.engine.engine import Engine

__all__ = ["Accepted", "CheckedStep", "Problem", "StepPolicy", "StepResult", "Verify", "most_calls", "plan", "run"]

ItemT = TypeVar("ItemT")


@dataclass(frozen=True)
class Problem:
    """Why a value fails a check. ``code``: a short category (the part of a reject reason before the colon)."""

    code: str
    detail: str

    def __str__(self) -> str:
        return f"{self.code}: {self.detail}"


@dataclass(frozen=True)
class StepPolicy:
    """How hard a step tries. Products build it from their options."""

    retries: int = 2  # regenerations, each with the next sample index, after a failed check
    max_reject_rate: float | None = 0.2  # None: no limit
    reject_option: str | None = None  # where the user sets max_reject_rate, as the stop message names it

    def __post_init__(self) -> None:
        if self.retries < 0:
            raise ValueError("retries must be 0 or more")
        if self.max_reject_rate is not None and not 0 <= self.max_reject_rate <= 1:
            raise ValueError("max_reject_rate must be between 0 and 1")


@dataclass(frozen=True)
class Verify(Generic[ItemT]):
    """A second call that must confirm a value that passed the checks."""

    name: str  # the engine step of the verify calls
    task: Callable[[ItemT, Any], Task]  # (item, value) -> the verify call
    judge: Callable[[ItemT, Any], Problem | None]  # (item, parsed verdict) -> a problem, or None to confirm


@dataclass(frozen=True)
class CheckedStep(Generic[ItemT]):
    """What a product says about its LLM step; see the module docstring."""

    name: str  # the engine step of the generation calls (stats and engine rejects are filed under it)
    task: Callable[[ItemT, int], Task]  # (item, sample index) -> the generation call, prompt rendered
    check: Callable[[ItemT, Any], Sequence[Problem]]  # (item, value) -> problems; none means accepted
    item_id: Callable[[ItemT], str]  # unique among the items of one run
    verify: Verify[ItemT] | None = None
    prepare: Callable[[ItemT, Any], Any] | None = None  # (item, parsed reply) -> value; default: the reply
    logprobs: bool = False  # prepare gets (parsed reply, the reply's logprobs object): tasks that ask for them
    describe: Callable[[Any], dict[str, Any]] | None = None  # value -> its fields in a reject's attempts
    # (item, {item_id, reason, raw_text, attempts}) -> the line in rejects.jsonl (for the rejects of a stop)
    record: Callable[[ItemT, dict[str, Any]], dict[str, Any]] | None = None
    rejects_in: str = "rejects.jsonl"  # the file that keeps the rejects' reasons, as the closing line names it


@dataclass(frozen=True)
class Accepted:
    value: Any
    sample: int  # the round that produced it
    text: str | None  # the raw reply
    cached: bool = field(default=False, compare=False)  # the reply came from the cache (no call was made)


@dataclass
class StepResult:
    accepted: dict[str, Accepted]  # item id -> value, in item order
    rejects: list[dict[str, Any]]  # {item_id, reason, raw_text, attempts}, in item order
    failed: list[str]  # ids of items whose call failed in the engine (recorded in engine.rejects)
    # the failed items' last outcomes (kind, reason, raw reply, cached), for callers that report each item's fate
    failures: dict[str, Outcome] = field(default_factory=dict)


def run(
    step: CheckedStep[ItemT], engine: Engine, items: Sequence[ItemT], policy: StepPolicy = StepPolicy()
) -> StepResult:
    """Every item through the rounds described in the module docstring."""
    return _Run(step, engine, policy, items).execute()


def plan(
    step: CheckedStep[ItemT], engine: Engine, items: Sequence[ItemT], policy: StepPolicy = StepPolicy()
) -> tuple[StepPlan, int]:
    """The first round's plan (no network), and the most calls all rounds could make."""
    first_round = engine.plan(step.name, [step.task(item, 0) for item in items])
    return first_round, most_calls(step, len(items), policy)


def most_calls(step: CheckedStep[Any], items: int, policy: StepPolicy) -> int:
    """Every round for every item, its verify call, and a correction round for each call."""
    calls_per_round = 2 if step.verify is not None else 1
    return items * (policy.retries + 1) * calls_per_round * 2


@dataclass
class _Attempt:
    sample: int
    value: Any
    problems: list[Problem]
    text: str | None
    cached: bool = False


@dataclass
class _Run(Generic[ItemT]):
    step: CheckedStep[ItemT]
    engine: Engine
    policy: StepPolicy
    items: Sequence[ItemT]
    history: dict[str, list[_Attempt]] = field(default_factory=dict)
    accepted: dict[str, Accepted] = field(default_factory=dict)
    ended: dict[str, Outcome] = field(default_factory=dict)  # items whose call failed in the engine

    def execute(self) -> StepResult:
        self.engine.add_items(self.step.name, len(self.items))
        try:
            self._rounds()
        except Stopped as stop:  # the failed calls of the round it stopped in are in the engine's rejects
            stop.rejects = [*stop.rejects, *self._records(self._given_up(), stopped=stop.message)]
            raise
        result = self._result()
        if result.rejects or result.failed:
            announce(self.engine.summary(self.step.name, self.step.rejects_in), self.engine.settings.progress)
        return result

    def _rounds(self) -> None:
        position = self._positions()
        pending = list(self.items)
        for sample in range(self.policy.retries + 1):
            if not pending:
                break
            passed, again = self._generate(pending, sample)
            if self.step.verify is not None and passed:
                passed, doubted = self._verify(self.step.verify, passed)
                again += doubted
            for item, attempt in passed:
                self.accepted[self.step.item_id(item)] = Accepted(attempt.value, sample, attempt.text, attempt.cached)
            self.engine.decide(self.step.name, ok=len(passed))
            pending = sorted(again, key=lambda item: position[self.step.item_id(item)])

    def _unfinished(self) -> list[str]:
        """Ids of the items that failed a check and were neither accepted nor ended in the engine."""
        ids = [self.step.item_id(item) for item in self.items]
        return [i for i in ids if i in self.history and i not in self.accepted and i not in self.ended]

    def _given_up(self) -> list[str]:
        """At a stop: every item that failed a check and was neither accepted nor ended in the engine, each
        counted and written once. An item whose call of the round it stopped in failed is the engine's line
        (and count); one the engine gave up on keeps its checked attempts in the step's line instead of the
        engine's (already counted); any other is counted rejected here."""
        names = {self.step.name} | ({self.step.verify.name} if self.step.verify is not None else set())
        unfinished = self._unfinished()
        taken = self.engine.withdraw_given_up(names, set(unfinished))
        failed = {r.get("item_id") for r in self.engine.rejects if r.get("step") in names} - taken
        given_up = [i for i in unfinished if i not in failed]
        self.engine.decide(self.step.name, rejected=[self._kind(i) for i in given_up if i not in taken])
        return given_up

    def _kind(self, item_id: str) -> str:
        """What a reject counts under: the code of its last attempt's first problem."""
        problems = self.history[item_id][-1].problems
        return problems[0].code if problems else "given_up"

    def _records(self, item_ids: list[str], *, stopped: str | None = None) -> list[dict[str, Any]]:
        """These items' rejects as the product writes them."""
        by_id = {self.step.item_id(item): item for item in self.items}
        records = []
        for item_id in item_ids:
            reject = self._reject(item_id, stopped=stopped)
            record = self.step.record
            records.append(record(by_id[item_id], reject) if record else {"step": self.step.name, **reject})
        return records

    def _positions(self) -> dict[str, int]:
        position: dict[str, int] = {}
        for index, item in enumerate(self.items):
            item_id = self.step.item_id(item)
            if item_id in position:
                raise ValueError(f"step {self.step.name}: item id {item_id!r} appears twice")
            position[item_id] = index
        return position

    def _generate(self, pending: list[ItemT], sample: int) -> tuple[list[tuple[ItemT, _Attempt]], list[ItemT]]:
        """One round: (items whose value passed the checks, items to write again)."""
        step = self.step
        outcomes = self.engine.run_step(
            step.name,
            [step.task(item, sample) for item in pending],
            max_reject_rate=self.policy.max_reject_rate,
            reject_option=self.policy.reject_option,
            items_of=step.name,
        )
        passed, again = [], []
        for item, outcome in zip(pending, outcomes):
            if not outcome.ok:
                self._end(item, outcome)
                continue
            reply = (outcome.value, outcome.logprobs) if step.logprobs else outcome.value
            value = step.prepare(item, reply) if step.prepare is not None else reply
            attempt = _Attempt(sample, value, list(step.check(item, value)), outcome.text, outcome.cached)
            self.history.setdefault(step.item_id(item), []).append(attempt)
            if attempt.problems:
                again.append(item)
            else:
                passed.append((item, attempt))
        return passed, again

    def _verify(
        self, verify: Verify[ItemT], passed: list[tuple[ItemT, _Attempt]]
    ) -> tuple[list[tuple[ItemT, _Attempt]], list[ItemT]]:
        """The verify calls: (items confirmed, items to write again)."""
        verdicts = self.engine.run_step(
            verify.name,
            [verify.task(item, attempt.value) for item, attempt in passed],
            max_reject_rate=self.policy.max_reject_rate,
            reject_option=self.policy.reject_option,
            items_of=self.step.name,
        )
        confirmed, doubted = [], []
        for (item, attempt), verdict in zip(passed, verdicts):
            if not verdict.ok:
                self._end(item, verdict)
                continue
            problem = verify.judge(item, verdict.value)
            if problem is None:
                confirmed.append((item, attempt))
            else:
                attempt.problems.append(problem)  # the attempt failed after all: it shows in the reject
                doubted.append(item)
        return confirmed, doubted

    def _end(self, item: ItemT, outcome: Outcome) -> None:
        """The item's call failed: the engine has counted it rejected (or, plan-only, merely not cached)."""
        self.ended[self.step.item_id(item)] = outcome

    def _result(self) -> StepResult:
        ids = [self.step.item_id(item) for item in self.items]
        exhausted = self._unfinished()  # after the last round: every attempt failed its checks
        try:
            self.engine.decide(
                self.step.name,
                rejected=[self._kind(i) for i in exhausted],
                max_reject_rate=self.policy.max_reject_rate,
                reject_option=self.policy.reject_option,
            )
        except Stopped as stop:
            stop.rejects = self._records(exhausted)
            raise
        return StepResult(
            accepted={i: self.accepted[i] for i in ids if i in self.accepted},
            rejects=[self._reject(i) for i in exhausted],
            failed=[i for i in ids if i in self.ended],
            failures={i: self.ended[i] for i in ids if i in self.ended},
        )

    def _reject(self, item_id: str, *, stopped: str | None = None) -> dict[str, Any]:
        failed = self.ended.get(item_id)
        if failed is not None and (failed.kind != "given_up" or item_id not in self.history):
            return self._failed_call(item_id)  # (an item given up at a stop keeps its last checked reply)
        attempts = self.history[item_id]
        last = attempts[-1]
        tried = f"{len(attempts)} attempt{'s' if len(attempts) > 1 else ''}"
        # an attempt without problems is one a stop caught between its checks and its verify call
        why = last.problems[0] if last.problems else "passed its checks; the run stopped before it was verified"
        then = "; the run stopped before the next" if stopped and last.problems else ""
        return {
            "item_id": item_id,
            "reason": f"{why} (after {tried}{then})",
            "raw_text": last.text,
            "attempts": [
                {"sample": a.sample, **self._describe(a.value), "problems": [str(p) for p in a.problems]}
                for a in attempts
            ],
        }

    def _failed_call(self, item_id: str) -> dict[str, Any]:
        """An item whose last call failed in the engine, as a reject: the engine's reason and raw reply."""
        outcome = self.ended[item_id]
        reason = f"{outcome.kind}: {outcome.reason}"
        attempts = [
            {"sample": a.sample, **self._describe(a.value), "problems": [str(p) for p in a.problems]}
            for a in self.history.get(item_id, [])
        ]
        attempts.append({"sample": outcome.task.sample, "problems": [reason]})
        return {"item_id": item_id, "reason": reason, "raw_text": outcome.text, "attempts": attempts}

    def _describe(self, value: Any) -> dict[str, Any]:
        if self.step.describe is not None:
            return self.step.describe(value)
        return {"value": _plain(value)}


def _plain(value: Any) -> Any:
    """A value as it can go into rejects.jsonl."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    if value is None or isinstance(value, str | int | float | bool | list | dict):
        return value
    return repr(value)
