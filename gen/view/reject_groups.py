"""Rejects grouped by the kind of their reason: the reason with what differs from item to item taken out (quoted
text, ids and paths, names, numbers), so one failure met by many items is one group, not one group per name or
attempt count. The Rejects page and the overview's plot both group through this module, so they always agree.

Each distinct reason's kind is worked out once, in Python, into a table beside the rejects in the index; a page
then groups and lists the rejects with one SQL join, whatever their number."""

from __future__ import annotations

import re
import threading
from typing import Any

from gen.view.index import Index
from gen.view.tables import REJECTS, table_name

NO_REASON = "(no reason)"
KINDS = table_name("(reject kinds)")  # config names never hold a parenthesis, so no config has this table
REASON = "coalesce(r.raw->>'reason', '')"
QUOTED = re.compile(
    r"""(?<!\w)(?:'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"|“[^”\n]*”|‘[^’\n]*’|`[^`\n]*`)(?!\w)"""
)  # a quote opens after a space or a bracket, not in a word like "Ann's"
ID = re.compile(r"[^\s,;()\[\]{}]*\w/[^\s,;()\[\]{}]*")  # episode and question ids, paths, URLs: a word with a "/"
NAME = re.compile(r"\b[A-Z][a-z]+(?:'s)?\b")  # a capitalised word, which is_name() may take for a name
NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
CLAUSE_ENDS = (".", ":", ";", "!", "?", "(", "[", "-", "—")
_building = threading.Lock()


def reason_kind(reason: str) -> str:
    """The reason with its particulars replaced: quoted text by "…", ids by ‹id›, names by ‹name›, numbers by N."""
    text = QUOTED.sub('"…"', reason)
    text = ID.sub("‹id›", text)
    text = NAME.sub(lambda match: name_replaced(text, match), text)
    text = NUMBER.sub("N", text)
    return " ".join(text.split()) or NO_REASON


def name_replaced(text: str, match: re.Match[str]) -> str:
    """A capitalised word within a clause is a name, and a possessive one anywhere ("Ann's question ..."); the
    first word of a clause is kept ("Expecting value")."""
    before = text[: match.start()].rstrip()
    if match[0].endswith("'s"):
        return "‹name›'s"
    return match[0] if not before or before.endswith(CLAUSE_ENDS) else "‹name›"


def ensure_kinds(index: Index) -> None:
    """The table of every distinct reason with its kind, made the first time a page groups the rejects."""
    with _building:
        if index.query(
            "SELECT count(*) AS n FROM information_schema.tables WHERE table_name = ?", ["config (reject kinds)"]
        )[0]["n"]:
            return
        reasons = [
            row["reason"] for row in index.query(f"SELECT DISTINCT {REASON} AS reason FROM {table_name(REJECTS)} r")
        ]
        with index.cursor() as cur:  # two lists unnested side by side: no pyarrow (70 MB more for the viewer)
            cur.execute(
                f"CREATE TABLE {KINDS} AS SELECT unnest(?::VARCHAR[]) AS reason, unnest(?::VARCHAR[]) AS kind",
                [reasons, [reason_kind(reason) for reason in reasons]],
            )


def groups(index: Index) -> list[dict[str, Any]]:
    """Each kind of reason with its number of rejects, the most frequent first."""
    ensure_kinds(index)
    return index.query(
        f"SELECT k.kind AS kind, count(*) AS n FROM {table_name(REJECTS)} r JOIN {KINDS} k ON {REASON} = k.reason "
        "GROUP BY 1 ORDER BY 2 DESC, 1"
    )


def members(index: Index, kind: str, limit: int, offset: int) -> list[dict[str, Any]]:
    """The rejects of one kind of reason, in rejects.jsonl's order (row numbers from 0, raw JSON text)."""
    ensure_kinds(index)
    return index.query(
        f"SELECT r.rowid AS _row, r.raw AS raw FROM {table_name(REJECTS)} r JOIN {KINDS} k ON {REASON} = k.reason "
        "WHERE k.kind = ? ORDER BY r.rowid LIMIT ? OFFSET ?",
        [kind, limit, offset],
    )
