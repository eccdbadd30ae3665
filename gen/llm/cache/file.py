"""The cache's SQLite file: every connection to it, what it must be before SQLite opens it, and the one message
for whatever SQLite then says about it.

* :func:`connect` makes every connection to the file (the replies' reader and writer, the Batch API's ledger):
  each waits LOCK_WAIT_S for another process's lock;
* :func:`check_cache_file` names a path that is no SQLite file at all (a folder, a FIFO, a text file) before
  SQLite opens it (SQLite would call a folder "unable to open", block on a FIFO, and call a text file damaged);
* :func:`cache_fault` is the one message for an error SQLite raised on the file: locked by another process (it
  was waited for; never taken for damage, since `gen cache repair` would move a sound file aside) or damaged;
* :func:`storable` / :func:`loaded`: a string UTF-8 cannot hold (a lone surrogate) goes in as a BLOB of its
  ``surrogatepass`` bytes and comes back as the same string, so no reply can stop the writer.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

from gen.errors import GenError

LOCK_WAIT_S = 60.0  # how long a read or write waits for another process's lock on the file before giving up
SQLITE_HEADER = b"SQLite format 3\x00"  # the first 16 bytes of every SQLite database file

SCHEMA = """
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
COLUMNS = "key, text, finish_reason, input_tokens, output_tokens, model, created, logprobs"
INSERT = f"INSERT OR REPLACE INTO replies ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?)"


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


def add_logprobs_column(conn: sqlite3.Connection) -> None:
    """Caches written before log-probabilities were kept get the column (empty for their rows)."""
    names = [row[1] for row in conn.execute("PRAGMA table_info(replies)")]
    if "logprobs" not in names:
        conn.execute("ALTER TABLE replies ADD COLUMN logprobs TEXT")
