"""JSONL records → typed pyarrow tables: each record checked against its config's declared schema by the check
`gen run`'s validation uses (gen/products/record_check.py; a record that does not fit is an error naming the file,
line and field), ISO text turned into date and time types."""

from __future__ import annotations

import json
from datetime import date, datetime
from pathlib import Path
from typing import Any

from gen.errors import GenError
from gen.products.record_check import TEMPORAL, RecordCheck
from gen.products.schema import Schema, as_features, feature_type

# --- ISO text → date and time types ----------------------------------------------------------------
# The JSONL keeps dates and times as ISO text; the features declare them timestamp[s] / date32 (the types
# `datasets` gives the JSONL when it loads it), so the parquet holds the same values. Only the exact text gen
# writes is accepted: a value that would not print back identically is an error, never a silent conversion.

TEMPORAL_FORMS = TEMPORAL


def parse_temporal(value: Any, dtype: str, where: str, path: Path, line: int) -> Any:
    if value is None:
        return None
    parsed: Any = None
    if isinstance(value, str):
        try:
            if dtype == "date32":
                parsed = date.fromisoformat(value)
                parsed = parsed if parsed.isoformat() == value else None
            else:
                parsed = datetime.fromisoformat(value)
                ok = parsed.tzinfo is None and parsed.isoformat(timespec="seconds") == value
                parsed = parsed if ok else None
        except ValueError:
            parsed = None
    if parsed is None:
        shown = json.dumps(value, ensure_ascii=False)
        raise GenError(
            f"value {shown[:57] + '...' if len(shown) > 60 else shown} is not a {dtype} value",
            file=path,
            record=f"line {line}",
            field=where,
            expected=TEMPORAL_FORMS[dtype],
        )
    return parsed


def holds_temporal(feature: Any) -> bool:
    from datasets import LargeList, List

    if isinstance(feature, dict):
        return any(holds_temporal(sub) for sub in feature.values())
    if isinstance(feature, (List, LargeList)):
        return holds_temporal(feature.feature)
    if isinstance(feature, list):
        return holds_temporal(feature[0])
    return getattr(feature, "dtype", None) in TEMPORAL_FORMS


def typed(value: Any, feature: Any, where: str, path: Path, line: int) -> Any:
    """`value` with the ISO text of every timestamp[s] and date32 field parsed (after the RecordCheck)."""
    from datasets import LargeList, List

    dtype = getattr(feature, "dtype", None)
    if dtype in TEMPORAL_FORMS:
        return parse_temporal(value, dtype, where, path, line)
    if isinstance(feature, dict) and isinstance(value, dict):
        return {
            key: typed(item, feature[key], f"{where}.{key}" if where else key, path, line)
            if holds_temporal(feature[key])
            else item
            for key, item in value.items()
        }
    if isinstance(feature, (List, LargeList, list)) and isinstance(value, list):
        inner = feature[0] if isinstance(feature, list) else feature.feature
        return [typed(item, inner, f"{where}[{position}]", path, line) for position, item in enumerate(value)]
    return value


def to_table(rows: list[dict], declared: Schema, path: Path, first_line: int = 1):
    """Records (from line `first_line` of `path` on) as an arrow table of the declared features."""
    import pyarrow as pa

    features = as_features(declared)
    schema = features.arrow_schema
    fields = dict(features)
    temporal = {name: feature for name, feature in fields.items() if holds_temporal(feature)}
    typed_rows = []
    check = RecordCheck(declared)  # the run's validation checked every record the same way
    fit = check.all_fit(rows)
    for number, row in enumerate(rows, start=first_line):
        found = None if fit else check.mismatch(row)
        if found is not None:
            raise GenError(
                found.problem, file=path, record=f"line {number}", field=found.field, expected=found.expected
            )
        parsed = {name: typed(row[name], feature, name, path, number) for name, feature in temporal.items()}
        typed_rows.append({**row, **parsed} if parsed else row)
    rows = typed_rows
    try:
        return pa.Table.from_pylist(rows, schema=schema)
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError) as exc:
        raise locate_type_error(rows, features, declared, path, first_line) or GenError(
            f"records do not fit the schema: {exc}", file=path
        ) from exc


def locate_type_error(rows: list[dict], features, declared: Schema, path: Path, first_line: int = 1) -> GenError | None:
    import pyarrow as pa

    for entry in declared:
        name = entry["name"]
        arrow_type = features.arrow_schema.field(name).type
        for number, row in enumerate(rows, start=first_line):
            try:
                pa.array([row.get(name)], type=arrow_type)
            except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError):
                shown = json.dumps(row.get(name), ensure_ascii=False)
                shown = shown if len(shown) <= 60 else shown[:57] + "..."
                return GenError(
                    f"value {shown} does not fit the declared type",
                    file=path,
                    record=f"line {number}",
                    field=name,
                    expected=f"{feature_type(entry)} (the product's features())",
                )
    return None
