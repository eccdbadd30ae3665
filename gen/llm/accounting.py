"""What the engine counts, and the reject-rate rule.

:class:`StepStats` — per step name, over every ``run_step`` call with that name: items, outcomes, calls
made / cached / failed, requests, tokens, estimated cost, errors by kind. :class:`Accounts` holds them with
the rejected items and the plans, and turns them into the report that goes into run.json.

A step may reject at most ``floor(max_reject_rate × items)`` of its items, items counted over every call of
the step so that a small regeneration round is judged together with the round it repeats;
:func:`too_many_rejects` is the error that stops it (also used by :mod:`gen.llm.step`).
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gen.errors import Stopped, redact_urls
from gen.llm.cache import CachedReply
from gen.llm.config import Price
from gen.llm.lanes import Lane, covered_seconds
from gen.llm.plan import StepPlan
from gen.llm.task import Outcome

__all__ = ["Accounts", "StepStats", "error_summary", "is_reject", "reject_limit", "too_many_rejects"]

SUMMED = (
    "items",
    "ok",
    "rejected",
    "corrected",
    "calls_made",
    "calls_cached",
    "calls_failed",
    "calls_batch",
    "requests",
    "retries",
    "corrections",
    "input_tokens",
    "output_tokens",
    "cached_input_tokens",
    "cached_output_tokens",
)


def is_reject(outcome: Outcome) -> bool:
    """A failed item; items a plan-only run merely found uncached are not failures."""
    return not outcome.ok and outcome.kind != "not_cached"


@dataclass
class StepStats:
    items: int = 0
    ok: int = 0
    rejected: int = 0
    corrected: int = 0
    calls_made: int = 0
    calls_cached: int = 0
    calls_failed: int = 0
    calls_batch: int = 0  # of calls_made, those answered through the Batch API
    requests: int = 0
    corrections: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cached_output_tokens: int = 0
    usage_estimated: int = 0
    cost_usd: float = 0.0
    cost_complete: bool = True  # False once a call was made on an endpoint without a price
    spans: list[tuple[float, float]] = field(default_factory=list)  # (start, end) of each run_step
    endpoints: set[str] = field(default_factory=set)
    errors: Counter[str] = field(default_factory=Counter)

    def add_outcome(self, outcome: Outcome) -> None:
        if outcome.ok:
            self.ok += 1
            self.corrected += outcome.corrected
        elif is_reject(outcome):
            self.rejected += 1

    def add_call(self, input_tokens: int, output_tokens: int, price: Price | None, *, estimated: bool) -> None:
        """A request the endpoint answered (whether or not its reply is usable)."""
        self.calls_made += 1
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        self.usage_estimated += estimated
        if price is not None:
            self.cost_usd += price.cost(input_tokens, output_tokens)
        else:
            self.cost_complete = False

    def add_cached(self, reply: CachedReply) -> None:
        self.calls_cached += 1
        self.cached_input_tokens += reply.input_tokens
        self.cached_output_tokens += reply.output_tokens

    @property
    def seconds(self) -> float:
        """The time at least one run_step of the step was running (two batches in flight overlap)."""
        return covered_seconds(self.spans)

    def to_dict(self) -> dict[str, Any]:
        return {
            "items": self.items,
            "ok": self.ok,
            "rejected": self.rejected,
            "corrected": self.corrected,
            "calls_made": self.calls_made,
            "calls_cached": self.calls_cached,
            "calls_failed": self.calls_failed,
            "calls_batch": self.calls_batch,
            "requests": self.requests,
            "retries": self.requests - self.calls_made - self.calls_failed,
            "corrections": self.corrections,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "cached_output_tokens": self.cached_output_tokens,
            "usage_estimated_calls": self.usage_estimated,
            "cost_usd": round(self.cost_usd, 6) if self.cost_complete else None,
            "seconds": round(self.seconds, 3),
            "endpoints": sorted(self.endpoints),
            "errors": dict(sorted(self.errors.items())),
        }


class Accounts:
    """Stats per step, the rejected items and the plans, over the engine's life."""

    def __init__(self) -> None:
        self.steps: dict[str, StepStats] = {}
        self.rejects: list[dict[str, Any]] = []
        self.plans: dict[str, StepPlan] = {}
        self._lock = threading.Lock()

    def step(self, name: str, items: int = 0) -> StepStats:
        """The step's stats, `items` more items counted (the steps of two batches in flight count together)."""
        with self._lock:
            stats = self.steps.setdefault(name, StepStats())
            stats.items += items
        return stats

    def ran(self, stats: StepStats, start: float, end: float, endpoints: set[str]) -> None:
        with self._lock:
            stats.spans.append((start, end))
            stats.endpoints |= endpoints

    def add_rejects(self, step: str, outcomes: Iterable[Outcome | None], lane: Lane | None = None) -> None:
        """The rejected items among `outcomes`, to the engine's rejects or to the `lane`'s (gen.llm.lanes)."""
        new = [reject_record(step, outcome) for outcome in outcomes if outcome is not None and is_reject(outcome)]
        if lane is not None:
            lane.rejects.extend(new)
        else:
            self.add_records(new)

    def add_records(self, rejects: list[dict[str, Any]]) -> None:
        with self._lock:
            self.rejects.extend(rejects)

    def add_plan(self, plan: StepPlan) -> None:
        existing = self.plans.get(plan.step)
        self.plans[plan.step] = existing.merge(plan) if existing else plan

    def report(self, *, mode: str, endpoints: Mapping[str, Any], cache: Mapping[str, Any]) -> dict[str, Any]:
        steps = {name: stats.to_dict() for name, stats in self.steps.items()}
        totals: dict[str, Any] = {key: sum(step[key] for step in steps.values()) for key in SUMMED}
        costs = [step["cost_usd"] for step in steps.values()]
        totals["cost_usd"] = round(sum(costs), 6) if costs and None not in costs else (0.0 if not costs else None)
        errors: Counter[str] = Counter()
        for stats in self.steps.values():
            errors.update(stats.errors)
        report = {
            "mode": mode,
            "steps": steps,
            "totals": totals,
            "errors": dict(sorted(errors.items())),
            "rejects": len(self.rejects),
            "endpoints": dict(endpoints),
            "cache": dict(cache),
        }
        if self.plans:
            report["plan"] = {name: plan.to_dict() for name, plan in self.plans.items()}
        return report


def reject_record(step: str, outcome: Outcome) -> dict[str, Any]:
    """One line of the run's rejects for an item the engine gave up on."""
    task = outcome.task
    return {
        "step": step,
        "item_id": task.item_id,
        "sample": task.sample,
        "endpoint": task.endpoint,
        "kind": outcome.kind,
        "reason": redact_urls(outcome.reason) if outcome.reason else outcome.reason,  # may quote a signed URL
        "raw_text": outcome.text,
    }


def reject_limit(rate: float | None, items: int) -> int | None:
    """The most rejects ``rate`` allows among ``items`` (None: no limit)."""
    if rate is None:
        return None
    return math.floor(rate * items + 1e-9)  # the epsilon keeps 0.2 × 25 at 5, not 4


def too_many_rejects(
    step: str, rejected: int, items: int, rate: float | None, kinds: Counter[str], option: str | None = None
) -> Stopped:
    """The stop for a step past its reject limit. ``option``: where the user sets the rate (default: the
    option's bare name)."""
    by_kind = ", ".join(f"{kind} ×{n}" for kind, n in kinds.most_common(4))
    return Stopped(
        f"stopped: {rejected} of {items} items rejected, more than max_reject_rate {rate:.0%} allows; by kind: "
        f"{by_kind}; see the run's rejects for reasons and raw replies",
        record=f"step {step}",
        field="max_reject_rate",
        expected="fewer failures (check the prompt, the parser and the endpoint), or a higher "
        + (option or "max_reject_rate"),
    )


def error_summary(step: str, errors: Counter[str]) -> str:
    """The line shown after a step's progress when any request failed ("" when none did)."""
    if not errors:
        return ""
    listed = ", ".join(f"{kind} ×{n}" for kind, n in errors.most_common())
    return f"[llm] {step}: errors by type: {listed}"
