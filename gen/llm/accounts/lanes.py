"""Lanes: batches of one run's LLM stage in flight together, so that the endpoints' limits never idle between
steps (gen/pipeline/executors.py:llm_results keeps two batches of conversations in flight, each in its thread).

Every engine step a batch runs happens inside ``engine.lane(lane)``; the lane keeps what must come out as a
sequential run would have it, and the runner merges the lanes into the engine in batch order
(``engine.merge(lane)``):

rejects
    A lane's rejected items join ``engine.rejects`` when it is merged, so rejects.jsonl lists them in the
    order a run with one batch at a time gives.
the items' fates and the reject limit
    A step's items, and how many ended in the output (ok) or not (rejected), are counted per lane
    (:class:`Tally`) and merged in batch order, so run.json's item counts match the rejects.jsonl the merged
    lanes leave. A step is judged over the tallies of its name in the lanes already merged, plus its own
    lane's. The oldest lane in flight, the one a sequential run would be in, is therefore judged
    exactly as there; a later lane does not see the lane still running before it, so it may stop a little
    earlier or later than a sequential run would have in that batch.
a stop
    When a lane stops (a reject limit, an endpoint given up on, an error) or the run is interrupted, the runner
    merges the oldest lane and cancels the later ones (:meth:`Lane.cancel`): their rejects are dropped, the
    calls they completed stay in the cache. So a stopped run leaves the rejects of a sequential run that stopped
    in the same batch, and a cache that may hold more replies (which a resumed run uses).

the endpoint's slots
    Requests waiting for a slot are let through in the order of their lane (:data:`gen.llm.calls.limiter.PRIORITY`,
    set from ``Lane.order``), so the oldest batch goes at full speed and finishes first, and the next one fills
    the slots it leaves: the batch after is prepared while the newer one runs, instead of all batches in flight
    ending together and the endpoint waiting for the next ones to be prepared.

The engine's other accounting (calls, tokens, errors per step) is counted as the calls happen: its totals at
the end of a run are the same either way. A step's ``seconds`` count the time at least one call of that step
name was running (:func:`covered_seconds`), so two steps in flight together are not counted twice.
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from gen.llm.calls.limiter import PRIORITY

__all__ = ["Lane", "LaneCancelled", "Lanes", "Tally", "covered_seconds"]


class LaneCancelled(BaseException):
    """The lane was cancelled because the run stopped in an earlier batch. A BaseException, as Ctrl-C is:
    product code that catches errors must not catch this."""


@dataclass
class Tally:
    """A step's items and their fates: ok (in the output) or rejected (not, whatever the reason), with the
    reject kinds. The one count of rejects every report reads (gen.llm.accounts.counts.Accounts.report) and the
    reject limit judges (gen.llm.accounts.counts.past_limit)."""

    items: int = 0
    ok: int = 0
    rejected: int = 0
    kinds: Counter[str] = field(default_factory=Counter)

    def reject(self, kind: str) -> None:
        self.rejected += 1
        self.kinds[kind] += 1

    def add(self, other: Tally) -> None:
        self.items += other.items
        self.ok += other.ok
        self.rejected += other.rejected
        self.kinds.update(other.kinds)

    def plus(self, other: Tally) -> Tally:
        """Both together (a lane's tally and what the lanes merged before it counted)."""
        total = Tally()
        total.add(self)
        total.add(other)
        return total


@dataclass
class Lane:
    """One batch in flight: its tallies per step name, its rejects, and the loop futures of its running step."""

    order: int = 0  # the batch's place in the run: the requests of older batches get free slots first
    tallies: dict[str, Tally] = field(default_factory=dict)
    rejects: list[dict[str, Any]] = field(default_factory=list)
    cancelled: bool = False
    _running: set[Future] = field(default_factory=set)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def tally(self, step: str) -> Tally:
        return self.tallies.setdefault(step, Tally())

    @property
    def items(self) -> int:
        """The items of every step in this lane (each once, whatever its rounds; none once the lane is merged)."""
        return sum(tally.items for tally in self.tallies.values())

    def track(self, future: Future) -> None:
        """A step of this lane now runs on the loop as `future` (cancelled at once if the lane already is)."""
        with self._lock:
            self._running.add(future)
            cancelled = self.cancelled
        if cancelled:
            future.cancel()

    def untrack(self, future: Future) -> None:
        with self._lock:
            self._running.discard(future)

    def cancel(self) -> None:
        """Stop the lane: its running step is cancelled, and its next one does not start."""
        with self._lock:
            self.cancelled = True
            running = list(self._running)
        for future in running:
            future.cancel()


class Lanes:
    """The engine's side: the lane each thread runs steps for, and the tallies of the lanes merged so far (a
    thread outside any lane counts straight into those, as a run without lanes does)."""

    def __init__(self) -> None:
        self._local = threading.local()
        self.merged: dict[str, Tally] = {}

    def current(self) -> Lane | None:
        """The lane of this thread's batch, if any; LaneCancelled if it was cancelled."""
        lane: Lane | None = getattr(self._local, "lane", None)
        if lane is not None and lane.cancelled:
            raise LaneCancelled()
        return lane

    def seen(self, merged: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The rejects a sequential run would hold at this point: in a lane, the `merged` ones and the lane's."""
        lane: Lane | None = getattr(self._local, "lane", None)
        return merged if lane is None else [*merged, *lane.rejects]

    @contextlib.contextmanager
    def entered(self, lane: Lane) -> Iterator[Lane]:
        self._local.lane = lane
        rank = PRIORITY.set(lane.order)  # the steps' tasks start in a copy of this thread's context
        try:
            yield lane
        finally:
            PRIORITY.reset(rank)
            self._local.lane = None

    def tallies(self, step: str, lane: Lane | None) -> tuple[Tally, Tally]:
        """(what this step counts into, what the lanes merged before it counted): the limit is over both."""
        merged = self.merged.setdefault(step, Tally())
        return (lane.tally(step), merged) if lane is not None else (merged, Tally())

    def merge(self, lane: Lane) -> list[dict[str, Any]]:
        """Add the lane's tallies to the merged ones; its rejects are returned (for the engine's, in order)."""
        for step, tally in lane.tallies.items():
            self.merged.setdefault(step, Tally()).add(tally)
        rejects, lane.tallies, lane.rejects = lane.rejects, {}, []
        return rejects


def covered_seconds(spans: list[tuple[float, float]]) -> float:
    """The time covered by at least one of the (start, end) spans."""
    total, reached = 0.0, float("-inf")
    for start, end in sorted(spans):
        if end > reached:
            total += end - max(start, reached)
            reached = end
    return total
