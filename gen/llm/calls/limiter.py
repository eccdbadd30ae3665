"""Flow control shared by every step that uses an endpoint: concurrency slots, rate buckets, backoff.

* :class:`Slots` — the concurrency limit. It adapts: a 429 halves the number of usable slots (at most once
  per second), and each success adds back ``1/limit`` of a slot, up to ``max_concurrency``. Waiting requests
  get a free slot in order of :data:`PRIORITY`, then of arrival: of two batches in flight (gen.llm.accounts.lanes),
  the older one goes at full speed and the newer fills the slots it leaves, so the older finishes first and
  the batch after it is prepared while the newer one runs.
* :class:`TokenBucket` — requests-per-minute and tokens-per-minute limits, refilled continuously with one
  second's worth of burst (providers enforce per-minute limits over short windows).
* :class:`Gate` — a pause every worker of an endpoint waits on; a 429 (or a ``Retry-After``) closes it for
  the advised time, so all workers slow down together rather than each finding out on its own.
* :class:`FlowControl` — the three above for one endpoint, in the order a request passes them.
* :func:`backoff_delay` — exponential backoff with jitter; :func:`retry_after_seconds` reads
  ``retry-after-ms`` / ``Retry-After`` (seconds or an HTTP date).

All of it runs on the engine's event loop thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import email.utils
import heapq
import itertools
import random
import time
from collections.abc import AsyncIterator, Mapping

__all__ = ["PRIORITY", "FlowControl", "Gate", "Slots", "TokenBucket", "backoff_delay", "retry_after_seconds"]

# The rank of the requests sent from this context (a lane's order): lower ranks are let through first.
PRIORITY: contextvars.ContextVar[int] = contextvars.ContextVar("gen_llm_priority", default=0)


class Slots:
    """An adaptive semaphore: ``async with slots:``; ``on_rate_limited()``; ``on_success()``."""

    def __init__(self, limit: int) -> None:
        self.max = limit
        self.limit = float(limit)
        self.in_use = 0
        self._waiters: list[tuple[int, int, asyncio.Future]] = []  # a heap: (PRIORITY, arrival, future)
        self._arrivals = itertools.count()
        self._last_decrease = -1e9

    async def __aenter__(self) -> Slots:
        if self.in_use >= int(self.limit) or self._waiters:
            future = asyncio.get_running_loop().create_future()
            waiter = (PRIORITY.get(), next(self._arrivals), future)
            heapq.heappush(self._waiters, waiter)
            try:
                await future
            except BaseException:
                if not future.cancelled() and future.done():
                    self._release()  # we were handed a slot but are leaving
                elif waiter in self._waiters:
                    self._waiters.remove(waiter)
                    heapq.heapify(self._waiters)
                raise
        else:
            self.in_use += 1
        return self

    async def __aexit__(self, *exc) -> None:
        self._release()

    def _release(self) -> None:
        self.in_use -= 1
        self._wake()

    def _wake(self) -> None:
        while self._waiters and self.in_use < int(self.limit):
            future = heapq.heappop(self._waiters)[2]
            if not future.done():
                self.in_use += 1  # hand the slot over directly (by priority, then first come first served)
                future.set_result(None)

    def on_rate_limited(self) -> None:
        now = time.monotonic()
        if now - self._last_decrease >= 1.0:
            self._last_decrease = now
            self.limit = max(1.0, self.limit / 2)

    def on_success(self) -> None:
        if self.limit < self.max:
            self.limit = min(float(self.max), self.limit + 1.0 / self.limit)
            self._wake()


class TokenBucket:
    """``await bucket.acquire(n)`` waits until ``n`` units are available; ``adjust(delta)`` corrects later.

    Capacity is one second's worth (at least 1). A request larger than the capacity is let through when the
    bucket is full and drives it negative, so the long-run rate still holds.
    """

    def __init__(self, per_minute: float) -> None:
        self.rate = per_minute / 60.0
        self.capacity = max(1.0, self.rate)
        self.level = self.capacity
        self._stamp = time.monotonic()
        self._lock = asyncio.Lock()

    def _refill(self) -> None:
        now = time.monotonic()
        self.level = min(self.capacity, self.level + (now - self._stamp) * self.rate)
        self._stamp = now

    async def acquire(self, amount: float) -> None:
        need = min(amount, self.capacity)
        async with self._lock:  # FIFO: the first waiter is served first
            while True:
                self._refill()
                if self.level >= need:
                    self.level -= amount
                    return
                await asyncio.sleep((need - self.level) / self.rate)

    def adjust(self, delta: float) -> None:
        """Give back (positive) or take (negative) units once the real cost is known."""
        self._refill()
        self.level = min(self.capacity, self.level + delta)


class Gate:
    """A shared pause: ``close_for(seconds)`` and ``await wait()``."""

    def __init__(self) -> None:
        self.until = 0.0

    def close_for(self, seconds: float) -> None:
        self.until = max(self.until, time.monotonic() + seconds)

    def remaining(self) -> float:
        """Seconds until the gate opens (0 when open)."""
        return max(0.0, self.until - time.monotonic())

    async def wait(self) -> None:
        while True:
            remaining = self.until - time.monotonic()
            if remaining <= 0:
                return
            await asyncio.sleep(remaining)


class FlowControl:
    """The limits of one endpoint: ``async with flow.admit(estimate):`` around each request.

    ``estimate`` is the request's expected tokens (input plus the most output), charged to the
    tokens-per-minute bucket up front and corrected once the reply's real usage is known.
    """

    def __init__(
        self, max_concurrency: int, requests_per_minute: float | None = None, tokens_per_minute: float | None = None
    ) -> None:
        self.slots = Slots(max_concurrency)
        self.gate = Gate()
        self.rpm = TokenBucket(requests_per_minute) if requests_per_minute else None
        self.tpm = TokenBucket(tokens_per_minute) if tokens_per_minute else None

    @contextlib.asynccontextmanager
    async def admit(self, estimate: float) -> AsyncIterator[None]:
        await self.gate.wait()
        if self.rpm is not None:
            await self.rpm.acquire(1)
        if self.tpm is not None:
            await self.tpm.acquire(estimate)
        async with self.slots:
            await self.gate.wait()  # the gate may have closed while this request waited for a slot
            yield

    def succeeded(self, estimate: float, used: float) -> None:
        """A reply came back: widen the slots again, give back the tokens charged but not used."""
        self.slots.on_success()
        if self.tpm is not None:
            self.tpm.adjust(estimate - used)

    def refund(self, estimate: float) -> None:
        """A request failed before using any tokens."""
        if self.tpm is not None:
            self.tpm.adjust(estimate)

    def pause(self, seconds: float, *, rate_limited: bool) -> None:
        """Hold every request of the endpoint back; after a 429 also use fewer slots for a while."""
        self.gate.close_for(seconds)
        if rate_limited:
            self.slots.on_rate_limited()


def backoff_delay(attempt: int, base: float, cap: float, rng: random.Random | None = None) -> float:
    """Exponential backoff with "equal jitter": half of min(cap, base * 2**attempt) plus a random half."""
    ceiling = min(cap, base * (2**attempt))
    return ceiling / 2 + (rng or random).uniform(0, ceiling / 2)


def retry_after_seconds(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds advised by ``retry-after-ms`` or ``Retry-After`` (a number or an HTTP date); None if absent."""
    if not headers:
        return None
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
