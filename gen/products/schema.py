"""Config schemas as plain data, in the form `datasets` writes into a dataset card's `dataset_info` features.

A schema is a list of fields, each a dict with its `name` and one type entry:

    {"name": "text", "dtype": "string"}                          a value (string, int64, bool, timestamp[s], ...)
    {"name": "ids", "list": "int64"}                             a list of values
    {"name": "turns", "list": [{"name": "speaker", ...}, ...]}   a list of structs
    {"name": "groups", "list": {"list": "string"}}               a list of lists
    {"name": "params", "struct": [{"name": "session", ...}]}     a struct

Declaring schemas as data keeps `gen run` from importing `datasets` (a second of start-up) just to describe its
configs: the card copies them as they are. `as_features` turns one into `datasets.Features` for the exporter
and tests, with the parser `datasets` uses for cards.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from datasets import Features

Type = dict[str, Any]  # a field without its name: {"dtype": ...}, {"list": ...} or {"struct": [...]}
Schema = list[dict[str, Any]]  # the fields of a config, in order


def value(dtype: str) -> Type:
    """A single value: a pyarrow type name as `datasets.Value` takes it."""
    return {"dtype": dtype}


STRING = value("string")
INT64 = value("int64")
FLOAT64 = value("float64")
BOOL = value("bool")
TIMESTAMP = value("timestamp[s]")  # the JSONL holds ISO text to the second; datasets loads a datetime
DATE = value("date32")  # the JSONL holds an ISO date; datasets loads a date


def list_of(item: Type) -> Type:
    """A list of `item`, shortened the way `datasets` shortens it: a list of values names the dtype, a list of
    structs holds the struct's fields."""
    if set(item) == {"dtype"}:
        return {"list": item["dtype"]}
    if set(item) == {"struct"}:
        return {"list": item["struct"]}
    return {"list": item}


def list_item(declared: Type) -> Type:
    """The item type of a list type, undoing `list_of`'s shortening."""
    item = declared["list"]
    if isinstance(item, str):
        return {"dtype": item}
    if isinstance(item, list):
        return {"struct": item}
    return item


def struct(fields: Mapping[str, Type]) -> Type:
    return {"struct": schema(fields)}


def schema(fields: Mapping[str, Type]) -> Schema:
    """A config's fields from name → type, in order. Copied deeply, so a type used twice is two objects (a YAML
    dump would otherwise write an anchor and an alias)."""
    return [{"name": name, **copy.deepcopy(kind)} for name, kind in fields.items()]


def feature_type(entry: Type) -> str:
    """A short readable type of a declared field: string, int64, list[int64], {speaker: string, text: string}..."""
    if "struct" in entry:
        return "{" + ", ".join(f"{field['name']}: {feature_type(field)}" for field in entry["struct"]) + "}"
    if "list" in entry:
        return f"list[{feature_type(list_item(entry))}]"
    return str(entry["dtype"])


def field_names(declared: Schema) -> list[str]:
    return [entry["name"] for entry in declared]


def as_features(declared: Schema) -> Features:
    """`datasets.Features` of a declared schema (imports `datasets`). `Features._from_yaml_list` is the parser
    `datasets` applies to a card's `dataset_info`; it is private, so it is called here only."""
    from datasets import Features

    return Features._from_yaml_list(declared)
