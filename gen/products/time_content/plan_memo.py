"""Plans kept beside the LLM cache (``plans.sqlite`` in the cache folder): the anchors, reference kinds and time
phrases chosen for each conversation, so that a run over conversations planned before (a re-run, a resumed
run, `gen plan` then `gen run`) reads their plans instead of choosing the anchors again.

A plan is a pure function of its inputs, and its key covers every one of them: the conversation as placed on
the clock (each response whole, in order; the speakers; the id), the product's options, the seed, and the code
that chooses (the source of the modules that plan, and the Python version, whose seeded generator draws). Change
any of them and the key changes: that conversation is planned again. The time phrases are not stored: each
question keeps the position of its phrase among those its time reference renders to (what the seeded choice
draws depends only on their number), and the phrases are rendered again from the template as it is now; if
their number has changed, the conversation is planned again.

The memo is only a shortcut: one that cannot be opened, read or written is left aside, and the plans are made
as if it were not there.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import orjson

from gen.products import lexical
from gen.products.time_content import anchors
from gen.products.time_content.anchors import Anchor, Slot
from gen.timeline import Timeline

FILE = "plans.sqlite"
FORMAT = 1  # of the stored plans; a new format starts a new set of keys
BATCH = 500  # keys per query, well under SQLite's limit on variables

_SCHEMA = "CREATE TABLE IF NOT EXISTS plans (key TEXT PRIMARY KEY, plan TEXT NOT NULL) WITHOUT ROWID"
_ERRORS = (sqlite3.Error, OSError)


@dataclass(frozen=True)
class Planned:
    """One question of a plan: its slot, and its time phrase as a position among the phrases its reference
    renders to, and their number."""

    slot: Slot
    phrase: int
    phrases: int


@cache
def code_digest(planner: ModuleType) -> str | None:
    """sha256 of the source of the modules that plan (`planner`, this one, anchor selection, word stems) and
    of the Python version (its seeded generator draws the choices); None when a source cannot be read (then
    no plan is kept or read)."""
    digest = hashlib.sha256()
    try:
        for module in (planner, sys.modules[__name__], anchors, lexical):
            digest.update(Path(module.__file__ or "").read_bytes())
    except OSError:
        return None
    digest.update(str(sys.version_info[:2]).encode())
    return digest.hexdigest()


def plan_key(timeline: Timeline, settings: dict[str, Any], code: str | None) -> str:
    """The key of one conversation's plan: its timeline whole, the planning `settings` (options and seed)
    and the `code` digest."""
    material = {
        "format": FORMAT,
        "code": code,
        "settings": settings,
        "conversation": timeline.conversation_id,
        "speakers": list(timeline.conversation.speakers),
        "responses": timeline.responses,  # every field of every response, the timestamps whole
    }
    return hashlib.sha256(orjson.dumps(material, option=orjson.OPT_SORT_KEYS)).hexdigest()


def encode(plan: Sequence[Planned]) -> str:
    return json.dumps([row(p.slot, p.phrase, p.phrases) for p in plan])


def row(slot: Slot, phrase: int, phrases: int) -> list:
    """A question of a plan as stored: its slot (the anchor by its first response and size), its phrase."""
    anchor = slot.anchor
    start, size = anchor.indices[0], anchor.size
    return [slot.number, start, size, anchor.speaker, slot.kind, slot.recurrence, list(slot.related), phrase, phrases]


def decode(text: str, timeline: Timeline) -> list[Planned]:
    """A stored plan on its timeline; ValueError when it does not fit the timeline."""
    plan = []
    responses = timeline.responses
    for number, start, size, speaker, kind, recurrence, related, phrase, phrases in json.loads(text):
        window = responses[start : start + size]
        if len(window) != size or size < 1 or start < 0 or not all(0 <= i < len(responses) for i in related):
            raise ValueError("a stored anchor lies outside the conversation")
        anchor = Anchor(timeline.conversation_id, window, speaker)
        plan.append(Planned(Slot(number, anchor, kind, recurrence, tuple(related)), phrase, phrases))
    return plan


class PlanMemo:
    """The memo of one planning pass. Without a folder, or with one it cannot use, it finds nothing and keeps
    nothing."""

    def __init__(self, folder: Path | None) -> None:
        self.conn: sqlite3.Connection | None = None
        if folder is None:
            return
        try:
            self.conn = sqlite3.connect(folder / FILE, timeout=1.0)
            self.conn.execute(_SCHEMA)
        except _ERRORS:
            self.close()

    def plans(self, keys: Sequence[str], timelines: Sequence[Timeline]) -> dict[str, list[Planned]]:
        """key -> plan of the keys found (keys[i] is the key of timelines[i])."""
        if self.conn is None or not keys:
            return {}
        rows: dict[str, str] = {}
        try:
            for first in range(0, len(keys), BATCH):
                part = keys[first : first + BATCH]
                query = f"SELECT key, plan FROM plans WHERE key IN ({','.join('?' * len(part))})"
                rows.update(self.conn.execute(query, part))
        except _ERRORS:
            return {}
        found = {}
        for key, timeline in zip(keys, timelines):
            if key in rows:
                try:
                    found[key] = decode(rows[key], timeline)
                except (ValueError, TypeError):  # a damaged row: that conversation is planned again
                    continue
        return found

    def keep(self, plans: Iterable[tuple[str, list[Planned]]]) -> None:
        if self.conn is None:
            return
        try:
            with self.conn:
                self.conn.executemany("INSERT OR REPLACE INTO plans VALUES (?, ?)", [(k, encode(p)) for k, p in plans])
        except _ERRORS:
            pass  # another process holds the file, or the folder is read-only: the plans are made again next time

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
