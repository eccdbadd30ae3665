"""What the engine counts, and the reject-rate rule.

Two kinds of count, never mixed:

items (:class:`gen.llm.accounts.lanes.Tally`, per step name)
    An item is one thing a step wants in the output (one question, one label). It ends ``ok`` (in the output)
    or ``rejected`` (not, whatever the reason: a failed request, a reply that never parsed, a value that
    failed its checks after every regeneration, a refusal, given up at a stop). Each item is counted once,
    where its fate is decided: by the engine for a plain ``run_step`` (each task is an item), by
    :mod:`gen.llm.step` for a checked step (the engine reports only the calls that failed, which end their
    item there and then). run.json's ``items``/``ok``/``rejected``, the live line, the final line, the card
    and gen view all read these tallies; rejects.jsonl holds one line per rejected item.
calls (:class:`StepStats`, per step name)
    Every call a step asked of the engine (each round's, each verify call): ``calls``, ``calls_ok``,
    ``calls_rejected``, then ``calls_made`` / ``calls_cached`` / ``calls_failed``, requests, tokens,
    estimated cost, errors by kind. :class:`Accounts` holds them with the engine's rejects and the plans,
    and turns them and the tallies into the report that goes into run.json.

A step may reject at most ``floor(max_reject_rate × items)`` of its items, items counted over every call of
the step name (:func:`past_limit`, the one place the rule is applied); :func:`too_many_rejects` is the error
that stops it.
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gen.errors import Stopped, redact_urls
from gen.llm.accounts.lanes import Lane, Tally, covered_seconds
from gen.llm.accounts.plan import StepPlan
from gen.llm.cache.store import CachedReply
from gen.llm.config import Price
from gen.llm.task import Outcome

__all__ = [
    "Accounts",
    "StepStats",
    "error_summary",
    "is_reject",
    "items_by_product",
    "past_limit",
    "reject_limit",
    "too_many_rejects",
]

SUMMED = (
    "items",
    "ok",
    "rejected",
    "calls",
    "calls_ok",
    "calls_rejected",
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
    """A step's calls (not its items: see the module docstring)."""

    calls: int = 0  # every call asked of the engine, each round's and each correction's first request
    calls_ok: int = 0  # calls whose reply arrived and parsed
    calls_rejected: int = 0  # calls that failed (request, parse, truncation, refusal, given up)
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
            self.calls_ok += 1
            self.corrected += outcome.corrected
        elif is_reject(outcome):
            self.calls_rejected += 1

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
            "calls": self.calls,
            "calls_ok": self.calls_ok,
            "calls_rejected": self.calls_rejected,
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

    def step(self, name: str, calls: int = 0) -> StepStats:
        """The step's stats, `calls` more calls counted (the steps of two batches in flight count together)."""
        with self._lock:
            stats = self.steps.setdefault(name, StepStats())
            stats.calls += calls
        return stats

    def ran(self, stats: StepStats, start: float, end: float, endpoints: set[str]) -> None:
        with self._lock:
            stats.spans.append((start, end))
            stats.endpoints |= endpoints

    def add_rejects(self, step: str, outcomes: Iterable[Outcome | None], lane: Lane | None = None) -> None:
        """The rejected items among `outcomes`, to the engine's rejects or to the `lane`'s (gen.llm.accounts.lanes)."""
        new = [reject_record(step, outcome) for outcome in outcomes if outcome is not None and is_reject(outcome)]
        if lane is not None:
            lane.rejects.extend(new)
        else:
            self.add_records(new)

    def withdraw_given_up(self, steps: set[str], item_ids: set[str], lane: Lane | None = None) -> set[str]:
        """Take back the `given_up` lines of these items of these steps (from the `lane`'s rejects, or the
        engine's), for a caller that writes fuller ones; the ids taken back. Their count stays: the item is
        still rejected, and still once."""
        with self._lock:
            rejects = lane.rejects if lane is not None else self.rejects
            taken = [r for r in rejects if r["kind"] == "given_up" and r["step"] in steps and r["item_id"] in item_ids]
            rejects[:] = [r for r in rejects if not any(r is t for t in taken)]
        return {r["item_id"] for r in taken}

    def add_records(self, rejects: list[dict[str, Any]]) -> None:
        with self._lock:
            self.rejects.extend(rejects)

    def add_plan(self, plan: StepPlan) -> None:
        existing = self.plans.get(plan.step)
        self.plans[plan.step] = existing.merge(plan) if existing else plan

    def report(
        self, *, mode: str, endpoints: Mapping[str, Any], cache: Mapping[str, Any], fates: Mapping[str, Tally]
    ) -> dict[str, Any]:
        """run.json's `llm`: per step its items' fates (`fates`: the merged lanes' tallies, which match the
        rejects kept) then its calls; totals; errors by type; endpoints; cache; plans."""
        names = [*self.steps, *(name for name in fates if name not in self.steps)]
        steps = {name: {**_fates(fates.get(name)), **self.steps.get(name, StepStats()).to_dict()} for name in names}
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
            "products": items_by_product(steps),
            "endpoints": dict(endpoints),
            "cache": dict(cache),
        }
        if self.plans:
            report["plan"] = {name: plan.to_dict() for name, plan in self.plans.items()}
        return report


def _fates(tally: Tally | None) -> dict[str, Any]:
    """A step's items as run.json shows them (a step whose calls serve another step's items, such as a verify
    step, has none of its own)."""
    tally = tally or Tally()
    return {"items": tally.items, "ok": tally.ok, "rejected": tally.rejected}


def items_by_product(steps: Mapping[str, Any]) -> dict[str, dict[str, int]]:
    """run.json's `llm.steps` summed per product (a step is named after its product, or "product/part"):
    product -> {items, ok, rejected}, for the products that had items."""
    products: dict[str, dict[str, int]] = {}
    for name, stats in steps.items():
        if not isinstance(stats, Mapping) or not stats.get("items"):
            continue
        total = products.setdefault(name.split("/")[0], {"items": 0, "ok": 0, "rejected": 0})
        for key in total:
            total[key] += int(stats.get(key) or 0)
    return products


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


def past_limit(rate: float | None, tally: Tally) -> bool:
    """Has the step rejected more of its items than ``rate`` allows? The one test of max_reject_rate, for the
    engine's items and a checked step's alike."""
    limit = reject_limit(rate, tally.items)
    return limit is not None and tally.rejected > limit


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
