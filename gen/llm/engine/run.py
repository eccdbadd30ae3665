"""What one `Engine.run_step` (or plan) works with: the tasks prepared into request bodies and cache keys, the
replies, the run's counters and outcomes, and the two signals that end an item or a step early."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen.errors import GenError
from gen.llm.accounts.counts import StepStats, is_reject, past_limit
from gen.llm.accounts.lanes import Tally
from gen.llm.accounts.plan import PlanBuilder, format_messages
from gen.llm.accounts.progress import StepCounters
from gen.llm.cache.store import Cache, CachedReply, cache_key
from gen.llm.calls.endpoint import Endpoint, find_endpoint
from gen.llm.calls.request import build_request
from gen.llm.engine.workers import WorkerPool
from gen.llm.structured import CANDIDATES, response_format_for
from gen.llm.task import Outcome, Task, normalize_messages


class NotCached(Exception):
    """Plan-only: this call would have to be made."""


class TooManyRejects(Exception):
    """The step went past its reject limit (turned into a Stopped once rejects are recorded)."""


@dataclass(frozen=True)
class Reply:
    text: str
    finish_reason: str | None
    input_tokens: int
    output_tokens: int
    cached: bool
    logprobs: Any = None

    def truncated(self, task: Task) -> bool:
        """Cut at the endpoint's max_tokens; a task with its own cap asked for no more, so its reply is complete."""
        return self.finish_reason == "length" and task.max_tokens is None


@dataclass(frozen=True)
class Prepared:
    """A task checked and turned into its request body and cache key."""

    index: int
    task: Task
    endpoint: Endpoint
    messages: list[dict]
    response_format: dict | None
    body: dict
    key: str

    def truncation(self) -> str:
        """What cut a reply short, for its reason (a task with its own cap is never truncated)."""
        cap, name = self.endpoint.config.output_cap
        return f"finish_reason=length, {name or 'max_tokens'}={cap}"

    def correction(self, text: str, message: str) -> tuple[dict, str]:
        """The correction round's request body and cache key: the reply, and the message saying what is wrong."""
        messages = [*self.messages, {"role": "assistant", "content": text}, {"role": "user", "content": message}]
        body = build_request(self.endpoint.config, messages, self.response_format, self.task.sample, self.task)
        return body, cache_key(self.endpoint.config.base_url, body, self.task.sample)

    def offline_error(self, step: str, cache_path: Path) -> GenError:
        return GenError(
            "offline run: this call is not in the LLM cache",
            record=f"step {step}, item {self.task.item_id}",
            field=f"endpoint {self.endpoint.name}",
            expected=f"a cache filled by an earlier run with the same prompts and parameters ({cache_path})",
        )


Misses = dict[str, tuple[Prepared, dict]]  # a batch round's calls not answered yet: cache key -> (call, body)


@dataclass
class StepRun:
    """One ``run_step`` (or ``plan``) call in progress."""

    step: str
    prepared: list[Prepared]
    stats: StepStats
    prefetched: dict[str, CachedReply]
    plan: PlanBuilder | None = None
    max_reject_rate: float | None = None  # over the step's items so far: `before` and this lane's `tally`
    tally: Tally = field(default_factory=Tally)  # the items' fates, in this lane (gen.llm.accounts.lanes)
    before: Tally = field(default_factory=Tally)  # the same step's items in the lanes merged before
    caller_decides: bool = False  # the tasks are calls for items a checked step decides (gen.llm.step)
    mark: int | None = None  # the cache's writes when the step read its keys (Cache.recent)
    outcomes: list[Outcome | None] = field(init=False)
    counters: StepCounters = field(init=False)
    pool: WorkerPool[Prepared] | None = None
    # a batch round's look-ahead: the calls of batched endpoints not answered yet (cache key -> what to send)
    misses: Misses | None = None

    def __post_init__(self) -> None:
        self.outcomes = [None] * len(self.prepared)
        self.counters = StepCounters(self.step, len(self.prepared), None if self.plan is not None else self.fates)

    def fates(self) -> Tally:
        """The step's items so far: the lanes merged before, and this one."""
        return self.before.plus(self.tally)

    def add_outcome(self, outcome: Outcome) -> bool:
        """Count a call's outcome, and its item's fate where the outcome decides it: a failed call ends its item
        (a checked step gives up on an item whose call failed too); a reply that parsed is an item in the
        output only when each task is an item, otherwise the checked step decides. True when the step's items
        pass the reject limit."""
        self.stats.add_outcome(outcome)
        if is_reject(outcome):
            self.tally.reject(outcome.kind or "unknown")
            return past_limit(self.max_reject_rate, self.fates())
        if outcome.ok and not self.caller_decides:
            self.tally.ok += 1
        return False

    def lookup(self, cache: Cache, key: str, *, first: bool) -> CachedReply | None:
        """The cached reply for `key`. The keys of the items' first requests were read when the step started: one
        that was missing then can only have been put since (by this process), so the file is not read again
        for it; other keys (correction rounds) are read now."""
        if key in self.prefetched:
            return self.prefetched[key]
        if first and self.mark is not None and not cache.recent.since(self.mark, key):
            return None
        return cache.get(key)

    def give_up(self, reason: str) -> None:
        """Every item not finished yet is given up, with the reason."""
        for p in self.prepared:
            if self.outcomes[p.index] is None:
                outcome = Outcome.failed(p.task, "given_up", reason, None)
                self.outcomes[p.index] = outcome
                self.add_outcome(outcome)


def prepare(tasks: Sequence[Task], endpoints: dict[str, Endpoint]) -> list[Prepared]:
    """Each task checked and turned into its request body and cache key, in the caller's thread."""
    prepared = []
    for index, task in enumerate(tasks):
        if not isinstance(task, Task):
            raise TypeError(f"run_step expects gen.llm.Task objects, got {type(task).__name__}")
        if not isinstance(task.sample, int) or task.sample < 0:
            raise GenError("sample must be a non-negative integer", record=f"item {task.item_id}", field="sample")
        ep = find_endpoint(endpoints, task.endpoint, task.item_id)
        messages = normalize_messages(task.messages, str(task.item_id))
        response_format = response_format_for(task.parser, ep.mode or CANDIDATES[0])
        body = build_request(ep.config, messages, response_format, task.sample, task)
        key = cache_key(ep.config.base_url, body, task.sample)
        prepared.append(Prepared(index, task, ep, messages, response_format, body, key))
    return prepared


def preview(prepared: Sequence[Prepared], hits: dict[str, CachedReply]) -> str:
    """Prompts as the endpoint will receive them, each under a header with its item, endpoint, parameters and
    cache status."""
    parts = []
    for p in prepared:
        params = {k: v for k, v in p.body.items() if k not in ("messages", "response_format")}
        status = "cached" if p.key in hits else "not cached"
        header = (
            f"═══ item {p.task.item_id} · sample {p.task.sample} · endpoint {p.endpoint.name} · {status} · {params}"
        )
        parts.append(format_messages(p.messages, header=header, response_format=p.response_format))
    return "\n".join(parts)
