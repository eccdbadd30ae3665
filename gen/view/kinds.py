"""The page each kind of record gets. Every record page (reached by its row or by its question id) asks
kind_page() here, so the choice is made in one place: by the record's config, since a product names its configs
and a config says what its records are. A config without a page of its own, or a record that lacks a field its
page needs, gets the generic page; every page keeps the list of all fields (the full values) below.

- log: the conversation at that response, the response marked and its session open;
- persona_sql: the two lines, the SQL, the table before and after with the changed cells marked;
- teabag: the summaries per session, session 6 as a dialogue, the question, the correct answer, the true fact with
  the history turn nearest it, and the judge's verdict when gen view was given a verdicts file;
- quality_turns, quality_dialogues: the dialogue with each turn's feedback reward, gate, advantage and reward
  drawn as small bars."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from itertools import zip_longest
from typing import Any
from urllib.parse import quote

from gen.view.pages import Viewer, cell, decoded, has_columns
from gen.view.tables import table_name

KindPage = dict[str, Any]
QUALITY_TURNS = "quality_turns"
DIALOGUE_TURNS_MAX = 5000  # a quality page shows at most this many turns of its dialogue
STOPWORDS = frozenset(
    {
        "the",
        "and",
        "for",
        "are",
        "was",
        "were",
        "has",
        "have",
        "had",
        "his",
        "her",
        "their",
        "its",
        "that",
        "this",
        "with",
        "from",
        "not",
        "but",
        "you",
        "your",
        "yours",
        "they",
        "them",
        "she",
        "him",
        "who",
        "what",
        "when",
        "where",
        "which",
        "will",
        "would",
        "can",
        "could",
        "did",
        "does",
        "just",
        "now",
        "still",
        "also",
        "very",
        "into",
        "about",
        "than",
        "then",
        "there",
        "here",
        "our",
        "ours",
        "out",
        "all",
        "any",
        "been",
        "being",
    }
)  # words too common to tie a fact to a turn


def kind_page(viewer: Viewer, config: str, record: dict[str, Any]) -> KindPage | None:
    build = KIND_PAGES.get(config)
    return build(viewer, config, record) if build is not None else None


def is_dialogue(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(t, dict) and {"speaker", "text"} <= t.keys() for t in value)


def record_link(config: str, row: int) -> str:
    return f"/records/{quote(config, safe='')}/{row + 1}"


# -- log: one response ---------------------------------------------------------------------------------------
def log_response(viewer: Viewer, config: str, record: dict[str, Any]) -> KindPage | None:
    index, conversation = record.get("response_index"), record.get("conversation_id")
    if not isinstance(index, int) or conversation is None:
        return None
    return {
        "template": "log",
        "title": f"Response {index} of conversation {conversation}",
        "marked": {index},  # the conversation below marks it and opens its session only
        "response_index": index,
        "session_index": record.get("session_index"),
        "speaker": record.get("speaker"),
    }


# -- persona SQL: one pair of lines --------------------------------------------------------------------------
def persona_pair(viewer: Viewer, config: str, record: dict[str, Any]) -> KindPage | None:
    turns = record.get("turns")
    before, after = table_rows(record.get("table_before")), table_rows(record.get("table_after"))
    if not is_dialogue(turns) or before is None or after is None:
        return None
    columns = list(dict.fromkeys(name for row in [*before, *after] for name in row))
    shown_before, shown_after = table_change(columns, before, after)
    statements = record.get("label_sql")
    return {
        "template": "persona_sql",
        "title": f"Pair {record.get('pair_index', '')} of {record.get('episode_id', '')}",
        "turns": turns,
        "target": record.get("target_speaker"),
        "sql": [str(s) for s in statements] if isinstance(statements, list) else [],
        "status": record.get("label_status"),
        "reject_reason": record.get("reject_reason"),
        "columns": columns,
        "before": shown_before,
        "after": shown_after,
        "changed": sum(c["changed"] for row in shown_after for c in row["cells"])
        + sum(row["state"] != "" for row in [*shown_before, *shown_after]),
    }


def table_rows(value: Any) -> list[dict[str, Any]] | None:
    """A table as the record holds it (JSON text of its rows as objects), or None if it is not one."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    if isinstance(value, list) and all(isinstance(row, dict) for row in value):
        return value
    return None


def table_change(
    columns: list[str], before: list[dict[str, Any]], after: list[dict[str, Any]]
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Both tables as rows of cells, each cell marked if its row's partner in the other table holds another
    value; a row without a partner is marked added (after) or removed (before)."""
    partners_before, partners_after = partners(before, after, columns[0] if columns else "")
    return (
        [shown_row(columns, row, partner, "removed", "old") for row, partner in zip(before, partners_before)],
        [shown_row(columns, row, partner, "added", "new") for row, partner in zip(after, partners_after)],
    )


Partners = list[dict[str, Any] | None]


def partners(before: list[dict[str, Any]], after: list[dict[str, Any]], key: str) -> tuple[Partners, Partners]:
    """Each row's partner in the other table: the row with the same first column (the table's key, the speaker)
    when that column's values are unique in both tables, else the row at the same position."""
    keys_before, keys_after = [str(row.get(key)) for row in before], [str(row.get(key)) for row in after]
    if len(set(keys_before)) == len(before) and len(set(keys_after)) == len(after):
        by_key_before, by_key_after = dict(zip(keys_before, before)), dict(zip(keys_after, after))
        return [by_key_after.get(k) for k in keys_before], [by_key_before.get(k) for k in keys_after]
    pairs = list(zip_longest(before, after))
    return [a for b, a in pairs if b is not None], [b for b, a in pairs if a is not None]


def shown_row(
    columns: list[str], row: dict[str, Any], partner: dict[str, Any] | None, alone: str, side: str
) -> dict[str, Any]:
    """A row's cells; `alone` marks a row without a partner, `side` ("old", "new") a changed cell."""
    cells = []
    for name in columns:
        value = row.get(name)
        changed = partner is not None and partner.get(name) != value
        classes = (["changed", side] if changed else []) + (["null"] if value is None else [])
        cells.append(
            {"text": "null" if value is None else cell(value, None), "changed": changed, "css": " ".join(classes)}
        )
    return {"state": alone if partner is None else "", "cells": cells}


# -- TeaBag: one counterfactual question ---------------------------------------------------------------------
def teabag_question(viewer: Viewer, config: str, record: dict[str, Any]) -> KindPage | None:
    history, summaries, session6 = record.get("history"), record.get("summaries"), record.get("session6")
    if not isinstance(history, list) or not isinstance(summaries, list) or not is_dialogue(session6):
        return None
    facts = {s.get("session"): s.get("facts") for s in summaries if isinstance(s, dict)}
    sessions = [
        {
            "session": past.get("session"),
            "facts": [cell(f, None) for f in facts.get(past.get("session")) or []],
            "turns": past["turns"] if is_dialogue(past.get("turns")) else [],
        }
        for past in history
        if isinstance(past, dict)
    ]
    question_id = str(record.get("question_id", ""))
    verdicts = viewer.verdicts
    return {
        "template": "teabag",
        "sessions": sessions,
        "session6": session6,
        "nearest": nearest_turn(sessions, cell(record.get("contradicted_fact"), None)),
        "verdicts_given": verdicts is not None,
        "verdict": verdicts.items.get(question_id) if verdicts else None,
        "answer": verdicts.answers.get(question_id) if verdicts else None,
        "answers_note": verdicts.answers_note if verdicts else None,
        "judge": verdicts.judge if verdicts else {},
    }


def content_words(text: str) -> set[str]:
    return {w for w in re.findall(r"[a-z0-9]+", text.lower()) if len(w) > 2 and w not in STOPWORDS}


def nearest_turn(sessions: list[dict[str, Any]], fact: str) -> dict[str, Any] | None:
    """The history turn that shares the most words with the true fact (a TeaBag record names no turn for it);
    of equals, the latest, since the fact holds as of the last session. None if no turn shares a word."""
    wanted = content_words(fact)
    best: tuple[int, int, int] | None = None
    found = None
    for number, session in enumerate(sessions):
        for position, turn in enumerate(session["turns"]):
            shared = wanted & content_words(str(turn["text"]))
            rank = (len(shared), number, position)
            if shared and (best is None or rank > best):
                best = rank
                found = {
                    "session": session["session"],
                    "turn": position + 1,
                    "speaker": turn["speaker"],
                    "text": turn["text"],
                    "shared": sorted(shared),
                }
    return found


# -- quality labels: a dialogue's turns with their rewards ---------------------------------------------------
METERS = (
    ("feedback_reward", "feedback reward"),
    ("gate", "gate"),
    ("advantage", "advantage"),
    ("reward", "reward"),
)
FIXED_SCALES = {"feedback_reward": (-1.0, 1.0), "gate": (0.0, 1.0)}  # the others: the dialogue's own range


def quality_turn(viewer: Viewer, config: str, record: dict[str, Any]) -> KindPage | None:
    index = record.get("response_index")
    return quality_dialogue_page(viewer, record, index if isinstance(index, int) else None)


def quality_dialogue(viewer: Viewer, config: str, record: dict[str, Any]) -> KindPage | None:
    return quality_dialogue_page(viewer, record, None)


def quality_dialogue_page(viewer: Viewer, record: dict[str, Any], current: int | None) -> KindPage | None:
    conversation, dialogue = record.get("conversation_id"), record.get("dialogue")
    needed = ("conversation_id", "dialogue", "response_index", "speaker", *(name for name, _ in METERS))
    if not isinstance(conversation, str) or not isinstance(dialogue, str):
        return None
    if QUALITY_TURNS not in viewer.folder.configs:
        return None
    if not viewer.index.ready(QUALITY_TURNS):
        return {"template": "waiting", "waiting": QUALITY_TURNS}
    if not has_columns(viewer, QUALITY_TURNS, *needed):
        return None
    rows = viewer.index.query(
        f"SELECT rowid AS _row, * FROM {table_name(QUALITY_TURNS)} WHERE conversation_id = ? AND dialogue = ? "
        f"ORDER BY response_index LIMIT {DIALOGUE_TURNS_MAX}",
        [conversation, dialogue],
    )
    texts, note = turn_texts(viewer, conversation, dialogue)
    scales = {name: FIXED_SCALES.get(name) or own_scale([row[name] for row in rows]) for name, _ in METERS}
    turns = [
        {
            "index": row["response_index"],
            "speaker": row["speaker"],
            "text": texts.get(row["response_index"]),
            "current": row["response_index"] == current,
            "link": record_link(QUALITY_TURNS, row["_row"]),
            "meters": [meter(label, row[name], *scales[name]) for name, label in METERS],
        }
        for row in rows
    ]
    where = f"turn {current} of " if current is not None else ""
    return {
        "template": "quality",
        "title": f"Quality labels: {where}{dialogue} of {conversation}",
        "dialogue": dialogue,
        "conversation": conversation,
        "turns": turns,
        "cut": len(rows) == DIALOGUE_TURNS_MAX,
        "texts_note": note,
        "scales": [(label, *scales[name]) for name, label in METERS],
        "own_dialogue": True,  # the page shows the dialogue itself: no conversation from the log beside it
    }


def own_scale(values: list[Any]) -> tuple[float, float]:
    """From 0 (or minus the largest magnitude, when a value is negative) to the largest magnitude, at least 1."""
    numbers = [float(v) for v in values if isinstance(v, int | float)]
    top = max([1.0, *(abs(v) for v in numbers)])
    return (-top if any(v < 0 for v in numbers) else 0.0, top)


def meter(label: str, value: Any, low: float, high: float) -> dict[str, Any]:
    """A small bar for `value` on [low, high], drawn from zero (as percentages of the meter's width)."""
    if not isinstance(value, int | float):
        return {"label": label, "text": "–", "left": 0.0, "width": 0.0, "negative": False, "zero": None}

    def at(x: float) -> float:
        return 100 * (min(max(x, low), high) - low) / (high - low)

    zero, point = at(0.0), at(float(value))
    return {
        "label": label,
        "text": f"{value:.2f}",
        "left": min(zero, point),
        "width": abs(point - zero),
        "negative": value < 0,
        "zero": zero if low < 0 else None,
    }


def turn_texts(viewer: Viewer, conversation: str, dialogue: str) -> tuple[dict[int, str], str | None]:
    """Each labelled turn's text, from the config that holds the dialogue: the log, a TeaBag session 6, or a
    persona pseudo-dialogue; with a note when that config is not in this run (or not indexed yet)."""
    if dialogue == "log":
        source, column, key, value = "log", "text", "conversation_id", conversation
    elif dialogue.startswith("session6 "):
        source, column, key, value = "teabag", "session6", "question_id", dialogue.removeprefix("session6 ")
    elif dialogue == "pseudo-dialogue":
        source, column, key, value = "persona_sql_episodes", "lines", "episode_id", conversation
    else:
        return {}, f"gen view does not know where the text of a {dialogue!r} dialogue is"
    if source not in viewer.folder.configs:
        return {}, f"the turns' text is in the {source} config, which this run does not hold"
    if not viewer.index.ready(source):
        return {}, f"the turns' text appears when the {source} config is indexed"
    if not has_columns(viewer, source, key, column, *(["response_index"] if dialogue == "log" else [])):
        return {}, f"the {source} config has no {column} field to take the turns' text from"
    if dialogue == "log":
        rows = viewer.index.query(
            f"SELECT response_index, text FROM {table_name(source)} WHERE conversation_id = ?", [conversation]
        )
        return {row["response_index"]: cell(row["text"], None) for row in rows}, None
    rows = viewer.index.query(f"SELECT {column} FROM {table_name(source)} WHERE {key} = ? LIMIT 1", [value])
    turns = decoded(viewer, source, rows[0])[column] if rows else None
    if not isinstance(turns, list) or not is_dialogue(turns):
        return {}, f"the {source} config holds no turns for this dialogue"
    return {position: cell(turn["text"], None) for position, turn in enumerate(turns)}, None


KIND_PAGES: dict[str, Callable[[Viewer, str, dict[str, Any]], KindPage | None]] = {
    "log": log_response,
    "persona_sql": persona_pair,
    "teabag": teabag_question,
    QUALITY_TURNS: quality_turn,
    "quality_dialogues": quality_dialogue,
}
