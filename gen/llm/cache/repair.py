"""``gen cache repair``: every reply a damaged cache file still holds, copied into a new file that takes its
place; the damaged file is kept beside it (with its journal), so nothing is lost that could be read.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from gen.llm.cache.file import COLUMNS, INSERT, SCHEMA, check_cache_file

__all__ = ["repair"]


def repair(path: Path) -> tuple[int, int, Path]:
    """Copy every readable reply of the damaged cache at `path` into a new file, which takes its place; the
    damaged file is kept beside it. Returns (replies kept, damaged stretches skipped, the damaged file)."""
    check_cache_file(path)
    fresh = path.with_name(path.name + ".repairing")
    fresh.unlink(missing_ok=True)
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    target = sqlite3.connect(fresh)
    target.executescript(SCHEMA)
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
