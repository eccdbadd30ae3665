"""A damaged LLM cache: found when it opens, said with the file and the way out, and `gen cache repair` keeps
every reply that can still be read (but for the one key beside each damaged stretch that a scan cannot step
over), counted here by reading each key on its own, a separate path from the repair's scan."""

from __future__ import annotations

import hashlib
import re
import sqlite3

import pytest

from gen.errors import GenError
from gen.llm.cache.store import Cache, CachedReply
from tests.conftest import run_cli

REPLIES = 400


def build(path) -> dict[str, str]:
    cache = Cache(path)
    written = {}
    for i in range(REPLIES):
        key = hashlib.sha256(str(i).encode()).hexdigest()
        written[key] = f"reply {i} " + "x" * 400
        cache.put(key, CachedReply(written[key], "stop", 10, 20, "m"))
    cache.close()
    with sqlite3.connect(path) as conn:  # everything into the main file, as after a clean exit
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return written


def damage(path) -> None:
    """Overwrite one page in the middle of the file with garbage."""
    size = path.stat().st_size
    page = 4096
    with path.open("r+b") as handle:
        handle.seek((size // page // 2) * page)
        handle.write(b"\xde\xad\xbe\xef" * (page // 4))


def readable_one_by_one(path, keys) -> dict[str, str]:
    found = {}
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as conn:
        for key in keys:
            try:
                row = conn.execute("SELECT text FROM replies WHERE key = ?", (key,)).fetchone()
            except sqlite3.DatabaseError:
                continue
            if row:
                found[key] = row[0]
    return found


def test_a_damaged_cache_is_named_and_repair_keeps_every_readable_reply(tmp_path, capsys):
    path = tmp_path / "llm.sqlite"
    written = build(path)
    damage(path)
    readable = readable_one_by_one(path, written)
    assert 0 < len(readable) < REPLIES  # the damage cost some replies, not all

    with pytest.raises(GenError) as opened:
        Cache(path)
    assert "the LLM cache file is damaged" in str(opened.value) and "gen cache repair" in str(opened.value)
    assert str(path) in str(opened.value)

    code, _, err = run_cli(["cache", "repair", "--cache-dir", tmp_path], capsys)
    assert code == 0, err
    kept = int(re.search(r"kept (\d+) replies in ", err)[1])
    stretches = int(re.search(r"; (\d+) damaged stretch", err)[1])
    # every reply a lookup can read is kept, but for at most the one key SQLite stores beside each damaged
    # stretch (in the page above it), which a scan cannot step over
    assert len(readable) - stretches <= kept <= len(readable) and stretches == 1
    aside = [p for p in tmp_path.iterdir() if re.fullmatch(r"llm\.sqlite\.damaged-\d+", p.name)]
    assert len(aside) == 1 and aside[0].stat().st_size > 0  # the damaged file is kept, not deleted
    repaired = Cache(path)
    try:
        got = repaired.get_many(written)
    finally:
        repaired.close()
    assert len(got) == kept and all(readable[key] == reply.text == written[key] for key, reply in got.items())


def test_repair_without_a_cache_says_so(tmp_path, capsys):
    code, _, err = run_cli(["cache", "repair", "--cache-dir", tmp_path / "none"], capsys)
    assert code == 2 and "there is no LLM cache here" in err
