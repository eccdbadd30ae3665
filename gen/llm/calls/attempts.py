"""The retry loop of one call: attempts through the endpoint's flow control until a completion comes back,
within the call's budget (attempts and seconds) and the endpoint's breaker (gen/llm/calls/giveup.py), with backoff
and pauses as gen/llm/calls/request.py and gen/llm/calls/limiter.py decide."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections import Counter
from dataclasses import dataclass
from typing import Protocol

from gen.errors import Stopped
from gen.llm.calls.endpoint import Endpoint, KeyScrubber
from gen.llm.calls.giveup import Budget
from gen.llm.calls.request import Answer, Failure, RetryPolicy, body_messages, send_once
from gen.llm.calls.senders import Senders
from gen.llm.config import DEFAULT_OUTPUT_TOKENS
from gen.llm.task import estimate_input_tokens

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


class CallCounts(Protocol):
    """The counts a call's attempts add to (the step's :class:`gen.llm.accounts.counts.StepStats`)."""

    requests: int
    calls_failed: int
    errors: Counter[str]


class RequestMeter(Protocol):
    """The live line's request and token rates (:class:`gen.llm.accounts.progress.StepCounters`)."""

    def note_request(self, tokens: int) -> None: ...


class Lender(Protocol):
    """A worker pool that lends a waiting worker's place to another (:class:`gen.llm.engine.workers.WorkerPool`)."""

    async def back_off(self, seconds: float) -> None: ...


class Run(Protocol):
    """What a call's attempts count into: the step's stats and progress counters, and the worker pool that
    lends a backing-off worker's place to another. Named here, as the three things a retry loop touches, so one
    HTTP call (this package) knows nothing of the engine that counts and schedules it (gen.llm.engine)."""

    @property
    def stats(self) -> CallCounts: ...

    @property
    def counters(self) -> RequestMeter: ...

    @property
    def pool(self) -> Lender | None: ...


@dataclass
class Attempts:
    retry: RetryPolicy
    keys: KeyScrubber
    senders: Senders | None = None  # request processes (gen.llm.calls.senders), or none: requests go from this loop

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
