"""What each page shows, as plain data for its template: the overview, a config's records, one record (a question
with its relevant responses), a conversation's timeline, the rejects, and the comparison with a second run."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

from gen.view import charts
from gen.view.folder import RunFolder
from gen.view.index import NONE_VALUE, REJECTS, Index, QueryError, RecordsQuery, quoted, table_name

PAGE_SIZES = (25, 50, 100, 200)
CELL_CHARS = 160  # a table cell shows this much of a long value; the record's page shows all of it
TEXT_FIELDS = ("question", "final_utterance", "resolved_question", "text", "question_a", "question_b")
KEYS = (
    ("question_id",),
    ("conversation_id", "response_index"),
    ("episode_id", "pair_index"),
    ("item_id",),
    ("conversation_id",),
    ("episode_id",),
)  # how a record is known across two runs, first that fits
REJECTS_PER_GROUP = 5
REJECTS_PAGE = 50


class NotFound(Exception):
    """A page for a config, record or conversation this run does not have."""


@dataclass
class Viewer:
    folder: RunFolder
    index: Index
    other: RunFolder | None = None  # --compare
    diffs: dict[str, dict[str, Any]] = field(default_factory=dict)  # computed once per config


# -- shared helpers ------------------------------------------------------------------------------------------
def cell(value: Any, limit: int | None = CELL_CHARS) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if limit is None or len(text) <= limit else text[: limit - 1] + "…"


def filter_text(value: Any) -> str:
    """A facet value as it goes into a filter's URL."""
    if value is None:
        return NONE_VALUE
    return cell(value, None)


def question_configs(viewer: Viewer) -> list[str]:
    return [
        name
        for name, config in viewer.folder.configs.items()
        if config.questions is not None or any(c.name == "question_id" for c in viewer.index.columns(name))
    ]


def decoded(viewer: Viewer, config: str, row: dict[str, Any]) -> dict[str, Any]:
    """A record with its JSON columns parsed back into lists and objects."""
    kinds = {column.name: column.type for column in viewer.index.columns(config)}
    return {
        name: json.loads(value) if kinds.get(name) == "JSON" and isinstance(value, str) else value
        for name, value in row.items()
    }


def require_config(viewer: Viewer, config: str) -> None:
    if config not in viewer.folder.configs:
        raise NotFound(f"this run has no config {config!r}")


def conversation_link(conversation_id: Any) -> str:
    return "/conversations/" + quote(str(conversation_id), safe="/")


# -- overview ------------------------------------------------------------------------------------------------
def overview(viewer: Viewer) -> dict[str, Any]:
    folder, index = viewer.folder, viewer.index
    report = folder.report
    configs = [
        {
            "name": name,
            "description": config.description,
            "records": config.records,
            "indexed": index.states[name].rows,
            "state": index.states[name].state,
            "error": index.states[name].error,
            "megabytes": config.size / 1e6,
            "questions": name in question_configs(viewer),
        }
        for name, config in folder.configs.items()
    ]
    waiting = [name for name, state in index.states.items() if state.state in ("waiting", "indexing")]
    return {
        "folder": folder,
        "recipe": report.get("recipe") if isinstance(report.get("recipe"), dict) else {},
        "sources": sources(report),
        "configs": configs,
        "validation": validation(report),
        "llm": llm_accounting(report),
        "charts": overview_charts(viewer),
        "waiting": waiting,
    }


def sources(report: dict[str, Any]) -> list[dict[str, Any]]:
    from gen.export.card import load_facts, source_facts

    found = [source for source in report.get("sources", []) if isinstance(source, dict)]
    try:
        facts = load_facts()
    except Exception:  # the facts file is gen's own; a page still shows the sources without licenses
        facts = None
    listed = []
    for source in found:
        known = source_facts(source, facts) if facts else {}
        listed.append(
            {
                **source,
                "license": known.get("license_name") or known.get("license"),
                "license_url": known.get("license_url"),
            }
        )
    return listed


def validation(report: dict[str, Any]) -> list[dict[str, Any]]:
    products: dict[str, Any] = report["validation"] if isinstance(report.get("validation"), dict) else {}
    return [
        {
            "product": product,
            "passed": entry.get("passed"),
            "checks": [
                {
                    "name": name,
                    "checked": tally.get("checked"),
                    "failed": tally.get("failed"),
                    "examples": tally.get("examples", []),
                }
                for name, tally in entry.get("checks", {}).items()
                if isinstance(tally, dict)
            ],
        }
        for product, entry in products.items()
        if isinstance(entry, dict)
    ]


def llm_accounting(report: dict[str, Any]) -> dict[str, Any] | None:
    llm = report.get("llm")
    if not isinstance(llm, dict):
        return None
    steps: dict[str, Any] = llm["steps"] if isinstance(llm.get("steps"), dict) else {}
    rows = [{"step": name, **stats} for name, stats in steps.items() if isinstance(stats, dict)]
    totals = llm.get("totals") if isinstance(llm.get("totals"), dict) else None
    if totals:
        rows.append({"step": "(all steps)", **totals})
    columns = []
    for row in rows:
        columns += [k for k, v in row.items() if k != "step" and not isinstance(v, dict | list) and k not in columns]
    return {"columns": columns, "rows": rows, "errors": llm.get("errors") or {}, "rejects": llm.get("rejects")}


def overview_charts(viewer: Viewer) -> dict[str, Any]:
    found: dict[str, Any] = {"questions": [], "windows": [], "rejects": None, "sessions": []}
    for name in question_configs(viewer):
        by_test = (viewer.folder.report.get("configs", {}).get(name, {}).get("summary") or {}).get("by_test")
        if isinstance(by_test, dict):
            items = [(test, int(entry.get("variants", 0))) for test, entry in by_test.items()]
            found["questions"].append(charts.horizontal_bars(name, items))
        elif viewer.index.ready(name) and has_columns(viewer, name, "test"):
            rows = viewer.index.query(f"SELECT test, count(*) AS n FROM {table_name(name)} GROUP BY 1 ORDER BY 1")
            found["questions"].append(charts.horizontal_bars(name, [(cell(r["test"]), r["n"]) for r in rows]))
        if viewer.index.ready(name) and has_columns(viewer, name, "test", "num_relevant"):
            found["windows"].append((name, window_histograms(viewer, name)))
    if viewer.index.ready(REJECTS):
        rows = viewer.index.query(
            f"SELECT coalesce(raw->>'reason', '(no reason)') AS reason, count(*) AS n FROM {table_name(REJECTS)} "
            "GROUP BY 1 ORDER BY 2 DESC, 1 LIMIT 12"
        )
        found["rejects"] = charts.horizontal_bars("rejects by reason", [(short(r["reason"]), r["n"]) for r in rows])
    log = "log" if "log" in viewer.folder.configs else None
    if log and viewer.index.ready(log) and has_columns(viewer, log, "conversation_id", "session_index", "is_padding"):
        rows = viewer.index.query(
            f"SELECT bool_or(is_padding) AS padding, floor(log2(n))::INT AS k, count(*) AS sessions FROM "
            f"(SELECT conversation_id, session_index, bool_or(is_padding) AS is_padding, count(*) AS n "
            f"FROM {table_name(log)} GROUP BY 1, 2) GROUP BY is_padding, k ORDER BY 1, 2"
        )
        for padding in (False, True):
            counts = {r["k"]: r["sessions"] for r in rows if bool(r["padding"]) is padding}
            if counts:
                title = "padding sessions" if padding else "real sessions"
                kind = "padding" if padding else ""
                found["sessions"].append(charts.histogram(title, charts.power_of_two_bins(counts), kind=kind))
    return found


def window_histograms(viewer: Viewer, name: str) -> list[charts.Chart]:
    rows = viewer.index.query(
        f"SELECT test, floor(log2(greatest(num_relevant, 1)))::INT AS k, count(*) AS n FROM {table_name(name)} "
        "GROUP BY 1, 2 ORDER BY 1, 2"
    )
    tests: dict[str, dict[int, int]] = {}
    for row in rows:
        tests.setdefault(cell(row["test"]), {})[row["k"]] = row["n"]
    return [charts.histogram(test, charts.power_of_two_bins(counts)) for test, counts in tests.items()]


def has_columns(viewer: Viewer, config: str, *names: str) -> bool:
    present = {column.name for column in viewer.index.columns(config)}
    return all(name in present for name in names)


def short(text: Any, limit: int = 28) -> str:
    text = cell(text, None)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- records -------------------------------------------------------------------------------------------------
def records_query(params: Mapping[str, str]) -> RecordsQuery:
    try:
        page = max(1, int(params.get("page", "1")))
        size = int(params.get("size", "50"))
    except ValueError:
        raise QueryError("page and size are whole numbers") from None
    if size not in PAGE_SIZES:
        raise QueryError(f"size is one of {', '.join(map(str, PAGE_SIZES))}")
    filters = {key[2:]: value for key, value in params.items() if key.startswith("f.") and value != ""}
    return RecordsQuery(
        page, size, params.get("sort") or None, params.get("desc") == "1", params.get("q", "").strip(), filters
    )


def query_link(config: str, query: RecordsQuery, **changes: Any) -> str:
    values: dict[str, Any] = {
        "page": query.page,
        "size": query.size,
        "sort": query.sort,
        "desc": query.desc,
        "q": query.text,
    }
    values.update(changes)
    params = {k: v for k, v in values.items() if v not in (None, "", False)}
    if params.get("desc") is True:
        params["desc"] = "1"
    if params.get("page") == 1:
        params.pop("page")
    if params.get("size") == 50:
        params.pop("size")
    filters = changes.get("filters", query.filters)
    params.pop("filters", None)
    pairs = list(params.items()) + [(f"f.{name}", value) for name, value in filters.items()]
    return f"/records/{quote(config)}" + (f"?{urlencode(pairs)}" if pairs else "")


def records(viewer: Viewer, config: str, params: Mapping[str, str]) -> dict[str, Any]:
    require_config(viewer, config)
    query = records_query(params)
    page = viewer.index.page(config, query)
    state = viewer.index.states[config]
    columns = [c.name for c in state.columns] or ([k for k in page.rows[0] if k != "_row"] if page.rows else [])
    is_questions = config in question_configs(viewer)
    rows = []
    for row in page.rows:
        link = f"/records/{quote(config)}/{row['_row']}"
        if is_questions and row.get("question_id"):
            link = f"/questions/{quote(config)}/{quote(str(row['question_id']))}"
        rows.append(
            {
                "link": link,
                "number": row["_row"] + 1,
                "cells": [cell(row.get(name)) for name in columns],
                "conversation": conversation_link(row["conversation_id"]) if row.get("conversation_id") else None,
            }
        )
    pages = max(1, -(-page.total // query.size))
    sortable = {c.name for c in state.columns if c.scalar}
    facets = [
        {
            "name": name,
            "options": [(filter_text(v), cell(v) if v is not None else NONE_VALUE, n) for v, n in values],
            "chosen": query.filters.get(name, ""),
        }
        for name, values in state.facets.items()
    ]
    open_fields = [c.name for c in state.columns if c.scalar and c.name not in state.facets]
    return {
        "folder": viewer.folder,
        "config": config,
        "state": state,
        "query": query,
        "columns": columns,
        "sortable": sortable,
        "rows": rows,
        "total": page.total,
        "pages": pages,
        "from_index": page.from_index,
        "facets": facets,
        "open_fields": open_fields,
        "sizes": PAGE_SIZES,
        "link": lambda **changes: query_link(config, query, **changes),
        "first_number": (query.page - 1) * query.size + 1,
    }


# -- one record: a question with its responses ---------------------------------------------------------------
def record_by_row(viewer: Viewer, config: str, row: int) -> dict[str, Any]:
    require_config(viewer, config)
    if not viewer.index.ready(config):
        return {"folder": viewer.folder, "config": config, "indexing": True}
    found = viewer.index.query(f"SELECT rowid AS _row, * FROM {table_name(config)} WHERE rowid = ?", [row])
    if not found:
        raise NotFound(f"{config} has no record {row + 1}")
    return record_page(viewer, config, decoded(viewer, config, found[0]))


def record_by_question(viewer: Viewer, config: str, question_id: str) -> dict[str, Any]:
    require_config(viewer, config)
    if not viewer.index.ready(config):
        return {"folder": viewer.folder, "config": config, "indexing": True}
    if not has_columns(viewer, config, "question_id"):
        raise NotFound(f"{config} holds no questions")
    found = viewer.index.query(
        f"SELECT rowid AS _row, * FROM {table_name(config)} WHERE question_id = ? LIMIT 1", [question_id]
    )
    if not found:
        raise NotFound(f"{config} has no question {question_id!r}")
    return record_page(viewer, config, decoded(viewer, config, found[0]))


def record_page(viewer: Viewer, config: str, record: dict[str, Any]) -> dict[str, Any]:
    row = record.pop("_row")
    relevant = record.get("relevant_response_indices")
    context = {
        "folder": viewer.folder,
        "config": config,
        "indexing": False,
        "number": row + 1,
        "record": record,
        "fields": [shown_field(name, value) for name, value in record.items()],
        "title": next((cell(record[k], None) for k in TEXT_FIELDS if isinstance(record.get(k), str)), None),
        "relevant": sorted(relevant) if isinstance(relevant, list) else None,
        "variants": variants(viewer, config, record),
        "conversation": None,
    }
    conversation_id = record.get("conversation_id")
    if conversation_id is not None and "log" in viewer.folder.configs:
        marked = set(relevant) if isinstance(relevant, list) else set()
        context["conversation"] = conversation_context(viewer, str(conversation_id), marked, record.get("now"))
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
                    "link": f"/questions/{quote(name)}/{quote(str(row['question_id']))}",
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
def conversation(viewer: Viewer, conversation_id: str) -> dict[str, Any]:
    if "log" not in viewer.folder.configs:
        raise NotFound("this run has no log, so no conversation to show")
    context = conversation_context(viewer, conversation_id, set(), None)
    if context["responses_total"] == 0 and not context["indexing"]:
        raise NotFound(f"the log has no conversation {conversation_id!r}")
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


# -- rejects -------------------------------------------------------------------------------------------------
def rejects(viewer: Viewer, params: Mapping[str, str]) -> dict[str, Any]:
    index, table = viewer.index, table_name(REJECTS)
    context: dict[str, Any] = {
        "folder": viewer.folder,
        "indexing": not index.ready(REJECTS),
        "groups": [],
        "reason": params.get("reason"),
        "chart": None,
        "total": 0,
    }
    if context["indexing"]:
        return context
    groups = index.query(
        f"SELECT coalesce(raw->>'reason', '(no reason)') AS reason, count(*) AS n FROM {table} GROUP BY 1 "
        "ORDER BY 2 DESC, 1"
    )
    context["total"] = sum(g["n"] for g in groups)
    context["chart"] = charts.horizontal_bars("rejects by reason", [(short(g["reason"]), g["n"]) for g in groups[:12]])
    chosen = params.get("reason")
    try:
        page = max(1, int(params.get("page", "1")))
    except ValueError:
        raise QueryError("page is a whole number") from None
    for group in groups:
        if chosen is not None and group["reason"] != chosen:
            continue
        limit = REJECTS_PAGE if chosen is not None else REJECTS_PER_GROUP
        offset = (page - 1) * limit if chosen is not None else 0
        rows = index.query(
            f"SELECT rowid AS _row, raw FROM {table} WHERE coalesce(raw->>'reason', '(no reason)') = ? "
            "ORDER BY rowid LIMIT ? OFFSET ?",
            [group["reason"], limit, offset],
        )
        items = [reject_item(row["_row"], json.loads(row["raw"])) for row in rows]
        context["groups"].append(
            {
                **group,
                "items": items,
                "link": "/rejects?" + urlencode({"reason": group["reason"]}),
                "pages": max(1, -(-group["n"] // limit)),
                "page": page,
            }
        )
    return context


def reject_item(row: int, reject: dict[str, Any]) -> dict[str, Any]:
    attempts: list[Any] = reject["attempts"] if isinstance(reject.get("attempts"), list) else []
    return {
        "number": row + 1,
        "what": reject.get("product") or reject.get("step") or "",
        "item_id": cell(reject.get("item_id"), None),
        "kind": cell(reject.get("kind"), None),
        "reason": cell(reject.get("reason"), None),
        "raw_text": reject.get("raw_text"),
        "attempts": [shown_field(f"attempt {i + 1}", attempt) for i, attempt in enumerate(attempts)],
        "other": [
            shown_field(k, v)
            for k, v in reject.items()
            if k not in ("product", "step", "item_id", "kind", "reason", "raw_text", "attempts")
        ],
    }


# -- compare -------------------------------------------------------------------------------------------------
def compare(viewer: Viewer) -> dict[str, Any]:
    other = viewer.other
    context: dict[str, Any] = {"folder": viewer.folder, "other": other}
    if other is None:
        return context
    names = list(dict.fromkeys([*viewer.folder.configs, *other.configs]))
    context["configs"] = [
        {
            "name": name,
            "a": viewer.folder.configs[name].records if name in viewer.folder.configs else None,
            "b": other.configs[name].records if name in other.configs else None,
        }
        for name in names
    ]
    context["tests"] = per_test(viewer.folder, other)
    context["fingerprints"] = (fingerprint(viewer.folder), fingerprint(other))
    context["diffs"] = [
        record_diff(viewer, name) for name in names if name in viewer.folder.configs and name in other.configs
    ]
    return context


def fingerprint(folder: RunFolder) -> str:
    recipe = folder.report.get("recipe")
    return str(recipe.get("fingerprint", "")) if isinstance(recipe, dict) else ""


def per_test(a: RunFolder, b: RunFolder) -> list[dict[str, Any]]:
    found = []
    for name, config in a.report.get("configs", {}).items():
        left = ((config or {}).get("summary") or {}).get("by_test")
        right = ((b.report.get("configs", {}).get(name) or {}).get("summary") or {}).get("by_test")
        if not isinstance(left, dict) and not isinstance(right, dict):
            continue
        left, right = left or {}, right or {}
        for test in dict.fromkeys([*left, *right]):
            found.append(
                {
                    "config": name,
                    "test": test,
                    "a": (left.get(test) or {}).get("variants"),
                    "b": (right.get(test) or {}).get("variants"),
                }
            )
    return found


def record_source(folder: RunFolder, config: str) -> str:
    """Each record of `config` as one JSON text (`j`), whatever the files are."""
    files = folder.configs[config]
    listed = "[" + ", ".join("'" + str(p).replace("'", "''") + "'" for p in files.files) + "]"
    if files.format == "parquet":
        return f"SELECT to_json(t)::VARCHAR AS j FROM read_parquet({listed}) t"
    return f"SELECT json::VARCHAR AS j FROM read_json_objects({listed}, format='newline_delimited')"


def record_key(viewer: Viewer, config: str) -> tuple[str, ...] | None:
    present = {c.name for c in viewer.index.columns(config)}
    features = viewer.folder.configs[config].features or []
    present |= {str(f.get("name")) for f in features if isinstance(f, dict)}
    return next((key for key in KEYS if set(key) <= present), None)


def record_diff(viewer: Viewer, config: str) -> dict[str, Any]:
    """Records of `config` in both runs, matched by their key: only here, only there, changed, the same."""
    if config in viewer.diffs:
        return viewer.diffs[config]
    assert viewer.other is not None
    if not viewer.folder.configs[config].files or not viewer.other.configs[config].files:
        return {"config": config, "key": None}
    key = record_key(viewer, config)
    if key is None:
        return {"config": config, "key": None}
    key_sql = "concat_ws(' / ', " + ", ".join(f"j->>'{name}'" for name in key) + ")"
    side = "SELECT {key} AS id, md5(j) AS h FROM ({source})"
    a = side.format(key=key_sql, source=record_source(viewer.folder, config))
    b = side.format(key=key_sql, source=record_source(viewer.other, config))
    joined = f"SELECT a.id AS a_id, b.id AS b_id, a.h = b.h AS same FROM ({a}) a FULL OUTER JOIN ({b}) b ON a.id = b.id"
    counts = viewer.index.query(
        f"SELECT count(*) FILTER (WHERE b_id IS NULL) AS only_a, count(*) FILTER (WHERE a_id IS NULL) AS only_b, "
        f"count(*) FILTER (WHERE same = false) AS changed, count(*) FILTER (WHERE same) AS same FROM ({joined})"
    )[0]
    examples = viewer.index.query(
        f"SELECT coalesce(a_id, b_id) AS id, CASE WHEN b_id IS NULL THEN 'only here' WHEN a_id IS NULL "
        f"THEN 'only there' ELSE 'changed' END AS how FROM ({joined}) WHERE NOT coalesce(same, false) "
        "ORDER BY 2, 1 LIMIT 30"
    )
    result = {"config": config, "key": " + ".join(key), **counts, "examples": examples}
    viewer.diffs[config] = result
    return result
