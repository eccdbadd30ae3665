"""Persistent content-addressed cache of LLM replies (SQLite, WAL, one writer thread).

Key: sha256 of the canonical JSON of {endpoint base_url, the request body (model, rendered messages, every
sampling parameter, response format), sample index} — see :func:`cache_key`. Editing one template changes
the rendered messages of exactly the calls that use it, so exactly those miss.

Only good replies are stored: never errors, never truncated (``finish_reason: length``) replies. A row
holds the reply text, finish reason, token usage, the request's model and, for calls that asked for them, the
reply's log-probabilities (JSON) — no request headers, so no API key can reach the file.

Writes go through one writer thread that commits whatever is queued in one transaction (group commit);
with WAL and ``synchronous=NORMAL`` a committed row survives the process being killed, so an interrupted
run resumes with every reply it had stored. Reads use their own connection and never wait on the writer.
A damaged file (a disk fault, a copy cut short) is found when the cache opens (SQLite's quick_check) or when a
read fails, and stops the run with one message naming the file (gen/llm/cache/file.py, with the checks made
before SQLite opens the file and the lock waits); gen/llm/cache/repair.py copies every readable reply into a new
file and keeps the damaged one beside it (``gen cache repair``). Text is stored as received (``storable``).

Default location: ``$GEN_CACHE_DIR/llm.sqlite`` or ``~/.cache/gen/llm.sqlite``
(:func:`gen.llm.config.default_cache_path`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gen.errors import GenError
from gen.hashing import canonical_utf8
from gen.llm.cache.file import (
    INSERT,
    SCHEMA,
    add_logprobs_column,
    cache_fault,
    check_cache_file,
    check_intact,
    connect,
    is_lock,
    loaded,
    storable,
)

__all__ = ["KEY_VERSION", "Cache", "CachedReply", "Recent", "cache_key"]

KEY_VERSION = 1
GROUP_COMMIT_S = 0.02  # a reply is committed at most this long after it arrived
RECENT_KEYS = 1 << 16  # the puts whose keys are kept for steps in progress (Recent): about 8 MB


def cache_key(base_url: str, body: dict[str, Any], sample: int) -> str:
    """sha256 of canonical JSON of the endpoint URL, the full request body and the sample index."""
    material = {"v": KEY_VERSION, "base_url": base_url.rstrip("/"), "body": body, "sample": sample}
    return hashlib.sha256(canonical_utf8(material)).hexdigest()


@dataclass(frozen=True)
class CachedReply:
    text: str
    finish_reason: str | None
    input_tokens: int
    output_tokens: int
    model: str | None = None
    logprobs: Any = None  # the reply's logprobs object, for calls that asked for it


_STOP = object()


class Recent:
    """The keys of the latest puts. A step reads its keys from the cache when it starts (``Cache.get_many``); a
    key that was missing then can be there later only if it was put since, so the step asks :meth:`since`
    instead of reading the file again for every request it sends."""

    def __init__(self, size: int = RECENT_KEYS) -> None:
        self.size = size
        self.count = 0  # puts so far: a step notes it before reading its keys
        self._keys: dict[str, int] = {}  # key -> the put that last stored it, oldest first
        self._forgotten = 0  # the latest put whose key is no longer kept

    def add(self, key: str) -> None:
        self.count += 1
        self._keys.pop(key, None)  # (to the end, with its new count)
        self._keys[key] = self.count
        if len(self._keys) > self.size:
            oldest = next(iter(self._keys))
            self._forgotten = self._keys.pop(oldest)

    def since(self, count: int, key: str) -> bool:
        """Can `key` have been put after the first `count` puts? (True also when the window has moved past it.)"""
        return self._keys.get(key, self._forgotten) > count


def stored_row(key: str, reply: CachedReply) -> tuple:
    """The row INSERT writes for a reply, every text in it storable."""
    logprobs = None if reply.logprobs is None else json.dumps(reply.logprobs, ensure_ascii=False, separators=(",", ":"))
    text, finish, model = (storable(value) for value in (reply.text, reply.finish_reason, reply.model))
    return (key, text, finish, reply.input_tokens, reply.output_tokens, model, time.time(), storable(logprobs))


class Cache:
    """``Cache(path)``: ``get_many(keys)``, ``get(key)``, ``put(key, reply)``, ``flush()``, ``close()``."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path).expanduser()
        check_cache_file(self.path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            init = self._connect()
            check_intact(init, self.path)
            init.execute("PRAGMA journal_mode=WAL")
            init.executescript(SCHEMA)
            add_logprobs_column(init)
            init.commit()
            init.close()
            self._reader = self._connect(check_same_thread=False)
        except sqlite3.Error as exc:
            raise cache_fault(self.path, exc) from None
        except OSError as exc:
            raise GenError(
                f"cannot open the LLM cache: {exc}",
                file=str(self.path),
                expected="a writable folder (set GEN_CACHE_DIR or the run's cache_dir)",
            ) from None
        self._read_lock = threading.Lock()
        self._queue: queue.Queue = queue.Queue()
        self._error: BaseException | None = None
        self._pending = 0
        self._unwritten: dict[str, CachedReply] = {}
        self._pending_lock = threading.Condition()
        self.writes = 0
        self.recent = Recent()
        self._writer = threading.Thread(target=self._write_loop, name="gen-llm-cache-writer", daemon=True)
        self._writer.start()
        self._closed = False

    def _connect(self, check_same_thread: bool = True) -> sqlite3.Connection:
        return connect(self.path, check_same_thread)

    # -- reads ---------------------------------------------------------------------------------------
    def get_many(self, keys: Iterable[str]) -> dict[str, CachedReply]:
        found: dict[str, CachedReply] = {}
        unique = list(dict.fromkeys(keys))
        with self._pending_lock:  # read-your-writes: replies queued but not yet committed
            if self._unwritten:
                for key in unique:
                    if key in self._unwritten:
                        found[key] = self._unwritten[key]
        unique = [key for key in unique if key not in found]
        with self._read_lock:
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                marks = ",".join("?" * len(chunk))
                try:
                    rows = self._reader.execute(
                        "SELECT key, text, finish_reason, input_tokens, output_tokens, model, logprobs FROM replies "
                        f"WHERE key IN ({marks})",
                        chunk,
                    ).fetchall()
                except sqlite3.Error as exc:  # a page damaged after the check on open; a lock held too long
                    raise cache_fault(self.path, exc) from None
                for key, text, finish, tin, tout, model, logprobs in rows:
                    kept = json.loads(loaded(logprobs) or "null")
                    reply = CachedReply(loaded(text) or "", loaded(finish), tin or 0, tout or 0, loaded(model), kept)
                    found[key] = reply
        return found

    def get(self, key: str) -> CachedReply | None:
        return self.get_many([key]).get(key)

    def __len__(self) -> int:
        with self._read_lock:
            return self._reader.execute("SELECT COUNT(*) FROM replies").fetchone()[0]

    # -- writes --------------------------------------------------------------------------------------
    def put(self, key: str, reply: CachedReply) -> None:
        """Queue a reply for the writer thread (which commits it within milliseconds)."""
        if self._error is not None:
            self._raise_write_error()
        if self._closed:
            raise RuntimeError("cache is closed")
        with self._pending_lock:
            self._pending += 1
            self._unwritten[key] = reply
            self.recent.add(key)
        self._queue.put((key, reply))

    def flush(self, timeout: float = 60.0) -> None:
        """Wait until everything queued is committed."""
        deadline = time.monotonic() + timeout
        with self._pending_lock:
            while self._pending and self._error is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._pending_lock.wait(remaining)
        if self._error is not None:
            self._raise_write_error()

    def close(self) -> None:
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self._closed = True
            self._queue.put(_STOP)
            self._writer.join(30)
            with self._read_lock:
                self._reader.close()

    def _raise_write_error(self) -> None:
        if isinstance(self._error, sqlite3.Error) and is_lock(self._error):
            raise cache_fault(self.path, self._error, self._pending)
        raise GenError(
            f"cannot write the LLM cache: {self._error}",
            file=str(self.path),
            expected="free disk space and a writable cache folder",
        )

    def _write_loop(self) -> None:
        conn = None
        try:
            conn = self._connect()
            while True:
                item = self._queue.get()
                if item is not _STOP:
                    time.sleep(GROUP_COMMIT_S)  # let more replies arrive: one transaction for many rows
                batch = [item]
                while True:  # group commit: take whatever else is already queued
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                rows = [stored_row(*entry) for entry in batch if entry is not _STOP]
                if rows:
                    conn.execute("BEGIN")
                    conn.executemany(INSERT, rows)
                    conn.execute("COMMIT")
                    self.writes += len(rows)
                with self._pending_lock:
                    self._pending -= len(rows)
                    for row in rows:
                        self._unwritten.pop(row[0], None)
                    self._pending_lock.notify_all()
                if any(entry is _STOP for entry in batch):
                    return
        except BaseException as exc:  # reported to the engine through put()/flush()
            self._error = exc
            with self._pending_lock:
                self._pending_lock.notify_all()
        finally:
            if conn is not None:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
