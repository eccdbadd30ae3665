"""How gen is stopped from outside: Ctrl-C (SIGINT), SIGTERM and SIGHUP take one path.

Python stops the main thread on Ctrl-C by raising KeyboardInterrupt wherever it is, and every command already
cleans up on that exception: a run keeps what it made in `.<name>.stopped`, a file being written is removed
before its final name exists. `installed` (around everything the CLI's main does) makes SIGTERM and SIGHUP raise
the same exception, as :class:`Interrupted`, a KeyboardInterrupt that says which signal it was, so a job
scheduler's stop or a closed terminal meets exactly the cleanup Ctrl-C meets, with no second code path to keep
in step. The exit code is 128 + the signal's number (130, 143, 129), as a shell reports a process that signal
ended. Which signal came is also remembered (`received`), because typer turns an interrupt inside a command
into a bare exit code 130 and the exception is lost on the way.

Python acts on a signal in the main thread, but the kernel may deliver it to any thread: then a wait of the main
thread on a lock, a queue or a future is not interrupted, and the stop waits for whatever it waits for (a reply
that never comes, a pool whose workers the same signal ended). So the main thread waits in short slices
(`patiently`): a stop is acted on within POLL_S wherever it lands.

Processes gen starts to work for it (the run's pool, the request processes) call `leave_to_parent`: the parent
stops them and reports, so they neither print nor write on their own when the signal reaches the whole
process group.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import TypeVar

__all__ = [
    "Interrupted",
    "exit_code",
    "finishing",
    "held",
    "ignored",
    "installed",
    "leave_to_parent",
    "patiently",
    "reason",
    "received",
    "resumed",
    "signal_of",
]

NAMES: dict[int, str] = {signal.SIGINT: "Ctrl-C", signal.SIGTERM: "SIGTERM"}
if hasattr(signal, "SIGHUP"):  # (POSIX only)
    NAMES[signal.SIGHUP] = "SIGHUP"
STOP_SIGNALS = tuple(NAMES)
POLL_S = 0.2  # seconds: the longest a wait of the main thread goes without looking for a stop signal
T = TypeVar("T")
_forks_watched: list[bool] = []  # whether `_forked` runs in every forked child yet
_installed: list[bool] = []  # True while `installed` is in force
_received: list[int] = []  # the stop signals that came since `installed`, in order


class Interrupted(KeyboardInterrupt):
    """A stop signal, raised in the main thread as Ctrl-C's KeyboardInterrupt is (so everything that handles
    one handles the other)."""

    def __init__(self, signum: int) -> None:
        super().__init__(NAMES.get(signum, f"signal {signum}"))
        self.signum = signum


@contextmanager
def installed(restore: bool = True) -> Iterator[None]:
    """In the block, SIGINT, SIGTERM and SIGHUP raise :class:`Interrupted` (only the main thread can set
    handlers). Afterwards the handlers before are back (main() may run inside another program, a test), or, for
    a process that ends with the command (`restore=False`), the signals are ignored: the command's exit code is
    decided, and a signal during the interpreter's shutdown has nothing left to stop."""
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    if not _forks_watched:
        _forks_watched.append(True)
        os.register_at_fork(after_in_child=_forked)
    previous = {signum: signal.signal(signum, _interrupt) for signum in STOP_SIGNALS}
    _installed.append(True)
    try:
        yield
    finally:
        _installed.pop()
        for signum, handler in previous.items():
            signal.signal(signum, handler if restore else signal.SIG_IGN)


def finishing() -> None:
    """The command's result is about to be put in place, and the command ends right after: from now on a stop
    signal is ignored, since a stop now could only misreport what was written. Only under `installed` (the
    command line): a program that calls gen's functions keeps its own handlers."""
    if _installed and threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def resumed() -> None:
    """New work after a result was put in place (a run's push to the Hub): stop signals act again, as under
    `installed`."""
    if _installed and threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            signal.signal(signum, _interrupt)


def _forked() -> None:
    """A child forked without exec (a pool worker) is the parent's helper from its first instant: before its own
    start-up code could say so, a signal would run the parent's handlers in it."""
    if signal.getsignal(signal.SIGTERM) is _interrupt:
        leave_to_parent(unwind_on_sigterm=True)


def _interrupt(signum: int, _frame: FrameType | None) -> None:
    _received.append(signum)
    raise Interrupted(signum)


def received() -> int | None:
    """The first stop signal since `installed`, if any came."""
    return _received[0] if _received else None


def signal_of(exc: BaseException | None = None) -> int:
    """The signal behind an interrupt: the exception's own, else the first received, else SIGINT (a
    KeyboardInterrupt raised by Python's own Ctrl-C handler, as in a program that never called `installed`)."""
    if isinstance(exc, Interrupted):
        return exc.signum
    return received() or signal.SIGINT


def exit_code(signum: int) -> int:
    return 128 + signum


def reason(signum: int) -> str:
    """The stop reason a report and a message give: "interrupted (Ctrl-C)", "interrupted (SIGTERM)"..."""
    return f"interrupted ({NAMES.get(signum, f'signal {signum}')})"


def patiently(wait: Callable[[float], T], *timeouts: type[BaseException]) -> T:
    """`wait(POLL_S)` again and again until it returns without raising one of `timeouts`: a wait that wakes
    every POLL_S, so that a stop signal delivered to another thread is acted on meanwhile (see above)."""
    while True:
        try:
            return wait(POLL_S)
        except timeouts:
            continue


@contextmanager
def held() -> Iterator[None]:
    """Hold the stop signals until the block ends, then act on the first that came (a block that must finish
    whole: a shard written and counted together). A handler, not a signal mask: the pool's threads would take a
    masked signal for the main thread. Outside the main thread signals never arrive, so nothing is held."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    caught: list[int] = []
    previous = {signum: signal.signal(signum, lambda number, _frame: caught.append(number)) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        if caught:
            signal.raise_signal(caught[0])  # to the handler there was before: Interrupted, or the default action


@contextmanager
def ignored() -> Iterator[None]:
    """Drop the stop signals during the block: a stop already under way writes its report whole, whatever
    comes meanwhile (SIGKILL still ends the process)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def leave_to_parent(*, unwind_on_sigterm: bool = False) -> None:
    """In a worker process: Ctrl-C and SIGHUP (which reach the whole process group) are the parent's to handle.
    SIGTERM, which the parent also sends to stop a worker, ends it silently: at once (the default action), or,
    with `unwind_on_sigterm`, by SystemExit, which releases the locks the worker holds on the way out (a pool
    worker waits for its next task holding the pool's queue lock; killed outright, it would keep it forever and
    the pool's end would wait on it)."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _unwind if unwind_on_sigterm else signal.SIG_DFL)


def _unwind(signum: int, _frame: FrameType | None) -> None:
    # once: a second SIGTERM (the group's, then the pool's own) would land in the middle of the unwinding, where
    # it could leave a lock taken; multiprocessing ends a worker on SystemExit without a word
    signal.signal(signum, signal.SIG_IGN)
    raise SystemExit(exit_code(signum))
