"""Where the engine's calls run: an event loop on its own thread, and a pool of workers per step.

The caller of ``run_step`` stays synchronous: :class:`LoopThread` runs the step's coroutine on a daemon
thread and blocks until it is done (Ctrl-C cancels it and waits briefly for in-flight requests to stop).
While it runs, the objects that were alive before are frozen out of the garbage collector's passes: every
request allocates, which triggers full collections, and a full collection walks the whole heap — in a run,
every conversation and record — with the GIL held, so the loop stalls for longer the larger the corpus.
The youngest generation is also collected less often meanwhile: each of hundreds of requests in flight
keeps objects alive across many collections, which would otherwise walk them again and again.

:class:`WorkerPool` is as wide as the step's endpoints allow in total. Each worker takes the next item as
soon as it has finished one, so there is no hand-over between items; a worker that has to wait before a
retry lends its place to a new worker meanwhile, so one slow item never holds the others back.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import gc
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from typing import Any, Generic, TypeVar

from gen import stopping
from gen.errors import GenError
from gen.llm.accounts.lanes import Lane, LaneCancelled

__all__ = ["LoopThread", "WorkerPool", "frozen_heap"]

T = TypeVar("T")
YOUNG_THRESHOLD = 10_000  # allocations between collections of the youngest generation during a step (default 700)
ItemT = TypeVar("ItemT")


class LoopThread:
    """An asyncio event loop running on a daemon thread; ``run(coro)`` blocks the caller until it finishes."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gen-llm-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, T], lane: Lane | None = None) -> T:
        """Run `coro` on the loop until it is done; a `lane` that is cancelled meanwhile cancels it."""
        with frozen_heap():
            future = asyncio.run_coroutine_threadsafe(coro, self.loop)
            if lane is not None:
                lane.track(future)
            try:
                return stopping.patiently(future.result, concurrent.futures.TimeoutError)  # (a stop comes between)
            except concurrent.futures.CancelledError:
                if lane is not None and lane.cancelled:
                    raise LaneCancelled() from None
                raise
            except KeyboardInterrupt:
                future.cancel()
                with contextlib.suppress(BaseException):  # already unwinding an interrupt: nothing may replace it
                    future.result(timeout=10)
                raise
            finally:
                if lane is not None:
                    lane.untrack(future)

    def close(self) -> None:
        """Cancel what is still running on the loop and let it unwind (as asyncio.run does), then stop it: a task
        left pending would run its cleanup later, on a closed loop."""
        if self.loop.is_closed():
            return
        with contextlib.suppress(Exception):  # a task that will not finish is left to the daemon thread
            asyncio.run_coroutine_threadsafe(_cancel_all(), self.loop).result(timeout=5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


async def _cancel_all() -> None:
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


_FROZEN = threading.Lock()
_freeze: dict[str, Any] = {"blocks": 0, "threshold": None}  # blocks in progress, and the thresholds to restore


@contextlib.contextmanager
def frozen_heap() -> Iterator[None]:
    """Leave the objects alive now out of garbage collection until the block ends (they are collected as
    before afterwards), and collect the youngest generation every YOUNG_THRESHOLD allocations; objects made
    inside the block are collected as usual. Blocks in several threads at once (the steps of two batches in
    flight) share one freeze, undone when the last ends. If something else has frozen objects, its arrangement
    is left alone."""
    with _FROZEN:
        mine = bool(_freeze["blocks"]) or not gc.get_freeze_count()
        if mine and not _freeze["blocks"]:
            gc.freeze()
            old = _freeze["threshold"] = gc.get_threshold()
            if old[0]:  # (0: collection is switched off, and stays so)
                gc.set_threshold(max(old[0], YOUNG_THRESHOLD), *old[1:])
        _freeze["blocks"] += mine
    try:
        yield
    finally:
        if mine:
            with _FROZEN:
                _freeze["blocks"] -= 1
                if not _freeze["blocks"]:
                    gc.set_threshold(*_freeze["threshold"])
                    gc.unfreeze()


class WorkerPool(Generic[ItemT]):
    """``await WorkerPool(items, width, handle).run()`` handles every item, in order of start."""

    def __init__(self, items: Sequence[ItemT], width: int, handle: Callable[[ItemT], Awaitable[None]]) -> None:
        self.queue = collections.deque(items)
        self.width = max(1, width)
        self.handle = handle
        self.workers = 0
        self.backing_off = 0
        self._group: asyncio.TaskGroup | None = None

    async def run(self) -> None:
        """Until the queue is empty; the first GenError (else the first error) of any worker is raised as is."""
        try:
            async with asyncio.TaskGroup() as group:
                self._group = group
                for _ in range(min(len(self.queue), self.width)):
                    self._add_worker()
        except BaseExceptionGroup as group_error:
            for exc in group_error.exceptions:
                if isinstance(exc, GenError):
                    raise exc from None
            raise group_error.exceptions[0] from None

    async def back_off(self, seconds: float) -> None:
        """Sleep before a retry, letting another worker take this one's place in the meantime."""
        self.backing_off += 1
        try:
            if self._group is not None and self.queue and self.workers - self.backing_off < self.width:
                self._add_worker()
            await asyncio.sleep(seconds)
        finally:
            self.backing_off -= 1

    def _add_worker(self) -> None:
        assert self._group is not None
        self.workers += 1
        self._group.create_task(self._work())

    async def _work(self) -> None:
        try:
            while self.queue and self.workers - self.backing_off <= self.width:
                await self.handle(self.queue.popleft())
        finally:
            self.workers -= 1
