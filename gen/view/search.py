"""Text search over a config: a SQLite FTS5 index (Python's own sqlite3, nothing to download) built once per
config from its text fields, beside the DuckDB index in the same cache entry, so a search is a lookup in an
inverted index rather than a scan of every record.

What a search finds: the records holding every word typed, as whole words (`marathon` finds "a marathon" and
"half-marathon", not "marathons"), letters folded to lower case and without accents; a word is a run of letters
and digits (anything else separates words, "_" too). Whole words, because a word's list of records is read
lazily, page by page, where a prefix would merge the lists of every word it starts (seconds, at 100 copies of
locomo10). The index keeps no text of its own (contentless, no positions): it only answers which records hold a
word.

While it is built, it can already be searched: the builder writes it in record order and commits every batch
(SQLite's write-ahead log lets readers in meanwhile), and a search of a partial index (Search with `below`)
looks only at the records numbered below what was committed, so it is exactly the search of those records,
never a mixture. Whether an index file is whole is recorded by the caller (gen/view/index.py), not by its name."""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from pathlib import Path

WORD = re.compile(r"[^\W_]+")  # as FTS5's unicode61 tokenizer splits text
MAX_WORDS = 16  # words of one search (each one more lookup)
BATCH = 20_000  # rows read from DuckDB and written to SQLite at a time


class SearchError(Exception):
    """A search the index cannot answer (no word in it)."""


def match_expression(text: str) -> str:
    """The FTS5 query for what a user typed: every word ("word"), all of them required."""
    words = WORD.findall(text)[:MAX_WORDS]
    if not words:
        raise SearchError(f"search for a word (letters or digits), not {text[:40]!r}")
    return " ".join(f'"{word}"' for word in words)


def build(path: Path, rows: Iterable[list[tuple[int, str]]]) -> None:
    """Write the index of `rows` (batches of record number and text, in record order) to `path`, committing each
    batch: a reader sees whole batches only. A file left by a build that did not finish is started again. The
    file is left in WAL mode: a read-only search of it makes the log files beside it when it needs them."""
    for stale in (path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        stale.unlink(missing_ok=True)
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA journal_mode=WAL")  # searches read while batches are written
        con.execute("PRAGMA synchronous=OFF")
        con.execute(
            "CREATE VIRTUAL TABLE words USING fts5(text, content='', detail=none, "
            "tokenize='unicode61 remove_diacritics 2')"
        )
        for batch in rows:
            con.executemany("INSERT INTO words(rowid, text) VALUES (?, ?)", batch)
            con.commit()
        con.execute("INSERT INTO words(words) VALUES ('optimize')")
        con.commit()  # the file stays in WAL mode: leaving it needs a moment without any reader, which SQLite
        # does not wait for ("database is locked" at once) and searches, polled, may never give
    finally:
        con.close()


class Search:
    """Lookups in one config's index (a connection per call: pages are served from several threads); with
    `below`, an index still being built, searched among the records numbered below it (those committed)."""

    def __init__(self, path: Path, below: int | None = None) -> None:
        self.path = path
        self.below = below

    def connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)

    def matching(self) -> tuple[str, list[int]]:
        """The condition every lookup adds: the records a partial index covers."""
        return (" AND rowid < ?", [self.below]) if self.below is not None else ("", [])

    def count(self, text: str) -> int:
        extra, params = self.matching()
        with closing(self.connect()) as con:
            row = con.execute(
                f"SELECT count(*) FROM words WHERE words MATCH ?{extra}", [match_expression(text), *params]
            ).fetchone()
        return int(row[0])

    def numbers(self, text: str, offset: int = 0, limit: int = -1) -> list[int]:
        """Record numbers (DuckDB rowids) of the matches in file order, `limit` of them from `offset`."""
        extra, params = self.matching()
        with closing(self.connect()) as con:
            found = con.execute(
                f"SELECT rowid FROM words WHERE words MATCH ?{extra} ORDER BY rowid LIMIT ? OFFSET ?",
                [match_expression(text), *params, limit, offset],
            ).fetchall()
        return [int(row[0]) for row in found]
