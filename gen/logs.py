"""gen's messages go through `logging`, under the "gen" logger: each module logs to `logging.getLogger(__name__)`.

The command line shows them on stderr as plain lines (`gen -q`: warnings and errors only; `gen -v`: debug lines
too), and `gen run` also keeps its own log file, every level with a timestamp, beside the LLM cache:
<cache folder>/logs/<recipe name>.log, never in the run folder that is published. A line that a live progress
display has already shown is logged with `extra={"shown": True}`: the file keeps it, stderr does not repeat it.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from pathlib import Path

LOGGER = logging.getLogger("gen")
LEVELS = {-1: logging.WARNING, 0: logging.INFO, 1: logging.DEBUG}


class StderrHandler(logging.StreamHandler):
    """Writes to whatever sys.stderr is when a message comes (a test's capture, a redirected stream), not to
    the stream of the moment it was made."""

    @property
    def stream(self):
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:  # StreamHandler.__init__ sets it; sys.stderr is always used
        pass


class NotShownYet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not getattr(record, "shown", False)


def configure(verbosity: int) -> None:
    """Show gen's messages on stderr (as it is now: under pytest's capture, the captured stream) at the level
    -q (-1), the default (0) or -v (1) asks for."""
    unconfigure()
    handler = StderrHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    handler.setLevel(LEVELS[max(-1, min(1, verbosity))])
    handler.addFilter(NotShownYet())
    handler.gen_stderr = True  # type: ignore[attr-defined]  # marks the handler configure() owns
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.DEBUG)
    LOGGER.propagate = False


def unconfigure() -> None:
    """The command line's messages off again (its command has ended): a program that goes on to call gen's API
    gets a library's logging, passed on to its own handlers, as if no command had run."""
    for handler in [h for h in LOGGER.handlers if getattr(h, "gen_stderr", False)]:
        LOGGER.removeHandler(handler)
    LOGGER.setLevel(logging.NOTSET)
    LOGGER.propagate = True


@contextlib.contextmanager
def run_log(path: Path) -> Iterator[None]:
    """Every message of the block, debug lines included, also to `path` (replaced; one file per recipe name)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.FileHandler(path, mode="w", encoding="utf-8")
    except OSError as exc:  # a log file that cannot be written must not stop the run
        LOGGER.warning("warning: no run log at %s (%s)", path, exc.strerror or exc)
        yield
        return
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    handler.setLevel(logging.DEBUG)
    previous = LOGGER.level
    LOGGER.addHandler(handler)
    LOGGER.setLevel(logging.DEBUG)
    try:
        LOGGER.debug("run log: %s", path)
        yield
    finally:
        LOGGER.removeHandler(handler)
        LOGGER.setLevel(previous)
        handler.close()
