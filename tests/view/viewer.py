"""Helpers of the viewer's tests: start `gen view` as a real process, wait for its URL, fetch pages, stop it."""

from __future__ import annotations

import hashlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.conftest import REPO

VIEW_MODULES = ("starlette", "uvicorn", "duckdb")
START_TIMEOUT_S = 60  # guards a hung start; measures nothing


@contextmanager
def running_viewer(folder: Path, *extra: str, env: dict[str, str] | None = None) -> Iterator[str]:
    """`python -m gen view FOLDER --port 0` in its own process; yields the URL it prints, then stops it with
    Ctrl-C's signal and checks it went without a traceback."""
    process = subprocess.Popen(
        [sys.executable, "-m", "gen", "view", str(folder), "--port", "0", *map(str, extra)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()], daemon=True).start()
    try:
        first = first_line(process, lines)
        url = next(word for word in first.split() if word.startswith("http://"))
        yield url.rstrip("/")
    finally:
        process.send_signal(signal.SIGINT)
        try:
            stderr = process.communicate(timeout=START_TIMEOUT_S)[1]
        except subprocess.TimeoutExpired:
            process.kill()
            raise
    assert "Traceback" not in stderr, stderr


def first_line(process: subprocess.Popen[str], lines: queue.Queue[str]) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        try:
            return lines.get(timeout=0.1)
        except queue.Empty:
            if process.poll() is not None:
                raise AssertionError(f"gen view ended ({process.returncode}): {process.communicate()[1]}") from None
    raise AssertionError("gen view printed no URL within a minute")


def fetch(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            return response.status, response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8")


PARTIAL_SEARCH = "The word index of"  # the note of a search answered while the word index is built


def wait_indexed(url: str) -> None:
    """Until the overview no longer says it is indexing and a search of the log is no longer partial (the word
    indexes follow the imports; the quickstart takes well under a second)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        status, page = fetch(url + "/")
        if status == 200 and "Indexing" not in page:
            status, page = fetch(url + "/records/log?q=the")
            if PARTIAL_SEARCH not in page:
                return
        time.sleep(0.1)
    raise AssertionError("the viewer was still indexing after a minute")


def tree_state(folder: Path) -> dict[str, tuple[int, int, str]]:
    """Every file under `folder` (hidden ones too) with its size, modification time and content hash."""
    return {
        str(path.relative_to(folder)): (
            path.stat().st_size,
            path.stat().st_mtime_ns,
            hashlib.sha256(path.read_bytes()).hexdigest(),
        )
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    } | {str(path.relative_to(folder)) + "/": (0, 0, "") for path in folder.rglob("*") if path.is_dir()}
