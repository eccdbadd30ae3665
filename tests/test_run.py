"""End to end: the quickstart builds, loads with datasets offline, and a failed run leaves the old output."""

from __future__ import annotations

import json
import os
import shutil

import pytest

from gen.pipeline.options import RunOptions
from gen.pipeline.runner import run
from gen.recipe import load_recipe
from tests.conftest import REPO, gen_subprocess, read_jsonl, run_cli, write_json, write_recipe


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory):
    out = tmp_path_factory.mktemp("out")
    return run(load_recipe(REPO / "recipes" / "quickstart.yaml"), RunOptions(output_dir=out))


def test_quickstart_writes_the_documented_layout(quickstart):
    names = sorted(p.relative_to(quickstart).as_posix() for p in quickstart.rglob("*") if p.is_file())
    assert {
        "README.md",
        "run.json",
        "recipe.yaml",
        "rejects.jsonl",
        "log/test.jsonl",
        "conversations/test.jsonl",
    } <= set(names)
    assert not [p for p in quickstart.parent.iterdir() if p.name.startswith(".")]  # no temporary folder left


def test_quickstart_log_matches_the_sample_turn_for_turn(quickstart):
    sample = json.loads((REPO / "gen" / "data" / "sample_locomo.json").read_text())
    rows = read_jsonl(quickstart / "log" / "test.jsonl")
    for entry in sample:
        conversation = entry["conversation"]
        turns = [t for n in range(1, 50) for t in conversation.get(f"session_{n}", [])]
        mine = [r for r in rows if r["conversation_id"] == f"locomo/{entry['sample_id']}"]
        real = [r for r in mine if not r["is_padding"]]
        assert [(r["source_turn_id"], r["speaker"], r["text"]) for r in real] == [
            (t["dia_id"], t["speaker"], t["text"]) for t in turns
        ]
        assert [r["response_index"] for r in mine] == list(range(len(mine)))
        assert sum(len(r["text"].split()) for r in mine if r["is_padding"]) >= 800  # the recipe's target_words


def test_run_report_has_fingerprint_versions_counts_and_validation(quickstart):
    report = json.loads((quickstart / "run.json").read_text())
    assert len(report["recipe"]["fingerprint"]) == 64
    assert report["packages"]["gen"] and report["packages"]["datasets"]
    assert report["configs"]["log"]["records"] == len(read_jsonl(quickstart / "log" / "test.jsonl"))
    assert all(result["passed"] for result in report["validation"].values())
    kept = load_recipe(quickstart / "recipe.yaml")  # the bundled sample, found by its name
    original = load_recipe(REPO / "recipes" / "quickstart.yaml")
    assert [source.path for source in kept.sources] == [source.path for source in original.sources]
    assert kept.fingerprint == original.fingerprint


def test_run_json_records_the_version_of_every_capped_dependency(quickstart):
    """pyproject.toml caps the libraries whose new majors may change the bytes a run writes; run.json must say
    which version of each wrote this run."""
    import re
    import tomllib
    from importlib import metadata

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    capped = [re.match(r"[A-Za-z0-9_.-]+", dep)[0] for dep in project["dependencies"] if "<" in dep]
    packages = json.loads((quickstart / "run.json").read_text())["packages"]
    assert {"sqlglot", "pyarrow", "num2words", "jinja2", "datasets"} <= set(capped)
    for name in capped:
        assert packages[name] == metadata.version(name), name


def test_a_copied_run_folder_rebuilds_the_same_bytes_elsewhere(tmp_path):
    """The run folder names its inputs by file name and sha256 only: copied to another place, with its source in
    yet another folder, `gen run recipe.yaml --source-dir` rebuilds it byte for byte; a different file of the
    same name is refused, naming the sha256 it should have."""
    corpus = tmp_path / "corpora" / "mine.json"
    corpus.parent.mkdir()
    corpus.write_bytes((REPO / "gen" / "data" / "sample_locomo.json").read_bytes())
    recipe = {
        "name": "moved",
        "seed": 5,
        "sources": [{"format": "locomo", "path": str(corpus)}],
        "products": [{"type": "log"}],
    }
    first = gen_subprocess("run", write_recipe(tmp_path / "r.yaml", recipe), "--output-dir", tmp_path / "one")
    assert first.returncode == 0, first.stderr
    copy = tmp_path / "elsewhere" / "moved"
    shutil.copytree(tmp_path / "one" / "moved", copy)
    assert str(tmp_path) not in (copy / "recipe.yaml").read_text()
    stash = tmp_path / "stash"
    stash.mkdir()
    corpus.rename(stash / "mine.json")
    again = gen_subprocess("run", copy / "recipe.yaml", "--source-dir", stash, "--output-dir", tmp_path / "two")
    assert again.returncode == 0, again.stderr
    for name in ("log/test.jsonl", "conversations/test.jsonl", "recipe.yaml", "README.md"):
        assert (tmp_path / "two" / "moved" / name).read_bytes() == (tmp_path / "one" / "moved" / name).read_bytes()
    (stash / "mine.json").write_text((stash / "mine.json").read_text().replace("Maya", "Mira"))
    refused = gen_subprocess("run", copy / "recipe.yaml", "--source-dir", stash, "--output-dir", tmp_path / "three")
    assert refused.returncode == 2 and "sources[0].sha256" in refused.stderr and "sha256 differs" in refused.stderr


def test_datasets_loads_every_config_offline(quickstart, monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    import datasets

    for config in ("log", "conversations"):
        loaded = datasets.load_dataset(str(quickstart), config, split="test")
        rows = read_jsonl(quickstart / config / "test.jsonl")
        assert loaded.num_rows == len(rows)
        assert loaded[0]["conversation_id"] == rows[0]["conversation_id"]


def test_fingerprint_ignores_output_dir_but_not_the_timeline(tmp_path):
    sample = write_json(tmp_path / "s.json", json.loads((REPO / "gen" / "data" / "sample_locomo.json").read_text()))
    base = {"name": "f", "sources": [{"format": "locomo", "path": str(sample)}], "products": [{"type": "log"}]}
    first = load_recipe(write_recipe(tmp_path / "a.yaml", base)).fingerprint
    moved = load_recipe(write_recipe(tmp_path / "b.yaml", {**base, "output_dir": "elsewhere"})).fingerprint
    slower = load_recipe(write_recipe(tmp_path / "c.yaml", {**base, "timeline": {"seconds_per_word": 0.5}})).fingerprint
    assert first == moved != slower


def make_recipe(tmp_path, source: str) -> str:
    return write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "atomic",
            "sources": [{"format": "locomo", "path": source}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [{"type": "log"}],
        },
    )


def test_a_failed_run_leaves_the_previous_output_intact(tmp_path, capsys):
    sample = json.loads((REPO / "gen" / "data" / "sample_locomo.json").read_text())
    write_json(tmp_path / "good.json", sample)
    assert run_cli(["run", make_recipe(tmp_path, "good.json"), "--output-dir", tmp_path / "out"], capsys)[0] == 0
    before = {p: p.read_bytes() for p in (tmp_path / "out" / "atomic").rglob("*") if p.is_file()}

    sample[1]["conversation"]["session_2"][3]["text"] = "   "
    write_json(tmp_path / "good.json", sample)
    code, _, err = run_cli(["run", make_recipe(tmp_path, "good.json"), "--output-dir", tmp_path / "out"], capsys)
    assert code == 2 and "sample-2, session_2, turn D2:4: text" in err
    after = {p: p.read_bytes() for p in (tmp_path / "out" / "atomic").rglob("*") if p.is_file()}
    assert after == before
    assert sorted(os.listdir(tmp_path / "out")) == ["atomic"]


def test_a_run_that_fails_validation_is_kept_aside_and_not_published(tmp_path, capsys, monkeypatch):
    write_json(tmp_path / "good.json", json.loads((REPO / "gen" / "data" / "sample_locomo.json").read_text()))

    def failing(self, unit, records, checks, ctx):
        checks.check("always fails", False, "forced by the test")

    monkeypatch.setattr("gen.products.chat_log.log.Log.validate", failing)
    code, _, err = run_cli(["run", make_recipe(tmp_path, "good.json"), "--output-dir", tmp_path / "out"], capsys)
    assert code == 1 and "validation failed for log" in err
    assert not (tmp_path / "out" / "atomic").exists()
    kept = json.loads((tmp_path / "out" / ".atomic.failed" / "run.json").read_text())
    forced = kept["validation"]["log"]["checks"]["always fails"]
    assert forced["checked"] == forced["failed"] == 2  # the log is validated conversation by conversation
    assert forced["examples"] == ["forced by the test"] * 2


def test_fingerprint_ignores_llm_run_limits_but_not_the_model(tmp_path):
    sample = write_json(tmp_path / "s.json", json.loads((REPO / "gen" / "data" / "sample_locomo.json").read_text()))
    base = {
        "name": "f",
        "sources": [{"format": "locomo", "path": str(sample)}],
        "products": [{"type": "log"}],
        "llm": {"main": {"model": "m1", "base_url": "http://127.0.0.1:9/v1", "max_concurrency": 4}},
    }
    first = load_recipe(write_recipe(tmp_path / "a.yaml", base)).fingerprint
    faster = json.loads(json.dumps(base))
    faster["llm"]["main"].update(max_concurrency=64, requests_per_minute=1000)
    other_model = json.loads(json.dumps(base))
    other_model["llm"]["main"]["model"] = "m2"
    assert load_recipe(write_recipe(tmp_path / "b.yaml", faster)).fingerprint == first
    assert load_recipe(write_recipe(tmp_path / "c.yaml", other_model)).fingerprint != first
