"""Progress of a step: a rich live display on a terminal, plain periodic lines otherwise (both on stderr).

Shown per step: calls done / total, served from cache, the step's items rejected so far out of its items
(the one count of gen.llm.accounts.counts, so the live line and run.json agree), requests per minute and tokens per
minute (over the last minute). The engine updates :class:`StepCounters`; a reporter only reads them.

Whether a step shows a live bar, plain lines or nothing is decided by gen/progress.py (``llm_mode``), the one
place that decides it for every progress display, and the live bars are rows of its one display.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TextIO

from gen.progress import close_display, llm_mode, open_display

if TYPE_CHECKING:
    from gen.llm.accounts.lanes import Tally

__all__ = [
    "LiveReporter",
    "NullReporter",
    "PlainReporter",
    "Reporter",
    "StepCounters",
    "announce",
    "items_line",
    "make_reporter",
    "showing",
]

log = logging.getLogger("gen.llm")
TICK_S = 0.25  # how often a reporter gets to refresh while a step runs


@dataclass
class StepCounters:
    step: str
    total: int  # calls of this run_step
    fates: Callable[[], Tally] | None = None  # the step's items so far (their rejects), read at each refresh
    done: int = 0
    cached: int = 0
    requests: int = 0
    tokens: int = 0
    started: float = field(default_factory=time.monotonic)
    _window: deque[tuple[float, int]] = field(default_factory=deque, repr=False)  # (time, tokens)

    def add(self, *, cached: bool) -> None:
        """A call finished."""
        self.done += 1
        self.cached += cached

    def items(self) -> str:
        """The step's items decided so far, as the line shows them ("" when they are not known): those still
        being written (regenerated, verified) are neither ok nor rejected yet."""
        return "" if self.fates is None else items_line(self.fates())

    def note_request(self, tokens: int) -> None:
        self.requests += 1
        self.tokens += tokens
        now = time.monotonic()
        self._window.append((now, tokens))
        while self._window and now - self._window[0][0] > 60:
            self._window.popleft()

    def rates(self) -> tuple[float, float]:
        """(requests/min, tokens/min) over the last minute (or since the step started, if shorter)."""
        now = time.monotonic()
        window = list(self._window)
        recent = [(t, n) for t, n in window if now - t <= 60]
        span = max(1.0, min(60.0, now - self.started))
        return len(recent) * 60 / span, sum(n for _, n in recent) * 60 / span

    def line(self) -> str:
        rpm, tpm = self.rates()
        elapsed = time.monotonic() - self.started
        items = f"{self.items()}, " if self.fates is not None else ""
        return (
            f"[llm] {self.step}: {self.done}/{self.total} calls done, {self.cached} cached, {items}"
            f"{rpm:.0f} req/min, {tpm:.0f} tok/min, {elapsed:.0f}s"
        )


def items_line(tally: Tally) -> str:
    """A step's items as every progress line words them."""
    return f"items: {tally.ok} ok, {tally.rejected} rejected of {tally.items}"


class Reporter(Protocol):
    """What the engine accepts as ``reporter``."""

    def start(self, counters: StepCounters) -> None: ...

    def tick(self) -> None: ...

    def stop(self, summary: str = "") -> None: ...


class NullReporter:
    def start(self, counters: StepCounters) -> None:
        pass

    def tick(self) -> None:
        pass

    def stop(self, summary: str = "") -> None:
        pass


class PlainReporter(NullReporter):
    """One line at the start, every ``interval`` seconds, and at the end."""

    def __init__(self, stream: TextIO | None = None, interval: float = 10.0) -> None:
        self.stream = stream or sys.stderr
        self.interval = interval
        self.counters: StepCounters | None = None
        self._last = 0.0

    def start(self, counters: StepCounters) -> None:
        self.counters = counters
        self._last = time.monotonic()
        self._emit(f"[llm] {counters.step}: {counters.total} calls")

    def tick(self) -> None:
        if self.counters and time.monotonic() - self._last >= self.interval:
            self._last = time.monotonic()
            self._emit(self.counters.line())

    def stop(self, summary: str = "") -> None:
        if self.counters:
            self._emit(self.counters.line())
            self.counters = None
        if summary:
            self._emit(summary)

    def _emit(self, text: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # a closed stream must not fail the run
            print(text, file=self.stream, flush=True)


class LiveReporter(NullReporter):
    """The step's bar with its counters in gen's one progress display (gen/progress.py), refreshed by rich's own
    thread; steps running at once (two batches in flight) show their bars together. When the step ends its bar
    leaves the display and its last line stays printed above it, with the summary."""

    def __init__(self) -> None:
        self._progress: Any = None  # the shared rich.progress.Progress while the step runs
        self._task: Any = None
        self.counters: StepCounters | None = None

    def start(self, counters: StepCounters) -> None:
        self.counters = counters
        self._progress = open_display()
        self._task = self._progress.add_task(counters.step, total=counters.total, detail="")
        self.tick()

    def tick(self) -> None:
        counters, progress = self.counters, self._progress
        if counters is None or progress is None:
            return
        rpm, tpm = counters.rates()
        items = f"{counters.items()} · " if counters.fates is not None else ""
        detail = f"cached {counters.cached} · {items}{rpm:.0f} req/min · {tpm:.0f} tok/min"
        progress.update(self._task, completed=counters.done, detail=detail)

    def stop(self, summary: str = "") -> None:
        progress, counters = self._progress, self.counters
        self._progress = self.counters = None
        if progress is None or counters is None:
            return
        try:
            with contextlib.suppress(KeyError):
                progress.remove_task(self._task)
            with contextlib.suppress(OSError, ValueError):  # a terminal that hung up takes nothing
                for line in (counters.line(), summary):
                    if line:
                        progress.console.print(line, markup=False, highlight=False)
        finally:
            close_display(progress)


def announce(text: str, mode: str = "auto", stream: TextIO | None = None) -> None:
    """A one-off line about the run (e.g. the structured-output mode an endpoint uses): logged, and shown on
    stderr unless progress is ``off``."""
    log.info(text, extra={"shown": True})  # printed below when progress is on; the run log keeps it
    if llm_mode(mode, stream) != "off":
        with contextlib.suppress(OSError, ValueError):
            print(text, file=stream or sys.stderr, flush=True)


def make_reporter(mode: str = "auto", interval: float = 10.0, stream: TextIO | None = None) -> Reporter:
    """``live``, ``plain`` or ``off``; ``auto``: what gen/progress.py decides (nothing unless the command line
    asked for progress, live on a terminal, plain lines otherwise)."""
    chosen = llm_mode(mode, stream)
    if chosen == "off":
        return NullReporter()
    if chosen == "live":
        return LiveReporter()
    return PlainReporter(stream or sys.stderr, interval)


@contextlib.asynccontextmanager
async def showing(reporter: Reporter | None, counters: StepCounters, summary: Callable[[], str]) -> AsyncIterator[None]:
    """Report a step's counters while the block runs, then ``summary()`` (logged too) when it ends."""
    if reporter is None:
        yield
        return
    reporter.start(counters)
    ticker = asyncio.create_task(_tick(reporter))
    try:
        yield
    finally:
        ticker.cancel()
        text = summary()
        if text:
            log.info(text, extra={"shown": True})  # the reporter prints it
        reporter.stop(text)


async def _tick(reporter: Reporter) -> None:
    while True:
        reporter.tick()
        await asyncio.sleep(TICK_S)
