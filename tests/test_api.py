"""The Python API (`import gen`): recipes from a file or a mapping, run, plan, summary, load, export and evaluate,
checked against what the run folder's files say (read here with json and csv) and against the command line."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys

import pytest
import yaml

import gen
from gen.errors import GenError
from tests.conftest import REPO, read_jsonl, run_cli

QUICKSTART = REPO / "recipes" / "quickstart.yaml"


def test_a_recipe_from_a_mapping_is_the_recipe_of_its_file(monkeypatch):
    monkeypatch.chdir(QUICKSTART.parent)  # the mapping's relative paths start from the working folder
    data = yaml.safe_load(QUICKSTART.read_text())
    assert gen.load_recipe(data).fingerprint == gen.load_recipe(QUICKSTART).fingerprint
    data["products"][2]["max_variants_per_grup"] = 2
    with pytest.raises(GenError) as info:
        gen.load_recipe(data)  # checked whole: a product's options too
    assert info.value.field == "products[2].max_variants_per_grup"


def test_run_summary_and_load_agree_with_the_files(tmp_path):
    folder = gen.run(QUICKSTART, gen.RunOptions(output_dir=tmp_path / "out"))
    assert folder == tmp_path / "out" / "quickstart"
    table = gen.summary(folder)
    counts = {name: len(read_jsonl(folder / name / "test.jsonl")) for name in table["config"]}
    assert dict(zip(table["config"], table["records"])) == counts
    assert table["validation_passed"].all()
    assert list(table.loc[table["questions"], "config"]) == ["time_queries", "ambiguous_time_queries"]

    loaded = gen.load(folder)
    assert {name: loaded[name].num_rows for name in loaded} == counts
    assert str(loaded["log"].features["timestamp"].dtype) == "timestamp[s]"


def test_evaluate_gives_the_table_gen_eval_writes_as_csv(tmp_path, capsys):
    folder = gen.run(QUICKSTART, gen.RunOptions(output_dir=tmp_path / "out"))
    rows = read_jsonl(folder / "time_queries" / "test.jsonl")
    predictions = tmp_path / "first.jsonl"  # only the first relevant response: recall 1/n for n relevant
    predictions.write_text(
        "".join(
            json.dumps({"question_id": r["question_id"], "retrieved": r["relevant_response_indices"][:1]}) + "\n"
            for r in rows
        )
    )
    table = gen.evaluate(folder, predictions).table
    pooled = table[(table["config"] == "time_queries") & (table["test"] == "(pooled)")].iloc[0]
    expected = sum(1 / len(r["relevant_response_indices"]) for r in rows) / len(rows)
    assert pooled["questions"] == len(rows) and pooled["recall"] == pytest.approx(expected)
    assert set(table["config"]) == {"time_queries"}  # the file answers no ambiguous query: not scored

    code, _, err = run_cli(["eval", folder, "--predictions", predictions, "--csv", tmp_path / "s.csv"], capsys)
    assert code == 0, err
    with open(tmp_path / "s.csv", newline="") as handle:
        written = list(csv.DictReader(handle))
    assert [(r["config"], r["test"]) for r in written] == list(zip(table["config"], table["test"]))
    assert [float(r["recall"]) for r in written] == pytest.approx(list(table["recall"]))


def test_export_writes_the_harness_layout(tmp_path):
    folder = gen.run(QUICKSTART, gen.RunOptions(output_dir=tmp_path / "out"))
    out = tmp_path / "locomo"
    written = gen.export_harness(folder, "locomo", out)
    manifest = json.loads((out / "gen-export.json").read_text())
    assert {item.config for item in written} == set(manifest["configs"])
    assert set(manifest["configs"]) == {"time_queries", "ambiguous_time_queries"}


def test_plan_is_the_table_gen_plan_prints(tmp_path, capsys):
    recipe = REPO / "recipes" / "local-model.yaml"
    table = gen.plan(recipe, gen.PlanOptions(cache_dir=tmp_path))
    code, out, err = run_cli(["plan", recipe, "--cache-dir", tmp_path], capsys)
    assert code == 0, err
    printed = [line.split() for line in out.splitlines()[1:]]
    assert [[r[0], *(int(n.replace(",", "")) for n in r[1:5])] for r in printed] == table[
        ["step", "items", "needed", "cached", "at_most"]
    ].values.tolist()
    assert table.iloc[0]["items"] == 2 * 5  # two conversations, per_conversation 5


def test_the_readmes_python_example_runs(tmp_path):
    readme = (REPO / "README.md").read_text()
    example = readme.split("## From Python", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "example.py"
    script.write_text(example.replace('"recipes/quickstart.yaml"', repr(str(QUICKSTART))))
    env = {**os.environ, "PYTHONPATH": str(REPO)}  # this checkout's gen, whichever one the venv installed
    done = subprocess.run([sys.executable, script], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr
    assert "(pooled)" in done.stdout and "time_queries" in done.stdout
    assert (tmp_path / "exports" / "quickstart-beir" / "gen-export.json").is_file()
