"""A defect's traceback goes to a file, not to the terminal.

An exception that escapes a command and is not a GenError is a bug (in gen, or in a plugin it loaded): the
user can do nothing about it but report it, and a screenful of traceback buries the one thing to do. The CLI
(gen/cli/main.py, main) prints one line naming the exception and the file written here, which holds the traceback.

Where: $XDG_STATE_HOME/gen/crashes/ (by default ~/.local/state/gen/crashes/), the XDG place for what a program
leaves behind for later; when it cannot be written, the system's temporary folder. One file per crash,
crash-<UTC time>-<pid>.log, written to a temporary name and renamed, so a file there is always whole.

No secrets: the traceback is formatted as Python prints it (frames, source lines, the message and its notes),
never with local variables; the values of environment variables named like secrets (…KEY, …TOKEN, …SECRET,
…PASSWORD) and the credentials and query strings of URLs are replaced by "***" in the file and in the line.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import time
import traceback
from pathlib import Path

from gen.errors import redact_urls

__all__ = ["crash_folder", "summary", "write_crash_log"]

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL", re.IGNORECASE)
SHORTEST_SECRET = 8  # shorter values would blank out ordinary words
LONGEST_SUMMARY = 300  # characters of the exception's message on the terminal line


def crash_folder() -> Path:
    """$XDG_STATE_HOME/gen/crashes, or ~/.local/state/gen/crashes when XDG_STATE_HOME is unset or relative."""
    base = os.environ.get("XDG_STATE_HOME", "")
    state = Path(base) if base and Path(base).is_absolute() else Path.home() / ".local" / "state"
    return state / "gen" / "crashes"


def scrub(text: str) -> str:
    """`text` without the secrets of this process's environment and of URLs."""
    for name, value in os.environ.items():
        if SECRET_NAME.search(name) and len(value) >= SHORTEST_SECRET and value in text:
            text = text.replace(value, "***")
    return redact_urls(text)


def summary(exc: BaseException) -> str:
    """The exception in a few words for the terminal: its type and the first line of its message."""
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if len(message) > LONGEST_SUMMARY:
        message = message[:LONGEST_SUMMARY] + "…"
    return scrub(f"{type(exc).__name__}: {message}" if message else type(exc).__name__)


def report_text(exc: BaseException) -> str:
    from importlib.metadata import PackageNotFoundError, version

    from gen.about import DISTRIBUTION

    try:
        gen_version = version(DISTRIBUTION)
    except PackageNotFoundError:
        gen_version = "unknown"
    header = [
        f"gen {gen_version}, Python {sys.version.split()[0]} on {sys.platform}",
        f"time: {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}",
        f"command: gen {' '.join(sys.argv[1:])}",
        "",
    ]
    trace = "".join(traceback.format_exception(exc))
    return scrub("\n".join(header) + trace)


def write_crash_log(exc: BaseException) -> Path | None:
    """Write the traceback of `exc`; returns the file, or None when neither place could be written."""
    text = report_text(exc).encode("utf-8", errors="replace")
    name = f"crash-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}.log"
    for folder in (crash_folder(), Path(tempfile.gettempdir())):
        path = folder / name
        partial = folder / f".{name}.partial"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            partial.write_bytes(text)
            os.replace(partial, path)
        except OSError:
            with contextlib.suppress(OSError):
                partial.unlink(missing_ok=True)
            continue
        return path
    return None
