"""The dataset card's YAML header: the configs and data files `datasets.load_dataset` reads, each config's
features, the license, tags and size; merged with metadata a publisher already wrote, where gen keeps what
describes its own files and leaves the rest to the publisher."""

from __future__ import annotations

import copy
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from gen.products.schema import Schema

# always gen's: they must describe the files next to the card and the sources they were made from
OWNED_KEYS = ("configs", "dataset_info", "license", "source_datasets")
DATA_KEYS = ("configs", "dataset_info")
STATEMENTS = ("annotations_creators",)  # how labels were made: a publisher who set it knows better than gen
SIZE_CATEGORIES = (
    (10**3, "n<1K"),
    (10**4, "1K<n<10K"),
    (10**5, "10K<n<100K"),
    (10**6, "100K<n<1M"),
    (10**7, "1M<n<10M"),
    (10**8, "10M<n<100M"),
    (10**9, "100M<n<1B"),
)


def config_entries(data_files: dict[str, str], split: str, default: str | None = None) -> list[dict]:
    """`configs:` entries that let `datasets.load_dataset(folder_or_repo, config)` find each config's files;
    `default` (the first config when None) is what load_dataset gives without a config name and the tab the
    Hub's viewer opens on."""
    default = default if default in data_files else next(iter(data_files), None)
    entries = []
    for name, path in data_files.items():
        entry: dict[str, Any] = {"config_name": name, "data_files": [{"split": split, "path": path}]}
        if name == default:
            entry["default"] = True
        entries.append(entry)
    return entries


def default_config(names: Sequence[str], preference: Sequence[str]) -> str | None:
    """The config a reader should see first: the first of `preference` the dataset has (a question config
    rather than the log), else the first config."""
    return next((name for name in preference if name in names), next(iter(names), None))


def load_yaml(text: str) -> Any:
    """yaml.safe_load with libyaml's parser when PyYAML has it: the same data, several times faster on the large
    headers that dataset_info makes."""
    return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def dump_header(header: dict) -> str:
    return "---\n" + yaml.safe_dump(header, sort_keys=False, allow_unicode=True, width=1000) + "---\n"


def split_card(text: str) -> tuple[dict, str]:
    """(metadata, body) of a README.md; a card without a YAML header has empty metadata."""
    if text.startswith("---\n"):
        end = text.find("\n---\n", 3)
        if end != -1:
            data = load_yaml(text[4 : end + 1]) or {}
            if not isinstance(data, dict):
                raise ValueError("the card's YAML header is not a mapping")
            return data, text[end + 5 :]
    return {}, text


def read_card_metadata(path: Path | None) -> dict:
    """The metadata of an existing card; a missing or unreadable one counts as empty (it is regenerated)."""
    if path is None or not Path(path).is_file():
        return {}
    try:
        return split_card(Path(path).read_text(encoding="utf-8"))[0]
    except (ValueError, yaml.YAMLError, UnicodeDecodeError):
        return {}


def combine(low: dict, high: dict) -> dict:
    """Two existing cards' metadata: `high` wins for single values, lists are united (`high`'s entries first)."""
    out = dict(low)
    for key, value in high.items():
        if isinstance(value, list) and isinstance(out.get(key), list):
            out[key] = value + [item for item in out[key] if item not in value]
        else:
            out[key] = value
    return out


def merge_metadata(existing: dict, generated: dict) -> dict:
    """Existing metadata (a card someone may have edited) updated with gen's: keys gen owns are replaced,
    lists are united (existing entries first) except STATEMENTS, other keys already set keep their value, new
    keys are added."""
    # the keys that locate and type the data describe these files only: an older card's never survive
    merged = {k: v for k, v in existing.items() if k not in DATA_KEYS or k in generated}
    for key, value in generated.items():
        if key in OWNED_KEYS or key not in merged or merged[key] in (None, "", []):
            merged[key] = value
        elif isinstance(value, list) and isinstance(merged[key], list) and key not in STATEMENTS:
            merged[key] = merged[key] + [item for item in value if item not in merged[key]]
    # keep the keys that locate the data at the end, where a reader expects them
    return {
        **{k: v for k, v in merged.items() if k not in DATA_KEYS},
        **{k: merged[k] for k in DATA_KEYS if k in merged},
    }


def local_dataset_info(features: dict[str, Schema | None], sizes: dict[str, int]) -> list[dict]:
    """`dataset_info` for the run folder's card: each config's declared features, so the JSON loader casts to them
    instead of guessing from the values, and the size of its data file. `datasets` keys its cache of a local folder
    by the folder's name and this header, so the size keeps two runs of one name from sharing (and returning)
    one cache entry; it is not checked on load, so a hand-trimmed JSON file still loads (split sizes would be).
    Copies, so the header never shares (or lets anyone change) the products' declarations."""
    return [
        {
            "config_name": name,
            "features": copy.deepcopy(declared),
            **({"download_size": sizes[name]} if name in sizes else {}),
        }
        for name, declared in features.items()
        if declared is not None
    ]


def card_metadata(data: dict, dataset_info: list[dict] | None = None) -> dict:
    """The header gen generates: names, license (from the sources), language, how the data was made, tasks, size,
    tags, configs (the default one first in a reader's eyes) and each config's features."""
    facts = data["metadata_facts"]
    names = data["config_names"]
    ids = [entry["id"] for entry in data["licenses"]]
    largest = max((c["records"] for c in data["configs"]), default=0)

    def per_config(key: str) -> list[str]:
        return list(dict.fromkeys(value for name in names for value in (facts.get(key) or {}).get(name, [])))

    header: dict[str, Any] = {
        "pretty_name": data["name"],
        "license": ids[0] if len(ids) == 1 else ids,
        "language": sorted({lang for s in data["sources"] for lang in s["facts"].get("language") or []}),
        "annotations_creators": facts.get("annotations_creators", []),
        "source_datasets": list(
            dict.fromkeys(s["facts"]["source_dataset"] for s in data["sources"] if s["facts"].get("source_dataset"))
        ),
        "task_categories": per_config("task_categories"),
        "task_ids": per_config("task_ids"),
        "size_categories": [next((label for limit, label in SIZE_CATEGORIES if largest < limit), "n>1T")],
        "tags": list(dict.fromkeys([*facts["tags"], *per_config("config_tags")])),
        "configs": config_entries(
            {c["name"]: c["data_files"] for c in data["configs"]}, data["split"], data["default_config"]
        ),
        "dataset_info": dataset_info if dataset_info is not None else data["local_dataset_info"],
    }
    return {k: v for k, v in header.items() if v not in ([], None)}
