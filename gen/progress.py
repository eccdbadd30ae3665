"""Progress displays: the one place that decides whether gen draws one, and the one display every step shares.

A step that can take more than a few seconds (reading a source, building a product, writing the run folder,
an export, a push, a baseline, scoring, the viewer's index) wraps its work as

    with progress.task("reading locomo10.json", total=None) as bar:
        for item in work:
            ...
            bar.advance()

The rule of whether anything is drawn is :func:`decide`, and nothing else decides it:

- only when asked for: by the command line (it calls :func:`enable` unless ``-q`` was given, and
  :func:`disable` when it ends), or by the options of one call of gen's Python API (``gen.run`` with
  ``RunSettings.progress`` ``live`` or ``plain``; ``off`` silences that call even under a command line that
  asked), for that call only (:func:`chosen`): nothing one call or command chose is left to the next. A program
  that chooses nothing gets silence;
- only when stderr is a terminal (piped, redirected or under a test's capture: nothing, and no control codes in
  a log file);
- only in the process that enabled it: a worker forked from it (the run's pool) inherits the switch but must not
  draw over its parent; the parent advances the bars from what each shard sends back.

The LLM steps' live bars (gen/llm/accounts/progress.py) join the same display through :func:`open_display`, and their
choice between a live bar, plain lines and nothing is :func:`llm_mode`, so one display is on the terminal at a
time and log lines printed meanwhile go above it (rich redirects stderr while it is shown). The display is
transient: when the last step using it ends, its lines are erased, the cursor is shown again, and the line
is left empty, also when the step ends by Ctrl-C or SIGTERM (the exception unwinds through ``task``), and,
as a last resort, when the command line ends (:func:`disable`).
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal, TextIO

from gen import stopping

__all__ = [
    "Bar",
    "ProgressMode",
    "asked",
    "chosen",
    "close_display",
    "decide",
    "disable",
    "drawing",
    "enable",
    "llm_mode",
    "open_display",
    "task",
]

LlmMode = Literal["live", "plain", "off"]
# what an API call's options may ask for (RunSettings.progress, the `progress` of every other options object)
ProgressMode = Literal["auto", "live", "plain", "off"]
REFRESHES_PER_SECOND = 4


@dataclass(frozen=True)
class _Call:
    """The choice of the API call running: its `progress` setting and the process that made the call."""

    mode: str
    pid: int


@dataclass
class _Switch:
    """Who asked for displays: the process id that called `enable` (None: nobody, or -q), and the choice of the
    API call running, if it made one (it wins while the call runs)."""

    pid: int | None = None
    call: _Call | None = None


_switch = _Switch()


def enable(on: bool = True) -> None:
    """Displays on (or off) for this process: the command line's choice (on unless -q)."""
    _switch.pid = os.getpid() if on else None


def disable() -> None:
    """Displays off, and a display still shown is closed (the command line's last word: the cursor is shown
    again and the line ended, whatever happened before)."""
    _switch.pid = None
    _switch.call = None
    _Display.close_all()


@contextlib.contextmanager
def chosen(mode: str) -> Iterator[None]:
    """While the block runs (one call of gen's API), the call's own `progress` setting decides: ``live`` asks
    for displays, ``plain`` for the LLM steps' plain lines only, ``off`` for nothing, ``auto`` leaves it to the
    command line (silence for a program). Put back as it was when the block ends, so no call's choice outlives
    it. One call at a time per process: two calls from two threads at once would share the later one's choice."""
    previous = _switch.call
    _switch.call = _Call(mode, os.getpid()) if mode != "auto" else None
    try:
        yield
    finally:
        _switch.call = previous


def asked() -> tuple[LlmMode | None, bool]:
    """(what was asked for: "live", "plain", or None for nothing; whether by this process). The running API
    call's choice when it made one, else the command line's."""
    call = _switch.call
    if call is not None:
        return (None if call.mode == "off" else call.mode), call.pid == os.getpid()  # type: ignore[return-value]
    return ("live" if _switch.pid is not None else None), _switch.pid == os.getpid()


def decide(*, enabled: bool, terminal: bool, same_process: bool) -> bool:
    """Whether a live display is drawn: asked for (no -q, the command line), on a terminal, by the process that
    asked (not a worker forked from it)."""
    return enabled and terminal and same_process


def is_terminal(stream: TextIO | None) -> bool:
    try:
        return bool(stream is not None and stream.isatty())
    except (AttributeError, OSError, ValueError):  # a closed or replaced stream is no terminal
        return False


def drawing() -> bool:
    """:func:`decide` for this process and its stderr now."""
    mode, same = asked()
    return decide(enabled=mode == "live", terminal=is_terminal(_real_stderr()), same_process=same)


def llm_mode(requested: str, stream: TextIO | None = None) -> LlmMode:
    """What the LLM steps show for their `progress` setting. ``auto`` follows the rule of :func:`decide`, except
    that off a terminal they print plain lines every few seconds (a log of a long run says how far it got); a
    mode set explicitly (``live``, ``plain``, ``off``) is kept."""
    if requested in ("live", "plain", "off"):
        return requested  # type: ignore[return-value]
    mode, same = asked()
    if mode is None or not same:
        return "off"
    if mode == "plain":
        return "plain"
    return "live" if is_terminal(stream or _real_stderr()) else "plain"


def _real_stderr() -> TextIO:
    """stderr itself, also while a display shows (rich replaces sys.stderr by a proxy then)."""
    return getattr(sys.stderr, "rich_proxied_file", sys.stderr)


# --- the one display --------------------------------------------------------------------------------------


class _Display:
    """The rich Progress on screen, shared by every step running (the LLM steps' bars included) and closed when
    the last of them ends."""

    lock = threading.Lock()
    progress: Any = None  # rich.progress.Progress, imported only when something is drawn
    users = 0

    @classmethod
    def open(cls) -> Any:
        with cls.lock:
            if cls.progress is None:
                cls.progress = _new_progress()
                cls.progress.start()
            cls.users += 1
            return cls.progress

    @classmethod
    def close(cls, progress: Any) -> None:
        """One user of `progress` is done; nothing, when that display was already closed (by `close_all`: a
        thread still finishing its step must not close a display opened after)."""
        with cls.lock:
            if progress is not cls.progress:
                return
            cls.users -= 1
            if cls.users <= 0:
                cls._stop()

    @classmethod
    def close_all(cls) -> None:
        with cls.lock:
            cls._stop()

    @classmethod
    def _stop(cls) -> None:
        progress, cls.progress, cls.users = cls.progress, None, 0
        if progress is not None:
            with stopping.ignored(), contextlib.suppress(OSError, ValueError):  # a hung-up terminal takes nothing
                progress.stop()  # erases the display, shows the cursor


# A fork (the run's worker pool) while the display's thread is writing would give the child a lock held by a
# thread it does not have: a worker that then writes a warning would wait forever. So no fork happens while the
# display writes: the forking thread holds the display's locks (rich's Live and Console locks, re-entrant) for
# the instant of the fork, in the parent and (as their owner) in the child.
_held_for_fork: list[Any] = []


def _hold_for_fork() -> None:
    progress = _Display.progress
    if progress is not None:
        for lock in (progress.live._lock, progress.console._lock):
            lock.acquire()
            _held_for_fork.append(lock)


def _release_after_fork() -> None:
    while _held_for_fork:
        _held_for_fork.pop().release()


os.register_at_fork(before=_hold_for_fork, after_in_parent=_release_after_fork, after_in_child=_release_after_fork)


def _new_progress() -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
    from rich.text import Text

    class Count(ProgressColumn):
        """done/total, or what is done so far when the total is not known ahead (nothing before the first)."""

        def render(self, task: Any) -> Text:
            done = f"{int(task.completed):,}" if task.completed or task.total is not None else ""
            return Text(done if task.total is None else f"{done}/{int(task.total):,}", style="progress.download")

    return Progress(
        TextColumn("{task.description}", style="bold", markup=False),
        BarColumn(),
        Count(),
        TextColumn("{task.fields[detail]}", markup=False),
        TimeElapsedColumn(),
        console=Console(stderr=True),
        refresh_per_second=REFRESHES_PER_SECOND,
        transient=True,
        redirect_stdout=False,  # a command's results on stdout are not moved to stderr
        redirect_stderr=True,  # log lines printed meanwhile go above the display
    )


def open_display() -> Any:
    """The shared rich Progress, started if it was not (a caller that checked :func:`llm_mode` or
    :func:`drawing`); every call is matched by one :func:`close_display`."""
    return _Display.open()


def close_display(progress: Any) -> None:
    _Display.close(progress)


# --- a step ----------------------------------------------------------------------------------------------


class Bar:
    """One step's row in the display; without a display every method does nothing."""

    def __init__(self, progress: Any = None, task_id: Any = None) -> None:
        self._progress = progress
        self._task = task_id

    @property
    def shown(self) -> bool:
        return self._progress is not None

    def advance(self, steps: float = 1) -> None:
        if self._progress is not None:
            self._progress.advance(self._task, steps)

    def update(self, *, total: float | None = None, detail: str | None = None) -> None:
        if self._progress is None:
            return
        fields: dict[str, Any] = {} if detail is None else {"detail": detail}
        if total is not None:
            fields["total"] = total
        self._progress.update(self._task, **fields)


@contextlib.contextmanager
def task(description: str, total: float | None = None, detail: str = "") -> Iterator[Bar]:
    """A step's row in the display while the block runs (`total`: its units, None when not known ahead), removed
    when the block ends however it ends. Draws nothing unless :func:`drawing`."""
    if not drawing():
        yield Bar()
        return
    progress = open_display()
    try:
        task_id = progress.add_task(description, total=total, detail=detail)
        progress.refresh()  # shown at once: a step shorter than a refresh still says it ran
        try:
            yield Bar(progress, task_id)
            progress.refresh()  # and how far it got, before its row goes
        finally:
            with contextlib.suppress(KeyError):
                progress.remove_task(task_id)
    finally:
        close_display(progress)
