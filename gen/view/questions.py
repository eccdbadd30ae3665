"""One record's page (a question with its relevant responses highlighted in its conversation, the other
wordings of its base question) and a conversation's page (its sessions on a time axis, every response)."""

from __future__ import annotations

import contextlib
import json
from typing import Any

from gen.errors import shorten
from gen.view import charts, urls
from gen.view.kinds import kind_page
from gen.view.pages import (
    TEXT_FIELDS,
    NotFound,
    Viewer,
    cell,
    conversation_links,
    decoded,
    has_columns,
    question_configs,
    require_config,
)
from gen.view.tables import quoted, table_name


# -- one record: a question with its responses ---------------------------------------------------------------
def record_by_number(viewer: Viewer, config: str, number_text: str) -> dict[str, Any]:
    """The record a `/records/CONFIG/N` address names: N counts from 1 (urls.record_url makes these links)."""
    require_config(viewer, config)
    if not viewer.index.ready(config):
        return {"folder": viewer.folder, "config": config, "indexing": True}
    total = viewer.index.states[config].rows or 0
    number = int(number_text) if number_text.isascii() and number_text.isdigit() else None
    if number is None or not 1 <= number <= total:
        span = f"records 1 to {total:,}" if total else "no records"
        raise NotFound(f"{config} has {span}; there is no record {shorten(number_text, 40)!r}")
    found = viewer.index.query(f"SELECT rowid AS _row, * FROM {table_name(config)} WHERE rowid = ?", [number - 1])
    return record_page(viewer, config, decoded(viewer, config, found[0]))


def record_by_question(viewer: Viewer, config: str, wanted: urls.IdInUrl) -> dict[str, Any]:
    require_config(viewer, config)
    if not viewer.index.ready(config):
        return {"folder": viewer.folder, "config": config, "indexing": True}
    if not has_columns(viewer, config, "question_id"):
        raise NotFound(f"{config} holds no questions")
    clause, value = id_clause("question_id", wanted)
    found = viewer.index.query(f"SELECT rowid AS _row, * FROM {table_name(config)} WHERE {clause} LIMIT 1", [value])
    if not found:
        raise NotFound(f"{config} has no question {shown_id(wanted)}")
    return record_page(viewer, config, decoded(viewer, config, found[0]))


def id_clause(column: str, wanted: urls.IdInUrl) -> tuple[str, str]:
    """SQL that finds the rows whose `column` is the id a URL names (by its text, or by the MD5 of it)."""
    text = f"CAST({quoted(column)} AS VARCHAR)"
    if wanted.md5 is not None:
        return f"md5({text}) = ?", wanted.md5
    return f"{text} = ?", wanted.text or ""


def shown_id(wanted: urls.IdInUrl) -> str:
    return f"with the id hash {wanted.md5}" if wanted.md5 is not None else repr(shorten(wanted.text or "", 200))


def record_page(viewer: Viewer, config: str, record: dict[str, Any]) -> dict[str, Any]:
    row = record.pop("_row")
    relevant = record.get("relevant_response_indices")
    kind = kind_page(viewer, config, record)  # the page of this kind of record, if it has one of its own
    context = {
        "folder": viewer.folder,
        "config": config,
        "indexing": False,
        "number": row + 1,
        "record": record,
        "fields": [shown_field(name, value) for name, value in record.items()],
        "title": (kind or {}).get("title")
        or next((cell(record[k], None) for k in TEXT_FIELDS if isinstance(record.get(k), str)), None),
        "relevant": sorted(relevant) if isinstance(relevant, list) else None,
        "variants": variants(viewer, config, record),
        "kind": kind,
        "conversation": None,
        "fold": False,
        "conversation_link": conversation_links(viewer, [record.get("conversation_id")]).get(
            urls.id_text(record.get("conversation_id"))
        ),
    }
    conversation_id = record.get("conversation_id")
    if conversation_id is not None and "log" in viewer.folder.configs and not (kind or {}).get("own_dialogue"):
        marked = set(relevant) if isinstance(relevant, list) else set((kind or {}).get("marked", ()))
        context["conversation"] = conversation_context(viewer, str(conversation_id), marked, record.get("now"))
        context["fold"] = bool(marked) or isinstance(relevant, list)  # only the sessions with marked responses open
    return context


def variants(viewer: Viewer, config: str, record: dict[str, Any]) -> list[dict[str, Any]]:
    """The other wordings of the record's base question, in this config and in every other question config."""
    group = record.get("group_id")
    if group is None:
        return []
    found = []
    for name in question_configs(viewer):
        if not viewer.index.ready(name) or not has_columns(viewer, name, "group_id", "question_id"):
            continue
        texts = [f for f in TEXT_FIELDS if has_columns(viewer, name, f)]
        shown = f"coalesce({', '.join(quoted(f) for f in texts)})" if texts else "NULL"
        where = "group_id = ?" + (" AND conversation_id = ?" if has_columns(viewer, name, "conversation_id") else "")
        params = [group] + ([record.get("conversation_id")] if "conversation_id" in where else [])
        for row in viewer.index.query(
            f"SELECT question_id, {shown} AS text FROM {table_name(name)} WHERE {where} LIMIT 100", params
        ):
            found.append(
                {
                    "config": name,
                    "question_id": row["question_id"],
                    "text": cell(row["text"], None),
                    "current": name == config and row["question_id"] == record.get("question_id"),
                    "link": urls.question_url(name, row["question_id"]),
                }
            )
    return found


def shown_field(name: str, value: Any) -> dict[str, Any]:
    """How a field is shown: text, a dialogue, a table of rows, or indented JSON."""
    if isinstance(value, str) and value[:1] in "[{":
        with contextlib.suppress(ValueError):
            value = json.loads(value)
    if (
        isinstance(value, list)
        and value
        and all(isinstance(t, dict) and {"speaker", "text"} <= t.keys() for t in value)
    ):
        return {"name": name, "kind": "dialogue", "turns": value}
    if isinstance(value, dict) and isinstance(value.get("columns"), list) and isinstance(value.get("rows"), list):
        return {
            "name": name,
            "kind": "table",
            "columns": value["columns"],
            "rows": [[cell(v, None) for v in r] for r in value["rows"]],
        }
    if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
        columns = list(dict.fromkeys(k for r in value for k in r))
        return {
            "name": name,
            "kind": "table",
            "columns": columns,
            "rows": [[cell(r.get(k), None) for k in columns] for r in value],
        }
    if isinstance(value, list) and all(not isinstance(v, dict | list) for v in value):
        return {"name": name, "kind": "text", "text": cell(value, None)}
    if isinstance(value, dict | list):
        return {"name": name, "kind": "json", "text": json.dumps(value, ensure_ascii=False, indent=1, default=str)}
    return {"name": name, "kind": "text", "text": cell(value, None)}


# -- a conversation ------------------------------------------------------------------------------------------
def conversation(viewer: Viewer, wanted: urls.IdInUrl) -> dict[str, Any]:
    if "log" not in viewer.folder.configs:
        raise NotFound("this run has no log, so no conversation to show")
    if not viewer.index.ready("log"):
        return {"folder": viewer.folder, "conversation": conversation_context(viewer, "", set(), None)}
    clause, value = id_clause("conversation_id", wanted)
    found = viewer.index.query(f"SELECT conversation_id FROM {table_name('log')} WHERE {clause} LIMIT 1", [value])
    if not found:
        raise NotFound(f"the log has no conversation {shown_id(wanted)}")
    context = conversation_context(viewer, found[0]["conversation_id"], set(), None)
    return {"folder": viewer.folder, "conversation": context}


def conversation_context(viewer: Viewer, conversation_id: str, relevant: set[int], question_now: Any) -> dict[str, Any]:
    index = viewer.index
    context: dict[str, Any] = {
        "id": conversation_id,
        "indexing": not index.ready("log"),
        "sessions": [],
        "responses_total": 0,
        "record": None,
        "timeline": None,
        "relevant_found": 0,
    }
    if context["indexing"]:
        return context
    if "conversations" in viewer.folder.configs and index.ready("conversations"):
        found = index.query(f"SELECT * FROM {table_name('conversations')} WHERE conversation_id = ?", [conversation_id])
        context["record"] = decoded(viewer, "conversations", found[0]) if found else None
    responses = index.query(
        f"SELECT * FROM {table_name('log')} WHERE conversation_id = ? ORDER BY response_index", [conversation_id]
    )
    sessions: dict[int, dict[str, Any]] = {}
    for response in responses:
        response["relevant"] = response.get("response_index") in relevant
        number = int(response.get("session_index") or 0)
        session = sessions.setdefault(
            number,
            {
                "session": number,
                "start": response["timestamp"],
                "padding": bool(response.get("is_padding")),
                "items": [],
            },
        )
        session["end"] = response["timestamp"]
        session["items"].append(response)
    for session in sessions.values():
        session["responses"] = len(session["items"])
        session["relevant"] = sum(1 for r in session["items"] if r["relevant"])
    now = question_now or (context["record"] or {}).get("now")
    marked = [r for r in responses if r["relevant"]]
    window = (str(marked[0]["timestamp"]), str(marked[-1]["timestamp"])) if marked else None
    listed = list(sessions.values())
    context.update(
        sessions=listed,
        responses_total=len(responses),
        relevant_found=len(marked),
        now=now,
        window=window,
        timeline=charts.timeline(
            listed, str(now) if now else None, {s["session"] for s in listed if s["relevant"]}, window
        )
        if listed
        else None,
    )
    return context
