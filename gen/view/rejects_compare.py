"""The rejects' page (every rejected item grouped by reason, with its raw reply) and the comparison of two runs
(counts, questions per test, records matched by id)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from gen.view import charts, reject_groups
from gen.view.folder import RunFolder
from gen.view.pages import KEYS, NotFound, Viewer, cell, short
from gen.view.questions import shown_field
from gen.view.tables import REJECTS, QueryError, RecordsQuery, first_row

REJECTS_PER_GROUP = 5  # on the page of every reason
REJECTS_PAGE = 50  # on the page of one reason


# -- rejects -------------------------------------------------------------------------------------------------
def rejects(viewer: Viewer, params: Mapping[str, str]) -> dict[str, Any]:
    """Every reject grouped by the kind of its reason (gen/view/reject_groups.py); with ?reason=KIND, the rejects
    of that kind, a page of REJECTS_PAGE at a time."""
    index = viewer.index
    chosen = params.get("reason")
    context: dict[str, Any] = {
        "folder": viewer.folder,
        "indexing": not index.ready(REJECTS),
        "groups": [],
        "reason": chosen,
        "chart": None,
        "total": 0,
    }
    if context["indexing"]:
        return context
    try:
        page = max(1, int(params.get("page", "1")))
    except ValueError:
        raise QueryError("page is a whole number") from None
    kinds = reject_groups.groups(index)
    context["total"] = sum(group["n"] for group in kinds)
    context["chart"] = charts.horizontal_bars("rejects by reason", [(short(g["kind"]), g["n"]) for g in kinds[:12]])
    if chosen is not None and chosen not in {group["kind"] for group in kinds}:
        raise NotFound("no reject of this run has that reason")
    for group in kinds:
        if chosen is not None and group["kind"] != chosen:
            continue
        limit = REJECTS_PAGE if chosen is not None else REJECTS_PER_GROUP
        pages = max(1, -(-group["n"] // limit))
        shown = page if chosen is not None else 1
        offset = first_row(RecordsQuery(shown, limit), group["n"])  # a page past the last is refused
        rows = reject_groups.members(index, group["kind"], limit, offset)
        context["groups"].append(
            {
                "reason": group["kind"],
                "n": group["n"],
                "items": [reject_item(row["_row"], json.loads(row["raw"])) for row in rows],
                "link": "/rejects?" + urlencode({"reason": group["kind"]}),
                "pages": pages,
                "page": shown,
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
