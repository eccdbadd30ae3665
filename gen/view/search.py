"""Text search over a config: a SQLite FTS5 index (Python's own sqlite3, nothing to download) built once per
config from its text fields, beside the DuckDB index in the same cache entry, so a search is a lookup in an
inverted index rather than a scan of every record.

What a search finds: the records holding every word typed, as whole words (`marathon` finds "a marathon" and
"half-marathon", not "marathons"), letters folded to lower case and without accents; a word is a run of letters
and digits (anything else separates words, "_" too). Whole words, because a word's list of records is read
lazily, page by page, where a prefix would merge the lists of every word it starts (seconds, at 100 copies of
locomo10). The index keeps no text of its own (contentless, no positions): it only answers which records hold a
word."""

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
    """Write the index of `rows` (batches of record number, text) to `path`, through a partial file renamed at
    the end: an index that exists is whole."""
    partial = path.with_name(path.name + ".partial")
    partial.unlink(missing_ok=True)
    con = sqlite3.connect(partial)
    try:
        con.execute("PRAGMA journal_mode=OFF")
        con.execute("PRAGMA synchronous=OFF")
        con.execute(
            "CREATE VIRTUAL TABLE words USING fts5(text, content='', detail=none, "
            "tokenize='unicode61 remove_diacritics 2')"
        )
        for batch in rows:
            con.executemany("INSERT INTO words(rowid, text) VALUES (?, ?)", batch)
            con.commit()
        con.execute("INSERT INTO words(words) VALUES ('optimize')")
        con.commit()
    finally:
        con.close()
    partial.replace(path)


class Search:
    """Lookups in one config's index (a connection per call: pages are served from several threads)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def connect(self) -> sqlite3.Connection:
        return sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)

    def count(self, text: str) -> int:
        with closing(self.connect()) as con:
            row = con.execute("SELECT count(*) FROM words WHERE words MATCH ?", [match_expression(text)]).fetchone()
        return int(row[0])

    def numbers(self, text: str, offset: int = 0, limit: int = -1) -> list[int]:
        """Record numbers (DuckDB rowids) of the matches in file order, `limit` of them from `offset`."""
        with closing(self.connect()) as con:
            found = con.execute(
                "SELECT rowid FROM words WHERE words MATCH ? ORDER BY rowid LIMIT ? OFFSET ?",
                [match_expression(text), limit, offset],
            ).fetchall()
        return [int(row[0]) for row in found]
