"""The batches a cache knows: which Batch API batch holds which requests, and how far it got.

Kept in the cache's own SQLite file (tables ``batches`` and ``batch_requests``, beside the replies), written and
committed the moment a batch is created, so a run killed while a batch is in flight finds it again and polls it
instead of sending its requests a second time. Only ids, counts and the endpoint's URL and key variable name are
kept: never a key. ``gen batches`` lists them, cancels one and forgets one.

A batch leaves the set a run polls in one of three ways: it is collected (its results are in the cache), it is
abandoned (the endpoint answered 404 for it: another key, or a batch the provider purged; it stays listed with
the status ``abandoned``), or it is forgotten (``gen batches forget``: its rows are deleted). In the last two
cases its requests that have no reply in the cache are sent again, so a batch the endpoint no longer knows can
never leave a cache unable to run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from gen.llm.cache.file import connect

__all__ = ["ABANDONED", "TERMINAL", "BatchRow", "Ledger"]

TERMINAL = {"completed", "failed", "expired", "cancelled"}
ABANDONED = "abandoned"  # gen's own status: the endpoint no longer knows the batch

_SCHEMA = """
CREATE TABLE IF NOT EXISTS batches (
    id TEXT PRIMARY KEY,
    endpoint TEXT NOT NULL,
    base_url TEXT NOT NULL,
    api_key_env TEXT,
    step TEXT NOT NULL,
    status TEXT NOT NULL,
    requests INTEGER NOT NULL,
    completed INTEGER NOT NULL DEFAULT 0,
    failed INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    collected INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS batch_requests (
    key TEXT NOT NULL,
    batch_id TEXT NOT NULL,
    PRIMARY KEY (key, batch_id)
) WITHOUT ROWID;
"""

_COLUMNS = "id, endpoint, base_url, api_key_env, step, status, requests, completed, failed, created, updated, collected"


@dataclass(frozen=True)
class BatchRow:
    id: str
    endpoint: str
    base_url: str
    api_key_env: str | None
    step: str
    status: str
    requests: int
    completed: int
    failed: int
    created: float
    updated: float
    collected: bool


class Ledger:
    """``Ledger(cache_path)``: ``add``, ``update``, ``collected``, ``abandon``, ``forget``, ``open_for(keys,
    base_url)``, ``all()``, ``get``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = connect(path, check_same_thread=False)
        self._conn.executescript(_SCHEMA)
        self._lock = threading.Lock()

    def add(self, batch_id: str, endpoint: str, base_url: str, key_env: str | None, step: str, keys: list[str]) -> None:
        now = time.time()
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            # an id is never reused by a real endpoint; a test server restarting its count may
            self._conn.execute("DELETE FROM batch_requests WHERE batch_id=?", (batch_id,))
            self._conn.execute(
                f"INSERT OR REPLACE INTO batches ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,0,0,?,?,0)",
                (batch_id, endpoint, base_url, key_env, step, "validating", len(keys), now, now),
            )
            self._conn.executemany(
                "INSERT OR IGNORE INTO batch_requests (key, batch_id) VALUES (?,?)", ((key, batch_id) for key in keys)
            )
            self._conn.execute("COMMIT")

    def update(self, batch_id: str, status: str, completed: int, failed: int) -> None:
        with self._lock:
            self._conn.execute(
                "UPDATE batches SET status=?, completed=?, failed=?, updated=? WHERE id=?",
                (status, completed, failed, time.time(), batch_id),
            )

    def collected(self, batch_id: str) -> None:
        """Its results are in the cache (or were handed to the run): it is never polled again."""
        with self._lock:
            self._conn.execute("UPDATE batches SET collected=1, updated=? WHERE id=?", (time.time(), batch_id))

    def abandon(self, batch_id: str) -> None:
        """The endpoint no longer knows the batch: it is never polled again (its requests go out anew)."""
        with self._lock:
            self._conn.execute("UPDATE batches SET status=?, updated=? WHERE id=?", (ABANDONED, time.time(), batch_id))

    def forget(self, batch_id: str) -> bool:
        """Delete the batch and the list of its requests; False when the ledger holds no such batch."""
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            gone = self._conn.execute("DELETE FROM batches WHERE id=?", (batch_id,)).rowcount
            self._conn.execute("DELETE FROM batch_requests WHERE batch_id=?", (batch_id,))
            self._conn.execute("COMMIT")
        return gone > 0

    def open_for(self, keys: Iterable[str], base_url: str) -> dict[str, list[str]]:
        """Batches at this URL still to poll (neither collected nor abandoned) that hold any of these keys:
        batch id -> those keys."""
        found: dict[str, list[str]] = {}
        unique = list(dict.fromkeys(keys))
        with self._lock:
            for start in range(0, len(unique), 500):
                chunk = unique[start : start + 500]
                rows = self._conn.execute(
                    "SELECT r.batch_id, r.key FROM batch_requests r JOIN batches b ON b.id = r.batch_id "
                    f"WHERE b.collected = 0 AND b.status != ? AND b.base_url = ? "
                    f"AND r.key IN ({','.join('?' * len(chunk))})",
                    (ABANDONED, base_url, *chunk),
                ).fetchall()
                for batch_id, key in rows:
                    found.setdefault(batch_id, []).append(key)
        return found

    def keys_of(self, batch_id: str) -> list[str]:
        with self._lock:
            return [
                row[0] for row in self._conn.execute("SELECT key FROM batch_requests WHERE batch_id=?", (batch_id,))
            ]

    def all(self) -> list[BatchRow]:
        with self._lock:
            rows = self._conn.execute(f"SELECT {_COLUMNS} FROM batches ORDER BY created").fetchall()
        return [_row(row) for row in rows]

    def get(self, batch_id: str) -> BatchRow | None:
        with self._lock:
            row = self._conn.execute(f"SELECT {_COLUMNS} FROM batches WHERE id=?", (batch_id,)).fetchone()
        return _row(row) if row else None

    def close(self) -> None:
        with self._lock:
            self._conn.close()


def _row(row: tuple) -> BatchRow:
    return BatchRow(*row)  # collected comes back as 0 or 1
