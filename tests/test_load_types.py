"""The run folder (JSON lines) and its parquet export load alike with `datasets.load_dataset`: same features,
same values, record by record, for every config of the quickstart.

The expected values come from a separate path: each JSON line parsed with `json` and converted by the
standard library (`datetime.fromisoformat`, `date.fromisoformat`) wherever the product declares a date-time or
a date; everything else is the JSON value itself (a key a nested object omits is null)."""

from __future__ import annotations

import json
import re
from datetime import date, datetime
from pathlib import Path
from typing import Any

import pytest

from gen.export.card_header import split_card
from gen.export.hub_folder import build_export
from gen.pipeline.options import RunOptions
from gen.pipeline.runner import run
from gen.products.registry import config_spec
from gen.products.schema import as_features
from gen.recipe import load_recipe
from tests.conftest import REPO, read_jsonl, write_recipe

ISO_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}$")
ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory) -> Path:
    return run(load_recipe(REPO / "recipes" / "quickstart.yaml"), RunOptions(output_dir=tmp_path_factory.mktemp("out")))


@pytest.fixture(scope="module")
def export_folder(quickstart, tmp_path_factory) -> Path:
    return build_export(quickstart, tmp_path_factory.mktemp("export") / "quickstart").folder


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def configs_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())["configs"]


def expected_value(value: Any, feature: Any) -> Any:
    """A JSON value as the declared feature types it, by the standard library alone."""
    if value is None:
        return None
    if isinstance(feature, dict):
        return {key: expected_value(value.get(key), sub) for key, sub in feature.items()}
    inner = feature[0] if isinstance(feature, list) else getattr(feature, "feature", None)
    if inner is not None:
        return [expected_value(item, inner) for item in value]
    dtype = str(getattr(feature, "dtype", ""))
    if dtype.startswith("timestamp"):
        assert ISO_DATETIME.match(value), f"{value!r} is not an ISO date-time with seconds and no zone"
        return datetime.fromisoformat(value)
    if dtype.startswith("date"):
        assert ISO_DATE.match(value), f"{value!r} is not an ISO date"
        return date.fromisoformat(value)
    return value


def load(folder: Path, config: str, cache: Path):
    from datasets import load_dataset

    return load_dataset(str(folder), config, split="test", cache_dir=str(cache))


def first_difference(left: list[dict], right: list[dict]) -> str:
    for number, (a, b) in enumerate(zip(left, right), start=1):
        if a != b:
            fields = [key for key in a if a.get(key) != b.get(key)]
            return f"record {number} differs in {fields}: {[a.get(k) for k in fields]} != {[b.get(k) for k in fields]}"
    return f"{len(left)} records != {len(right)} records"


def test_the_run_folder_card_declares_every_config_s_features(quickstart):
    header, _ = split_card((quickstart / "README.md").read_text())
    declared = {info["config_name"]: info["features"] for info in header["dataset_info"]}
    assert list(declared) == list(configs_of(quickstart))
    for name, features in declared.items():
        assert features == config_spec(name)[1].features  # the declaration, copied as it is
    assert all("splits" not in info for info in header["dataset_info"])  # a trimmed file must still load


def test_jsonl_and_parquet_load_with_the_same_features_and_values(quickstart, export_folder, offline, tmp_path):
    for name, info in configs_of(quickstart).items():
        declared = as_features(config_spec(name)[1].features)
        from_jsonl = load(quickstart, name, tmp_path / "jsonl")
        from_parquet = load(export_folder, name, tmp_path / "parquet")
        assert from_jsonl.features == declared, name
        assert from_parquet.features == declared, name
        expected = [
            {key: expected_value(row.get(key), feature) for key, feature in declared.items()}
            for row in read_jsonl(quickstart / info["path"])
        ]
        assert len(expected) == info["records"] > 0, name
        jsonl_rows, parquet_rows = from_jsonl.to_list(), from_parquet.to_list()
        assert jsonl_rows == expected, f"{name}, JSON lines: {first_difference(jsonl_rows, expected)}"
        assert parquet_rows == expected, f"{name}, parquet: {first_difference(parquet_rows, expected)}"


def test_the_log_loads_its_timestamps_as_datetimes_and_keeps_iso_strings_on_disk(quickstart, offline, tmp_path):
    """The JSON file keeps `2024-03-22T16:12:08`; loaded, it is that moment, not a string with a space."""
    raw = read_jsonl(quickstart / "log" / "test.jsonl")[0]
    assert ISO_DATETIME.match(raw["timestamp"]) and ISO_DATE.match(raw["date"])
    first = load(quickstart, "log", tmp_path)[0]
    assert first["timestamp"] == datetime.fromisoformat(raw["timestamp"])
    assert first["date"] == date.fromisoformat(raw["date"])
    assert first["time"] == raw["time"]  # a time of day stays the string it is in the file


def test_two_runs_of_one_name_load_their_own_rows(tmp_path):
    """`datasets` keys its cache of a local folder by the folder's name and card header: two runs named alike (one
    conversation, then two) loaded into one cache each give their own records."""
    import datasets

    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from gen.recipe import load_recipe

    counts = {}
    for limit in (1, 2):
        recipe = {
            "name": "same",
            "sources": [
                {"format": "locomo", "path": str(REPO / "gen" / "data" / "sample_locomo.json"), "limit": limit}
            ],
            "products": [{"type": "log"}],
        }
        folder = run(
            load_recipe(write_recipe(tmp_path / f"r{limit}.yaml", recipe)),
            RunOptions(output_dir=tmp_path / f"out{limit}"),
        )
        lines = (folder / "log" / "test.jsonl").read_text().splitlines()
        loaded = datasets.load_dataset(str(folder), "log", split="test", cache_dir=str(tmp_path / "one-cache"))
        counts[limit] = (len(loaded), len(lines), loaded["conversation_id"][-1])
    assert counts[1][0] == counts[1][1] and counts[2][0] == counts[2][1] > counts[1][1]
    assert counts[1][2] != counts[2][2]  # the second run's last record is of its second conversation


def test_the_card_snippet_loads_two_folders_of_one_name_with_files_of_equal_size(quickstart, tmp_path, monkeypatch):
    """Files of equal size give equal card headers, so `datasets` would give both folders one cache: the card's
    snippet reads each folder afresh. The second folder differs from the first by one character of one text."""
    import shutil

    import datasets.config

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "one-shared-cache")
    first = shutil.copytree(quickstart, tmp_path / "a" / quickstart.name)
    second = shutil.copytree(quickstart, tmp_path / "b" / quickstart.name)
    log = second / "log" / "test.jsonl"
    text = log.read_text(encoding="utf-8")
    start = text.index('"text":"') + len('"text":"')
    log.write_text(text[:start] + ("X" if text[start] != "X" else "Y") + text[start + 1 :], encoding="utf-8")
    assert log.stat().st_size == (first / "log" / "test.jsonl").stat().st_size
    assert (second / "README.md").read_text() == (first / "README.md").read_text()
    for folder in (first, second):
        card = (folder / "README.md").read_text(encoding="utf-8")
        snippet = re.search(r"^log = (load_dataset\(.*\))$", card, re.MULTILINE).group(1)
        target = re.match(r'load_dataset\("([^"]*)"', snippet).group(1)
        namespace: dict = {}
        exec("from datasets import load_dataset", namespace)
        loaded = eval(snippet.replace(f'"{target}"', repr(str(folder)), 1), namespace)
        assert loaded["text"] == [row["text"] for row in read_jsonl(folder / "log" / "test.jsonl")]
