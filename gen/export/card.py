"""The dataset card README.md: one renderer for the run folder (JSONL files) and the Hub export (parquet).

A card is a YAML header (configs and data files so `datasets.load_dataset(folder_or_repo, config)` works,
the license derived from the sources, tags...) and a body rendered from templates/card/README.md.j2.
Facts about sources and methods (licenses, citations) come from templates/card/facts.yaml; this module
only gathers and shapes data for the template, the wording is in the templates.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import yaml

from gen.export.card_header import (
    card_metadata,
    combine,
    default_config,
    dump_header,
    load_yaml,
    local_dataset_info,
    merge_metadata,
    read_card_metadata,
)
from gen.jsonl import read_jsonl
from gen.personal import entry_is_personal
from gen.products.registry import run_features
from gen.products.schema import Schema, Type, feature_type, list_item
from gen.provenance import public_recipe, public_url
from gen.templating import INSTALLED, Templates

if TYPE_CHECKING:
    from gen.export.files import ExportFile

FACTS = "card/facts.yaml"
# always gen's: they must describe the files next to the card and the sources they were made from
EXAMPLE_ITEMS = 4  # list items an example record shows
EXAMPLE_CHARS = 200  # characters of a text an example record shows


@dataclass(frozen=True)
class Published:
    """What a Hub export changes in the card: its parquet data files and their features, the repo (None for a
    local export folder), the files it holds, and whether the publisher gave the word to upload people's own
    logs (--personal-data-ok)."""

    data_files: dict[str, str]
    dataset_info: list[dict]
    repo_id: str | None
    files: Sequence[ExportFile]
    personal_data_ok: bool = False


# --- facts ----------------------------------------------------------------------------------------


def load_facts(templates: Templates = INSTALLED) -> dict:
    text, filename = templates.source(FACTS)
    try:
        return load_yaml(text)
    except yaml.YAMLError as exc:
        from gen.errors import GenError

        raise GenError(f"not valid YAML: {exc}", file=filename) from None


def source_facts(source: dict, facts: dict) -> dict:
    """The facts entry for one of run.json's sources: bundled files first, then the source format."""
    bundled = bool(source.get("bundled"))
    for key, entry in facts["sources"].items():
        if entry.get("bundled") if bundled else source.get("format") in entry.get("match", []):
            return {"id": key, **entry}
    return {"id": "unknown", **facts["unknown_source"]}


def licenses(sources: list[dict]) -> list[dict]:
    seen: dict[str, dict] = {}
    for source in sources:
        facts = source["facts"]
        seen.setdefault(
            facts["license"],
            {"id": facts["license"], "name": facts["license_name"], "url": facts.get("license_url"), "sources": []},
        )
        seen[facts["license"]]["sources"].append(facts["name"])
    return list(seen.values())


# --- body data ------------------------------------------------------------------------------------


def config_features(name: str, info: dict) -> Schema | None:
    """The schema of `name` as the run wrote it (plain data, no `datasets` import): the product's, with what its
    run.json entry `info` adds (registry.run_features); None when no product writes `name`."""
    return run_features(name, info)


def field_rows(declared: Schema | None) -> list[dict]:
    return [{"name": entry["name"], "type": feature_type(entry)} for entry in declared or []]


def temporal_fields(declared: Schema | None, prefix: str = "") -> dict[str, list[str]]:
    """Fields declared as date-times (`timestamp[...]`) and as dates (`date32`/`date64`), nested ones dotted: the
    JSON files hold them as ISO strings, `datasets` loads them as datetime and date."""
    found: dict[str, list[str]] = {"datetime": [], "date": []}
    for entry in declared or []:
        path = f"{prefix}{entry['name']}"
        kind: Type = entry
        while "list" in kind:
            kind = list_item(kind)  # a list's items
        if "struct" in kind:
            for category, paths in temporal_fields(kind["struct"], f"{path}.").items():
                found[category] += paths
            continue
        dtype = str(kind.get("dtype", ""))
        if dtype.startswith("timestamp"):
            found["datetime"].append(path)
        elif dtype.startswith("date"):
            found["date"].append(path)
    return found


def data_sizes(folder: Path | None, configs: dict) -> dict[str, int]:
    """Bytes of each config's data file in a run folder (none without the folder)."""
    if folder is None:
        return {}
    paths = {name: Path(folder) / info["path"] for name, info in configs.items() if "path" in info}
    return {name: path.stat().st_size for name, path in paths.items() if path.is_file()}


def first_record(path: Path) -> dict | None:
    """The first record of a JSON lines file (one line read, whatever the file's size); None if there is none."""
    try:
        with path.open(encoding="utf-8") as handle:
            line = handle.readline()
        record = json.loads(line) if line.strip() else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return record if isinstance(record, dict) else None


def shorten(value: Any) -> tuple[Any, bool]:
    """(value cut for display, whether anything was cut): a list keeps its first EXAMPLE_ITEMS items and ends with
    a note of how many more there are; a long text is cut at EXAMPLE_CHARS and ends in an ellipsis."""
    if isinstance(value, str) and len(value) > EXAMPLE_CHARS:
        return value[: EXAMPLE_CHARS - 1].rstrip() + "\u2026", True
    if isinstance(value, dict):
        parts = {key: shorten(item) for key, item in value.items()}
        return {key: item for key, (item, _) in parts.items()}, any(cut for _, cut in parts.values())
    if isinstance(value, list):
        parts_list = [shorten(item) for item in value[:EXAMPLE_ITEMS]]
        kept = [item for item, _ in parts_list]
        if len(value) > EXAMPLE_ITEMS:
            kept.append(f"\u2026 {len(value) - EXAMPLE_ITEMS} more")
        return kept, len(value) > EXAMPLE_ITEMS or any(cut for _, cut in parts_list)
    return value, False


def example_record(folder: Path | None, path: str) -> dict | None:
    """A config's first record as the card shows it: one field per line, shortened."""
    record = first_record(Path(folder) / path) if folder is not None else None
    if record is None:
        return None
    short, cut = shorten(record)
    lines = [
        f"  {json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False)}"
        for key, value in short.items()
    ]
    return {"json": "{\n" + ",\n".join(lines) + "\n}", "shortened": cut}


def retrieval_groups(configs: dict) -> dict[str, str]:
    """The configs scored by recall/F2 over relevant responses, with the field their scores are averaged by."""
    return {name: info["questions"]["group_field"] for name, info in configs.items() if "questions" in info}


def summary_tables(summary: Any) -> list[dict]:
    """A product's summary(rows) as tables {title, key, columns, rows, total}: a dict of dicts is one table whose
    rows are the outer keys, a dict of numbers a two-column table, loose numbers one table; a `total` dict whose
    keys are a table's columns becomes that table's last row."""
    if not isinstance(summary, dict) or not summary:
        return []
    if all(isinstance(v, dict) and v and all(is_scalar(x) for x in v.values()) for v in summary.values()):
        return [grid(None, "name", summary)]
    tables, scalars, totals = [], {}, {}
    for key, value in summary.items():
        if isinstance(value, list) or value in ({}, None):  # a list (the tests with no question) repeats a zero row
            continue
        if is_scalar(value):
            scalars[key] = value
        elif isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            tables.append(grid(key, key.removeprefix("by_"), value))
        elif isinstance(value, dict) and key in ("total", "totals"):
            totals = value
        elif isinstance(value, dict):
            tables.append(pairs(key, key.removeprefix("by_"), value))
        else:
            scalars[key] = json.dumps(value, ensure_ascii=False)
    target = next((t for t in tables if t["title"] and set(totals) <= set(t["columns"])), None)
    if totals and target is not None:
        target["total"] = [totals.get(column, "") for column in target["columns"]]
    elif totals:
        tables.append(pairs("total", "count", totals))
    if scalars:
        tables.insert(0, pairs(None, "count", scalars))
    return tables


def pairs(title: str | None, key: str, values: dict) -> dict:
    counts = all(isinstance(v, int) and not isinstance(v, bool) for v in values.values())
    return {
        "title": title,
        "key": key,
        "columns": ["count" if counts else "value"],
        "total": None,
        "rows": [[k, v if is_scalar(v) else json.dumps(v, ensure_ascii=False)] for k, v in values.items()],
    }


def grid(title: str | None, key: str, rows: dict) -> dict:
    columns = list(dict.fromkeys(column for value in rows.values() for column in value))
    return {
        "title": title,
        "key": key,
        "columns": columns,
        "total": None,
        "rows": [[name, *[value.get(column, "") for column in columns]] for name, value in rows.items()],
    }


def is_scalar(value: Any) -> bool:
    return value is None or isinstance(value, (str, int, float, bool))


def provenance(configs: dict) -> list[dict]:
    """Per config, the models and prompt ids its records name, as counted while the records were written."""
    out = []
    for name, info in configs.items():
        found = info.get("provenance") or {}
        if found.get("models") or found.get("prompts"):
            out.append(
                {
                    "config": name,
                    "models": [tuple(m) for m in found.get("models", [])],
                    "prompts": [tuple(p) for p in found.get("prompts", [])],
                }
            )
    return out


def local_target(target: Path | None) -> str:
    """How the card's snippets name the run folder: the path as given when relative; a folder given by an absolute
    path is named by its own name (load it from the folder above), so no card names this machine's folders."""
    if target is None:
        return "path/to/this/folder"
    return Path(target).name if Path(target).is_absolute() else str(target)


def endpoints(recipe: dict) -> list[dict]:
    """The recipe's named LLM endpoints: model and server (no key is ever in a recipe; credentials in a URL are
    dropped anyway)."""
    out = []
    llm = recipe.get("llm") if isinstance(recipe, dict) else None
    for name, endpoint in (llm or {}).items():
        if not isinstance(endpoint, dict):
            continue
        url = urlsplit(str(endpoint.get("base_url") or "https://api.openai.com/v1"))
        server = public_url(f"{url.scheme}://{url.hostname or ''}{f':{url.port}' if url.port else ''}{url.path}")
        sampling = {k: endpoint[k] for k in ("temperature", "top_p", "max_tokens", "seed") if k in endpoint}
        out.append({"name": name, "model": endpoint.get("model", "?"), "server": server, "sampling": sampling})
    return out


def reject_stats(folder: Path | None, configs: dict, items: dict | None = None) -> dict:
    """Rejected items per product, with their reasons from rejects.jsonl. `items`: run.json's `llm.products`
    (product -> items, ok, rejected), the run's one count of an LLM product's items; a product without it
    (its rejects made without the LLM) is measured against its records."""
    counts: Counter[str] = Counter()
    reasons: dict[str, Counter[str]] = {}
    path = Path(folder) / "rejects.jsonl" if folder else None
    for row in read_jsonl(path) if path is not None and path.is_file() else ():
        # an engine reject names its step, "product" or "product/part"
        product = str(row.get("product") or row.get("config") or row.get("step") or "?").split("/")[0]
        reason = str(row.get("reason") or "?").split(":")[0].strip()[:100]
        counts[product] += 1
        reasons.setdefault(product, Counter())[reason] += 1
    by_product = []
    for product, count in counts.most_common():
        fates = (items or {}).get(product)
        of: int | None
        if isinstance(fates, dict) and fates.get("items"):
            count, of = int(fates["rejected"]), int(fates["items"])
        else:
            kept = configs.get(product, {}).get("records")
            of = count + kept if isinstance(kept, int) else None
        rate = count / of if of else None
        entry = {"product": product, "count": count, "of": of, "rate": rate, "reasons": reasons[product].most_common()}
        by_product.append(entry)
    return {"total": sum(counts.values()), "by_product": by_product}


# --- the card -------------------------------------------------------------------------------------


def card_data(
    report: dict,
    templates: Templates = INSTALLED,
    *,
    folder: Path | None = None,
    published: Published | None = None,
    target: Path | None = None,
) -> dict:
    """Everything the template shows, gathered from the run report, the run folder and the facts."""
    facts = load_facts(templates)
    configs = report["configs"]
    data_files = published.data_files if published else {name: info["path"] for name, info in configs.items()}
    repo_id = published.repo_id if published else None
    recipe_text = (
        (Path(folder) / "recipe.yaml").read_text(encoding="utf-8")
        if folder and (Path(folder) / "recipe.yaml").is_file()
        else None
    )
    try:
        recipe = load_yaml(recipe_text) if recipe_text else {}
    except yaml.YAMLError:
        recipe = {}
    sources = [
        {**source, "facts": source_facts(source, facts), "own_logs": entry_is_personal(source)}
        for source in report.get("sources", [])
    ]
    methods = {name: {"id": key, **method} for key, method in facts["methods"].items() for name in method["configs"]}
    features = {name: config_features(name, info) for name, info in configs.items()}
    config_list = [
        config_entry(name, info, report, data_files[name], features[name], methods.get(name), folder)
        for name, info in configs.items()
    ]
    used_methods = list({m["id"]: m for m in (c["method"] for c in config_list) if m}.values())
    groups = retrieval_groups(configs)
    retrieval = list(groups)
    citations = [s["facts"].get("citation") for s in sources] + [m.get("citation") for m in used_methods]
    return {
        "name": report["recipe"]["name"],
        "gen_version": report.get("packages", {}).get("gen", "?"),
        "packages": report.get("packages", {}),
        "fingerprint": report["recipe"].get("fingerprint", ""),
        "seed": report["recipe"].get("seed"),
        "split": report["split"],
        "format": "parquet" if published else "jsonl",
        "on_hub": repo_id is not None,
        "target": repo_id or local_target(target),
        "configs": config_list,
        "config_names": list(configs),
        "sources": sources,
        "licenses": licenses(sources),
        "methods": used_methods,
        "recipe_text": public_recipe(recipe_text) if recipe_text else None,
        "endpoints": endpoints(recipe),
        "provenance": provenance(configs),
        "rejects": reject_stats(folder, configs, (report.get("llm") or {}).get("products")),
        "files": published.files if published else [],
        "timings": report.get("timings_s", {}),
        "padding": ((recipe.get("timeline") or {}).get("padding") or {}).get("mode", "donor"),
        "personal": {  # the section "Personal and sensitive information" (templates/card/sections/personal.md.j2)
            "redaction": report.get("redaction"),
            "published": published is not None,
            "consented": bool(published and published.personal_data_ok),
        },
        "citations": list(dict.fromkeys(c.strip() for c in citations if c)),
        "scoring": {"retrieval": retrieval, "group_field": groups[retrieval[0]] if retrieval else "test"},
        "local_dataset_info": local_dataset_info(features, data_sizes(folder, configs)),
        "default_config": default_config(list(configs), facts["metadata"].get("default_config", [])),
        "temporal": {
            kind: list(dict.fromkeys(path for c in config_list for path in c["temporal"][kind]))
            for kind in ("datetime", "date")
        },
        "example_limits": {"list_items": EXAMPLE_ITEMS, "text_chars": EXAMPLE_CHARS},
        "metadata_facts": facts["metadata"],  # what the header derives from the configs (card_metadata)
    }


def config_entry(
    name: str, info: dict, report: dict, data_files: str, features: Any, method: dict | None, folder: Path | None
) -> dict:
    """What the card says about one config: counts, fields, an example record, its method, validation."""
    validation = report.get("validation", {}).get(info.get("product", name), {})
    return {
        "name": name,
        "records": info["records"],
        "description": info.get("description", ""),
        "data_files": data_files,
        "fields": field_rows(features),
        "temporal": temporal_fields(features),
        "example": example_record(folder, info["path"]) if info.get("path") else None,
        "method": method,
        "summary": summary_tables(info.get("summary")),
        "validation": {
            "passed": validation.get("passed"),
            "checks": [{"name": check, **result} for check, result in validation.get("checks", {}).items()],
        },
    }


def render_card(
    report: dict,
    templates: Templates = INSTALLED,
    *,
    folder: Path | None = None,
    previous: Path | None = None,
    published: Published | None = None,
    existing: Iterable[dict] = (),
    overrides: dict | None = None,
    target: Path | None = None,
) -> str:
    """The whole README.md.

    folder: the run folder (recipe.yaml, rejects.jsonl and data files feed the provenance sections);
    previous: an earlier card at the destination, whose metadata is kept (merge_metadata);
    published: what a Hub export changes (parquet files and their features, the repo, the file list); without
    it, the card describes the run folder's JSONL files with each config's declared features;
    existing: more metadata to merge, above `previous` (e.g. the card already on the Hub);
    target: where the run folder is, as the user named it (the card's loading snippets use it);
    overrides: metadata that wins over everything gen derives (the recipe's export.hub.card)."""
    data = card_data(report, templates, folder=folder, published=published, target=target)
    base: dict = {}
    for metadata in [read_card_metadata(previous), *existing]:
        base = combine(base, metadata)
    generated = card_metadata(data, published.dataset_info if published else None)
    header = merge_metadata(base, generated)
    header.update(overrides or {})
    data["license_overridden"] = header.get("license") != generated.get("license")
    body = templates.render("card/README.md.j2", card=data, metadata=header)
    return dump_header(header) + "\n" + body
