"""Planning (``gen plan``) and prompt previews (``gen preview``): no network, no API key.

A :class:`StepPlan` says, for one step: items, calls needed, calls already cached, projected input tokens
(about 4 characters per token over the rendered messages of the calls needed), projected output tokens
and projected cost (when every endpoint involved has a ``price``). Output tokens per needed call are the
observed average of this step's cached replies on the same endpoint when there are any, else the endpoint's
``max_tokens`` (an upper bound), else an assumed 256; ``output_basis`` says which. Correction rounds that
will be needed cannot be known in advance: the projection is for first-round calls (plus corrections of
cached replies that already failed to parse).
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from gen.llm.config import DEFAULT_OUTPUT_TOKENS, EndpointConfig

__all__ = ["PlanBuilder", "StepPlan", "format_messages"]

LINE_OVERHEAD_BYTES = 300  # a batch request line's JSON besides the messages (custom_id, url, parameters)


@dataclass
class EndpointPlan:
    calls_needed: int = 0
    calls_cached: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    output_basis: str = ""
    cost_usd: float | None = None
    batches: int = 0  # Batch API batches the calls needed would fill
    batch_cost_usd: float | None = None  # their cost through the Batch API

    def to_dict(self) -> dict:
        return {
            "calls_needed": self.calls_needed,
            "calls_cached": self.calls_cached,
            "projected_input_tokens": self.input_tokens,
            "projected_output_tokens": self.output_tokens,
            "output_basis": self.output_basis,
            "projected_cost_usd": None if self.cost_usd is None else round(self.cost_usd, 6),
            "batches": self.batches,
            "projected_batch_cost_usd": None if self.batch_cost_usd is None else round(self.batch_cost_usd, 6),
        }


@dataclass
class StepPlan:
    step: str
    items: int = 0
    endpoints: dict[str, EndpointPlan] = field(default_factory=dict)

    @property
    def calls_needed(self) -> int:
        return sum(e.calls_needed for e in self.endpoints.values())

    @property
    def calls_cached(self) -> int:
        return sum(e.calls_cached for e in self.endpoints.values())

    @property
    def projected_input_tokens(self) -> int:
        return sum(e.input_tokens for e in self.endpoints.values())

    @property
    def projected_output_tokens(self) -> int:
        return sum(e.output_tokens for e in self.endpoints.values())

    @property
    def projected_cost_usd(self) -> float | None:
        return _total([e.cost_usd for e in self.endpoints.values() if e.calls_needed])

    @property
    def projected_batch_cost_usd(self) -> float | None:
        return _total([e.batch_cost_usd for e in self.endpoints.values() if e.calls_needed])

    @property
    def batches(self) -> int:
        return sum(e.batches for e in self.endpoints.values())

    def to_dict(self) -> dict:
        return {
            "step": self.step,
            "items": self.items,
            "calls_needed": self.calls_needed,
            "calls_cached": self.calls_cached,
            "projected_input_tokens": self.projected_input_tokens,
            "projected_output_tokens": self.projected_output_tokens,
            "projected_cost_usd": self.projected_cost_usd,
            "batches": self.batches,
            "projected_batch_cost_usd": self.projected_batch_cost_usd,
            "endpoints": {name: plan.to_dict() for name, plan in sorted(self.endpoints.items())},
        }

    def merge(self, other: StepPlan) -> StepPlan:
        merged = StepPlan(self.step, self.items + other.items)
        for name in sorted(set(self.endpoints) | set(other.endpoints)):
            a, b = self.endpoints.get(name, EndpointPlan()), other.endpoints.get(name, EndpointPlan())
            merged.endpoints[name] = EndpointPlan(
                a.calls_needed + b.calls_needed,
                a.calls_cached + b.calls_cached,
                a.input_tokens + b.input_tokens,
                a.output_tokens + b.output_tokens,
                _joined_basis(a.output_basis, b.output_basis),
                _sum_costs(a, b, "cost_usd"),
                a.batches + b.batches,
                _sum_costs(a, b, "batch_cost_usd"),
            )
        return merged


def _total(costs: list[float | None]) -> float | None:
    """The sum of the costs, or None when any is unknown."""
    known = [cost for cost in costs if cost is not None]
    return None if len(known) < len(costs) else round(sum(known), 6)


def _sum_costs(a: EndpointPlan, b: EndpointPlan, name: str) -> float | None:
    first, second = getattr(a, name), getattr(b, name)
    if (a.calls_needed and first is None) or (b.calls_needed and second is None):
        return None
    return (first or 0.0) + (second or 0.0)


def _joined_basis(first: str, second: str) -> str:
    return " + ".join(basis for basis in dict.fromkeys([first, second]) if basis)


class PlanBuilder:
    """Collects cached / needed calls while the engine walks a step without calling anything."""

    def __init__(self, step: str) -> None:
        self.step = step
        self.items = 0
        self._needed: dict[str, list[int]] = defaultdict(list)  # endpoint -> input-token estimates
        self._cached_out: dict[str, list[int]] = defaultdict(list)  # endpoint -> output tokens of hits

    def needed(self, endpoint: str, input_tokens: int) -> None:
        self._needed[endpoint].append(input_tokens)

    def cached(self, endpoint: str, output_tokens: int) -> None:
        self._cached_out[endpoint].append(output_tokens)

    def finish(self, endpoints: Mapping[str, EndpointConfig], items: int | None = None) -> StepPlan:
        plan = StepPlan(self.step, self.items if items is None else items)
        for name in sorted(set(self._needed) | set(self._cached_out)):
            config = endpoints[name]
            needed, observed = self._needed.get(name, []), self._cached_out.get(name, [])
            if observed:
                per_call = round(sum(observed) / len(observed))
                basis = f"observed average of {len(observed)} cached replies"
            elif config.output_cap[0] is not None:
                per_call, basis = config.output_cap[0], f"{config.output_cap[1]} (upper bound)"
            else:
                per_call, basis = DEFAULT_OUTPUT_TOKENS, f"assumed {DEFAULT_OUTPUT_TOKENS} per call"
            entry = EndpointPlan(
                len(needed), len(observed), sum(needed), per_call * len(needed), basis if needed else ""
            )
            if config.price is not None:
                entry.cost_usd = config.price.cost(entry.input_tokens, entry.output_tokens)
            elif not needed:
                entry.cost_usd = 0.0
            batch_price = config.batch_price
            entry.batch_cost_usd = (
                batch_price.cost(entry.input_tokens, entry.output_tokens) if batch_price else entry.cost_usd
            )
            # a request line is about 4 bytes per input token and its JSON around it
            line_bytes = 4 * entry.input_tokens + LINE_OVERHEAD_BYTES * len(needed)
            entry.batches = max(-(-len(needed) // config.batch_max_requests), -(-line_bytes // config.batch_max_bytes))
            plan.endpoints[name] = entry
        return plan


def format_messages(
    messages: Sequence[Mapping[str, Any]],
    *,
    header: str | None = None,
    response_format: Mapping[str, Any] | None = None,
) -> str:
    """Human-readable rendering of chat messages (for ``gen preview``)."""
    lines = [header] if header else []
    for message in messages:
        content = message.get("content")
        if not isinstance(content, str):
            content = json.dumps(content, indent=2, ensure_ascii=False)
        lines.append(f"──── {message.get('role', '?')} ────")
        lines.append(content)
    if response_format:
        kind = response_format.get("type")
        name = response_format.get("json_schema", {}).get("name") if kind == "json_schema" else None
        lines.append(f"──── response_format: {kind}{f' ({name})' if name else ''} ────")
    return "\n".join(lines) + "\n"
