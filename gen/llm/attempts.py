"""The retry loop of one call: attempts through the endpoint's flow control until a completion comes back,
within the call's budget (attempts and seconds) and the endpoint's breaker (gen/llm/giveup.py), with backoff
and pauses as gen/llm/request.py and gen/llm/limiter.py decide."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol

from gen.errors import Stopped
from gen.llm.accounting import StepStats
from gen.llm.endpoint import Endpoint, KeyScrubber
from gen.llm.giveup import Budget
from gen.llm.plan import DEFAULT_OUTPUT_TOKENS
from gen.llm.progress import StepCounters
from gen.llm.request import Answer, Failure, RetryPolicy, body_messages, send_once
from gen.llm.senders import Senders
from gen.llm.task import estimate_input_tokens
from gen.llm.workers import WorkerPool

log = logging.getLogger("gen.llm")


class CallFailed(Exception):
    """A call that brought no usable reply; ``kind`` and ``reason`` go into the item's Outcome."""

    def __init__(self, kind: str, reason: str, said: str = "", raw: str | None = None) -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason
        self.said = said  # a refusal: what the server said, "HTTP 500: ..."
        self.raw = raw  # what came back instead of a reply (a batch file's line), for the rejects


class GiveUp(Exception):
    """An endpoint was given up on: the step stops with ``stop`` once its unfinished items are recorded."""

    def __init__(self, endpoint: Endpoint, stop: Stopped) -> None:
        super().__init__(stop.message)
        self.endpoint, self.stop = endpoint, stop


class Run(Protocol):
    """What a call's attempts count into: the step's stats and progress counters, and the worker pool that
    lends a backing-off worker's place to another."""

    stats: StepStats
    counters: StepCounters
    pool: WorkerPool[Any] | None


@dataclass
class Attempts:
    retry: RetryPolicy
    keys: KeyScrubber
    senders: Senders | None = None  # request processes (gen.llm.senders), or none: requests go from this loop

    async def answer(self, run: Run, ep: Endpoint, body: dict, *, probing: bool = False) -> tuple[Answer, int]:
        """Attempts until a completion comes back; else :class:`CallFailed` (the call is given up or refused)
        or :class:`GiveUp` (the endpoint is)."""
        stats, config = run.stats, ep.config
        cap = body.get("max_tokens") or body.get("max_completion_tokens")
        estimate = estimate_input_tokens(body_messages(body)) + (cap if isinstance(cap, int) else DEFAULT_OUTPUT_TOKENS)
        budget = Budget(config.max_retries + 1, config.max_wait_s)
        previous: Failure | None = None
        delay = 0.0
        while True:
            if delay:
                await self.wait(run, delay)
            budget.used += 1
            async with ep.flow.admit(estimate):
                sent = time.monotonic()  # on its way now (after any wait for a slot or the gate)
                stats.requests += 1
                result = await self.send_once(ep, body, config.timeout_s)
                back = time.monotonic()  # before the slot is free for the next request
            if isinstance(result, Answer):
                ep.replied()
                return result, estimate
            run.counters.note_request(0)
            stats.errors[result.kind] += 1
            ep.flow.refund(estimate)
            judgement = ep.judge(result, (sent, back), previous, probing=probing)
            if judgement.stop is not None:
                raise GiveUp(ep, judgement.stop)
            try:
                delay = self.next_delay(ep, result, budget, judgement.refused)
            except CallFailed:
                stats.calls_failed += 1
                raise
            previous = result

    async def send_once(self, ep: Endpoint, body: dict, timeout_s: float) -> Answer | Failure:
        """One attempt, from this loop or from a request process."""
        if self.senders is None:
            return await send_once(ep.client(self.keys), body, timeout_s, self.keys)
        result = await self.senders.send(ep.client_spec(self.keys), body, timeout_s)
        return dataclasses.replace(result, reason=self.keys(result.reason)) if isinstance(result, Failure) else result

    async def close(self) -> None:
        if self.senders is not None:
            await self.senders.close()

    def next_delay(self, ep: Endpoint, failure: Failure, budget: Budget, refused: bool) -> float:
        """Seconds before the next attempt of a failed call, or :class:`CallFailed` if there is none."""
        status = failure.kind.removeprefix("http_")
        if refused:
            hint = ep.hint(failure)
            raise CallFailed(
                "refused",
                f"the endpoint refused the request (HTTP {status}): {failure.reason}" + (f"; {hint}" if hint else ""),
                said=f"HTTP {status}: {failure.reason}",
            )
        delay = self.retry.delay(failure, budget.used - 1)
        spent = budget.spent_after(max(delay, ep.flow.gate.remaining()))
        if spent is not None:
            tried = budget.used
            raise CallFailed(
                "request_failed",
                f"given up after {tried} attempt{'s' if tried > 1 else ''} in {budget.elapsed():.0f}s ({spent}); "
                f"last error: {failure.kind}: {failure.reason}",
            )
        log.debug("%s attempt %d failed: %s", ep.where, budget.used, failure.reason)
        if self.retry.pauses_endpoint(failure):
            ep.flow.pause(delay, rate_limited=failure.kind == "rate_limited")
            return 0.0  # this worker now waits at the endpoint's gate with all the others
        return delay

    async def wait(self, run: Run, seconds: float) -> None:
        if run.pool is not None:
            await run.pool.back_off(seconds)  # another worker takes this one's place meanwhile
        else:
            await asyncio.sleep(seconds)
