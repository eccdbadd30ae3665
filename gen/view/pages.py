"""What each page shows, as plain data for its template: the overview and a config's records here, with the
helpers every page shares; a record and a conversation in questions.py, the rejects and the comparison with a
second run in rejects_compare.py."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from gen.view import charts, reject_groups, urls
from gen.view.folder import RunFolder
from gen.view.index import Index
from gen.view.tables import NONE_VALUE, REJECTS, QueryError, RecordsQuery, table_name

if TYPE_CHECKING:
    from gen.view.verdicts import Verdicts

PAGE_SIZES = (25, 50, 100, 200)
CELL_CHARS = 160  # a table cell holds this much of a long value (CSS cuts it to the column); the record page all
COLUMN_EMS = {"num": 6.5, "bool": 4.5, "date": 10.5, "id": 13, "json": 16, "text": 22}  # a records column's width
NUMBER_COLUMN_EMS = 4.5  # the records table's first column, the record number
NUMBER_DTYPES = ("int", "uint", "float", "double")
NUMBER_TYPES = ("BIGINT", "INTEGER", "SMALLINT", "TINYINT", "HUGEINT", "UBIGINT", "DOUBLE", "FLOAT", "DECIMAL")
TEXT_FIELDS = ("question", "final_utterance", "resolved_question", "text", "question_a", "question_b")
KEYS = (
    ("question_id",),
    ("conversation_id", "response_index"),
    ("episode_id", "pair_index"),
    ("item_id",),
    ("conversation_id",),
    ("episode_id",),
)  # how a record is known across two runs, first that fits


class NotFound(Exception):
    """A page for a config, record or conversation this run does not have."""


@dataclass
class Viewer:
    folder: RunFolder
    index: Index
    other: RunFolder | None = None  # --compare
    diffs: dict[str, dict[str, Any]] = field(default_factory=dict)  # computed once per config
    verdicts: Verdicts | None = None  # --verdicts: gen judge's verdicts on the TeaBag questions


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
        "rejected_items": rejected_items(report),
    }


def rejected_items(report: dict[str, Any]) -> int | None:
    """The run's one count of rejected items: run.json's top-level `rejects`, the lines of rejects.jsonl (never
    a sum over the LLM steps, which count calls and items of their own)."""
    count = report.get("rejects")
    return count if isinstance(count, int) and not isinstance(count, bool) else None


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
    products: dict[str, Any] = llm["products"] if isinstance(llm.get("products"), dict) else {}
    return {
        "columns": columns,
        "rows": rows,
        "errors": llm.get("errors") or {},
        "items": (totals or {}).get("items"),
        "rejected": (totals or {}).get("rejected"),
        "products": {name: entry for name, entry in products.items() if isinstance(entry, dict)},
    }


def overview_charts(viewer: Viewer) -> dict[str, Any]:
    found: dict[str, Any] = {"questions": [], "windows": [], "rejects": None, "sessions": []}
    for name in question_configs(viewer):
        by_test = (viewer.folder.report.get("configs", {}).get(name, {}).get("summary") or {}).get("by_test")
        if isinstance(by_test, dict):
            items = [(test, int(entry.get("variants", 0))) for test, entry in by_test.items()]
            found["questions"].append(charts.horizontal_bars(name, items))
        elif viewer.index.ready(name) and has_columns(viewer, name, "test"):
            rows = kept_query(viewer, f"SELECT test, count(*) AS n FROM {table_name(name)} GROUP BY 1 ORDER BY 1")
            found["questions"].append(charts.horizontal_bars(name, [(cell(r["test"]), r["n"]) for r in rows]))
        if viewer.index.ready(name) and has_columns(viewer, name, "test", "num_relevant"):
            found["windows"].append((name, window_histograms(viewer, name)))
    if viewer.index.ready(REJECTS):
        kinds = reject_groups.groups(viewer.index)[:12]  # grouped as the Rejects page groups them
        found["rejects"] = charts.horizontal_bars("rejects by reason", [(short(g["kind"]), g["n"]) for g in kinds])
    log = "log" if "log" in viewer.folder.configs else None
    if log and viewer.index.ready(log) and has_columns(viewer, log, "conversation_id", "session_index", "is_padding"):
        rows = kept_query(
            viewer,
            f"SELECT bool_or(is_padding) AS padding, floor(log2(n))::INT AS k, count(*) AS sessions FROM "
            f"(SELECT conversation_id, session_index, bool_or(is_padding) AS is_padding, count(*) AS n "
            f"FROM {table_name(log)} GROUP BY 1, 2) GROUP BY is_padding, k ORDER BY 1, 2",
        )
        for padding in (False, True):
            counts = {r["k"]: r["sessions"] for r in rows if bool(r["padding"]) is padding}
            if counts:
                title = "padding sessions" if padding else "real sessions"
                kind = "padding" if padding else ""
                found["sessions"].append(charts.histogram(title, charts.power_of_two_bins(counts), kind=kind))
    return found


def kept_query(viewer: Viewer, sql: str) -> list[dict[str, Any]]:
    """The rows of a query over whole configs for a plot, run once and kept with the index (Index.kept)."""
    return list(viewer.index.kept(f"rows {sql}", lambda: viewer.index.query(sql)))


def window_histograms(viewer: Viewer, name: str) -> list[charts.Chart]:
    rows = kept_query(
        viewer,
        f"SELECT test, floor(log2(greatest(num_relevant, 1)))::INT AS k, count(*) AS n FROM {table_name(name)} "
        "GROUP BY 1, 2 ORDER BY 1, 2",
    )
    tests: dict[str, dict[int, int]] = {}
    for row in rows:
        tests.setdefault(cell(row["test"]), {})[row["k"]] = row["n"]
    return [charts.histogram(test, charts.power_of_two_bins(counts)) for test, counts in tests.items()]


def conversation_links(viewer: Viewer, ids: list[Any]) -> dict[str, str]:
    """id → the address of its conversation's page, for each id of `ids` the log holds. Every link to a
    conversation is made here: its page is read from the log, so an id the log does not hold (a TeaBag episode or
    a persona pseudo-dialogue that quality labels name, in a run without their log) gets no link, not one to a
    404. One lookup for a whole table page; while the log is indexed every id is linked (its page says so)."""
    wanted = sorted({urls.id_text(value) for value in ids if value is not None})
    if not wanted or "log" not in viewer.folder.configs:
        return {}
    if viewer.index.ready("log"):
        if not has_columns(viewer, "log", "conversation_id"):
            return {}
        found = viewer.index.query(
            f"SELECT DISTINCT CAST(conversation_id AS VARCHAR) AS id FROM {table_name('log')} "
            "WHERE conversation_id IN (SELECT unnest(?::VARCHAR[]))",
            [wanted],
        )
        wanted = [row["id"] for row in found]
    return {conversation: urls.conversation_url(conversation) for conversation in wanted}


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
    return urls.records_url(config) + (f"?{urlencode(pairs)}" if pairs else "")


def table_rows(viewer: Viewer, config: str, found: list[dict[str, Any]], columns: list[str]) -> list[dict[str, Any]]:
    """A page's rows as the table shows them: each linked to its record (a question to its question page), its
    cells cut, and its conversation linked."""
    is_questions = config in question_configs(viewer)
    links = conversation_links(viewer, [row.get("conversation_id") for row in found])
    rows = []
    for row in found:
        link = urls.record_url(config, row["_row"] + 1)
        if is_questions and row.get("question_id") is not None:
            link = urls.question_url(config, row["question_id"])
        rows.append(
            {
                "link": link,
                "number": row["_row"] + 1,
                "cells": [cell(row.get(name)) for name in columns],
                "conversation": links.get(urls.id_text(row.get("conversation_id"))),
            }
        )
    return rows


def records(viewer: Viewer, config: str, params: Mapping[str, str]) -> dict[str, Any]:
    require_config(viewer, config)
    query = records_query(params)
    page = viewer.index.page(config, query)
    state = viewer.index.states[config]
    columns = [c.name for c in state.columns] or ([k for k in page.rows[0] if k != "_row"] if page.rows else [])
    rows = table_rows(viewer, config, page.rows, columns)
    pages = max(1, -(-page.total // query.size))
    kinds = column_kinds(viewer, config, columns)
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
        "searched": page.searched,  # records a search looked at while the word index is built (None: all)
        "search_failure": viewer.index.search_failures.get(config),
        "config": config,
        "state": state,
        "query": query,
        "columns": columns,
        "kinds": kinds,
        "ems": COLUMN_EMS,
        "row_ems": NUMBER_COLUMN_EMS,
        "table_ems": NUMBER_COLUMN_EMS + sum(COLUMN_EMS[kind] for kind in kinds),
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


def column_kinds(viewer: Viewer, config: str, columns: list[str]) -> list[str]:
    """What each column of the records table holds, which sets its width (COLUMN_EMS) and alignment: every row
    of the table is one line high, so a column is as wide as its kind needs, never as its longest value. The
    declared features come first (known before the index is ready), then the index's column types."""
    features = viewer.folder.configs[config].features or []
    declared = {str(f["name"]): f for f in features if isinstance(f, dict) and "name" in f}
    types = {column.name: column.type for column in viewer.index.columns(config)}
    return [column_kind(name, declared.get(name), types.get(name)) for name in columns]


def column_kind(name: str, feature: dict[str, Any] | None, index_type: str | None) -> str:
    dtype = str(feature.get("dtype", "")) if feature else ""
    found = index_type or ""
    if (feature is not None and "dtype" not in feature) or found in ("JSON", "MAP") or found.startswith("STRUCT"):
        return "json"  # declared as a list or a struct, or one in a parquet export
    if found.endswith("[]"):
        return "json"
    if dtype == "bool" or found == "BOOLEAN":
        return "bool"
    if dtype.startswith(NUMBER_DTYPES) or found.startswith(NUMBER_TYPES):
        return "num"
    if dtype.startswith(("timestamp", "date")) or found.startswith(("TIMESTAMP", "DATE")):
        return "date"
    if name == "id" or name.endswith("_id"):
        return "id"
    return "text"
