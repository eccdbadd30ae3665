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
read fails, and stops the run with one message naming the file; ``repair`` copies every readable reply into a
new file and keeps the damaged one beside it (``gen cache repair``). A path that is no SQLite file at all (a
folder, a FIFO, a text file) is named as such before SQLite opens it (:func:`check_cache_file`), and a file
another process keeps locked is waited for, LOCK_WAIT_S at most, then named as locked, never as damaged
(:func:`cache_fault`): `gen cache repair` would move a sound file aside.

Text is stored as received: a string UTF-8 cannot hold (a lone surrogate) goes in as a BLOB of its
``surrogatepass`` bytes and comes back as the same string (:func:`storable`), so no reply can stop the writer.

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

__all__ = ["KEY_VERSION", "Cache", "CachedReply", "cache_key"]

KEY_VERSION = 1
GROUP_COMMIT_S = 0.02  # a reply is committed at most this long after it arrived
LOCK_WAIT_S = 60.0  # how long a read or write waits for another process's lock on the file before giving up
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file
RECENT_KEYS = 1 << 16  # the puts whose keys are kept for steps in progress (Recent): about 8 MB

_SCHEMA = """
CREATE TABLE IF NOT EXISTS replies (
    key TEXT PRIMARY KEY,
    text TEXT NOT NULL,
    finish_reason TEXT,
    input_tokens INTEGER,
    output_tokens INTEGER,
    model TEXT,
    created REAL,
    logprobs TEXT
) WITHOUT ROWID;
"""


def cache_key(base_url: str, body: dict[str, Any], sample: int) -> str:
    """sha256 of canonical JSON of the endpoint URL, the full request body and the sample index."""
    material = {"v": KEY_VERSION, "base_url": base_url.rstrip("/"), "body": body, "sample": sample}
    return hashlib.sha256(canonical_utf8(material)).hexdigest()


def connect(path: Path, check_same_thread: bool = True) -> sqlite3.Connection:
    """A connection to the cache file that waits LOCK_WAIT_S for another process's lock (every connection to the
    file is made here: the replies, the reader, the writer thread and the Batch API's ledger)."""
    conn = sqlite3.connect(path, timeout=LOCK_WAIT_S, check_same_thread=check_same_thread, isolation_level=None)
    conn.execute(f"PRAGMA busy_timeout={int(LOCK_WAIT_S * 1000)}")
    conn.execute("PRAGMA synchronous=NORMAL")
    return conn


def check_cache_file(path: Path) -> None:
    """A GenError when `path` cannot be a cache file: a folder, a FIFO or device, or a file that is not SQLite.
    (SQLite would call a folder "unable to open", block on a FIFO, and call a text file damaged.)"""
    if not path.exists() and not path.is_symlink():
        return  # a new cache
    if path.is_dir():
        raise not_a_cache(path, "the LLM cache path is a folder, not a SQLite file")
    if not path.is_file():
        raise not_a_cache(path, "the LLM cache path is not a regular file (a FIFO, a socket or a device)")
    try:
        with path.open("rb") as handle:
            head = handle.read(len(SQLITE_HEADER))
    except OSError as exc:
        raise GenError(f"cannot read the LLM cache: {exc}", file=str(path), expected="a readable file") from None
    if head and head != SQLITE_HEADER:
        raise not_a_cache(path, f"the LLM cache file is not a SQLite file (it begins {head[:8]!r})")


def not_a_cache(path: Path, message: str) -> GenError:
    return GenError(message, file=str(path), expected="an llm.sqlite written by gen, or another --cache-dir")


def cache_fault(path: Path, exc: sqlite3.Error, pending: int = 0) -> GenError:
    """The one message for an error SQLite raised on the cache file: locked by another process (it was waited
    for), or damaged. ``pending``: replies received but not yet stored."""
    detail = str(exc)
    if is_lock(exc):
        replies = f"{pending} reply" if pending == 1 else f"{pending} replies"
        unstored = f"; {replies} received in this run could not be stored" if pending else ""
        return GenError(
            f"the LLM cache file is locked by another process (waited {LOCK_WAIT_S:g}s; SQLite: {detail}){unstored}",
            file=str(path),
            expected="the other gen run (or program) using this file to finish, or another --cache-dir",
        )
    if isinstance(exc, sqlite3.DatabaseError):
        return damaged(path, detail)
    return GenError(
        f"cannot use the LLM cache: {detail}", file=str(path), expected="a writable folder and free disk space"
    )


def is_lock(exc: sqlite3.Error) -> bool:
    """SQLite gave up waiting for another connection's lock (SQLITE_BUSY, SQLITE_LOCKED)."""
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in str(exc) or "busy" in str(exc))


def storable(value: str | None) -> str | bytes | None:
    """`value` as SQLite can hold it losslessly: itself, or the BLOB of its surrogatepass UTF-8 when UTF-8 cannot
    hold it (a lone surrogate); :func:`loaded` gives the same string back."""
    if value is None or value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")
    return value


def loaded(value: str | bytes | None) -> str | None:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


def check_intact(conn: sqlite3.Connection, path: Path) -> None:
    found = [row[0] for row in conn.execute("PRAGMA quick_check").fetchall()]
    if found != ["ok"]:
        raise damaged(path, found[0])


def damaged(path: Path, detail: str) -> GenError:
    return GenError(
        f"the LLM cache file is damaged (SQLite: {detail}); nothing more was asked of the model",
        file=str(path),
        expected="`gen cache repair` (it keeps every readable reply and moves the damaged file aside), "
        "or another --cache-dir",
    )


COLUMNS = "key, text, finish_reason, input_tokens, output_tokens, model, created, logprobs"
INSERT = f"INSERT OR REPLACE INTO replies ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?)"


def add_logprobs_column(conn: sqlite3.Connection) -> None:
    """Caches written before log-probabilities were kept get the column (empty for their rows)."""
    names = [row[1] for row in conn.execute("PRAGMA table_info(replies)")]
    if "logprobs" not in names:
        conn.execute("ALTER TABLE replies ADD COLUMN logprobs TEXT")


def repair(path: Path) -> tuple[int, int, Path]:
    """Copy every readable reply of the damaged cache at `path` into a new file, which takes its place; the
    damaged file is kept beside it. Returns (replies kept, damaged stretches skipped, the damaged file)."""
    check_cache_file(path)
    fresh = path.with_name(path.name + ".repairing")
    fresh.unlink(missing_ok=True)
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    target = sqlite3.connect(fresh)
    target.executescript(_SCHEMA)
    try:
        rows, skipped = salvage(source)
        target.executemany(INSERT, rows)
        target.commit()
    finally:
        source.close()
        target.close()
    aside = path.with_name(f"{path.name}.damaged-{int(time.time())}")
    path.rename(aside)
    for suffix in ("-wal", "-shm"):  # the damaged file's journal goes with it
        journal = path.with_name(path.name + suffix)
        if journal.exists():
            journal.rename(aside.with_name(aside.name + suffix))
    fresh.rename(path)
    return len(rows), skipped, aside


def salvage(source: sqlite3.Connection) -> tuple[list[tuple], int]:
    """Every row that can be read, in key order: a scan that meets a damaged page resumes at the first key the
    database can still reach after it, found by halving the key space (keys are 64 hex digits), so only the
    damaged pages' own rows are lost, and at most one key beside each (stored in the page above, which the scan
    cannot step onto from the damaged side)."""
    rows: list[tuple] = []
    start: str | None = ""
    try:
        names = [row[1] for row in source.execute("PRAGMA table_info(replies)")]
    except sqlite3.DatabaseError:
        names = []
    columns = COLUMNS if "logprobs" in names else COLUMNS.replace("logprobs", "NULL")  # a cache from before it
    skipped = 0
    while start is not None:
        try:
            for row in source.execute(f"SELECT {columns} FROM replies WHERE key >= ? ORDER BY key", (start,)):
                rows.append(row)
            break
        except sqlite3.DatabaseError:
            skipped += 1
            start = next_reachable(source, rows[-1][0] if rows else "")
            if start is not None and rows and start <= rows[-1][0]:
                break  # the damage is where the scan restarts: nothing further can be reached
    return rows, skipped


def next_reachable(source: sqlite3.Connection, after: str) -> str | None:
    """The first key above `after` that a lookup can reach, or None."""
    low = int(after, 16) + 1 if after else 0
    high = 16**64
    while low < high:  # the smallest bound whose lookup works: bounds past the damage all do
        middle = (low + high) // 2
        if first_key_from(source, f"{middle:064x}") is False:
            low = middle + 1
        else:
            high = middle
    found = first_key_from(source, f"{low:064x}") if low < 16**64 else None
    return found if isinstance(found, str) else None


def first_key_from(source: sqlite3.Connection, bound: str) -> str | bool | None:
    """The first key >= bound; None when there is none; False when the lookup meets a damaged page."""
    try:
        row = source.execute("SELECT key FROM replies WHERE key >= ? ORDER BY key LIMIT 1", (bound,)).fetchone()
    except sqlite3.DatabaseError:
        return False
    return row[0] if row else None


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
            init.executescript(_SCHEMA)
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
