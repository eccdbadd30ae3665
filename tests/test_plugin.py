"""A product from another package, through the plugin seam: tests/plugin_example (the product
docs/adding-a-product.md builds) is installed as a real wheel into a folder of its own, which gen then finds
through its entry points in `gen products`, `gen run`, `gen push --dry-run`, `gen export` and `gen eval`; its
export format (qa_lines, the example of docs/harness-exports.md) in `gen export` and `gen import-predictions`.

Nothing of it is imported by this process: every command runs in a subprocess with the folder on PYTHONPATH,
as a user's environment with the package installed would have it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from gen.errors import GenError
from gen.export.harness import formats
from gen.export.harness.formats import ExportFormat
from tests.conftest import REPO, gen_subprocess, read_jsonl, write_recipe

PLUGIN = REPO / "tests" / "plugin_example"
# the plugin's own build backend (hatchling, from the test extra) builds the wheel; nothing is fetched
PIP_INSTALL = (sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index")


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The plugin built into a wheel (by its own build backend, hatchling) and installed into a folder."""
    folder = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [*PIP_INSTALL, "--target", str(folder), str(PLUGIN)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    assert (folder / "gen_speaker_sessions-0.1.0.dist-info" / "entry_points.txt").is_file()
    return folder


def gen(site: Path, *args) -> subprocess.CompletedProcess[str]:
    return gen_subprocess(*args, env={"PYTHONPATH": f"{site}:{REPO}"})


@pytest.fixture(scope="module")
def run_folder(site, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("run")
    recipe = write_recipe(
        folder / "speakers.yaml",
        {
            "name": "speakers",
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(REPO / "gen" / "data" / "sample_locomo.json")}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [{"type": "log"}, {"type": "speaker_sessions", "min_responses": 3}],
        },
    )
    done = gen(site, "run", recipe, "--output-dir", folder / "out")
    assert done.returncode == 0, done.stderr
    return folder / "out" / "speakers"


def test_gen_products_lists_the_plugins_product_after_gens_own(site):
    done = gen(site, "products")
    names = [line.split()[0] for line in done.stdout.splitlines()]
    assert done.returncode == 0 and names[-1] == "speaker_sessions" and names[0] == "log"


def test_gen_run_builds_and_validates_the_plugins_product(run_folder):
    report = json.loads((run_folder / "run.json").read_text())
    assert report["validation"]["speaker_sessions"]["passed"]
    assert report["configs"]["speaker_sessions"]["questions"] == {
        "group_field": "test",
        "answer_field": None,
        "asked_by_speaker_a": False,
        "answers_from": None,
        "answer_computed": False,
    }
    # expected from the log the run wrote: each (session, speaker) with 3 or more responses, in session order
    said = defaultdict(list)
    for row in read_jsonl(run_folder / "log" / "test.jsonl"):
        said[row["conversation_id"], row["session_index"], row["speaker"]].append(row["response_index"])
    rows = read_jsonl(run_folder / "speaker_sessions" / "test.jsonl")
    assert {(r["conversation_id"], r["session_index"], r["speaker"]): r["relevant_response_indices"] for r in rows} == {
        key: indices for key, indices in said.items() if len(indices) >= 3
    }
    first = rows[0]
    assert first["question"] == f"What did {first['speaker']} talk about in session 1?"  # the plugin's template


def test_the_plugins_questions_are_published_exported_and_scored(site, run_folder, tmp_path):
    pushed = gen(site, "push", run_folder, "--dry-run", "--export-dir", tmp_path / "hub")
    assert pushed.returncode == 0, pushed.stderr
    assert list((tmp_path / "hub" / "data" / "speaker_sessions").glob("*.parquet"))
    assert "speaker_sessions" in (tmp_path / "hub" / "README.md").read_text()

    exported = gen(site, "export", run_folder, "--format", "beir", "--output", tmp_path / "beir")
    assert exported.returncode == 0, exported.stderr
    rows = read_jsonl(run_folder / "speaker_sessions" / "test.jsonl")
    queries = [q for path in (tmp_path / "beir").rglob("queries.jsonl") for q in read_jsonl(path)]
    assert sorted(q["text"].rsplit(". ", 1)[-1] for q in queries) == sorted(r["question"] for r in rows)

    # each ranking holds only the first relevant response: recall 1/n for a question with n of them
    first_only = tmp_path / "first.jsonl"
    lines = [{"question_id": r["question_id"], "retrieved": r["relevant_response_indices"][:1]} for r in rows]
    first_only.write_text("".join(json.dumps(line) + "\n" for line in lines))
    scored = gen(site, "eval", run_folder, "--predictions", first_only, "--json", tmp_path / "scores.json")
    assert scored.returncode == 0, scored.stderr
    result = json.loads((tmp_path / "scores.json").read_text())["configs"]["speaker_sessions"]
    expected = sum(1 / len(r["relevant_response_indices"]) for r in rows) / len(rows)
    assert result["questions"] == len(rows) and result["pooled"]["recall"] == pytest.approx(expected)


def test_a_plugin_that_cannot_be_imported_is_one_error_naming_it(monkeypatch):
    from importlib import metadata

    from gen import plugins
    from gen.products.registry import discover

    real = list(metadata.entry_points(group=plugins.PRODUCTS))
    broken = metadata.EntryPoint("broken", "no_such_module:Product", plugins.PRODUCTS)
    monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: [*real, broken])
    with pytest.raises(GenError) as info:
        discover()
    assert str(info.value).startswith("entry point 'broken' of an unknown package: gen.products: cannot load ")
    assert "no_such_module:Product (ModuleNotFoundError" in str(info.value)

    monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: [broken])  # gen itself not installed
    with pytest.raises(GenError, match=r"gen's own gen\.products entry points are missing"):
        discover()


def test_a_process_handed_its_products_imports_no_other_product(tmp_path):
    """What a Ray worker does: import the task's module and unpickle the run's bound products, in a fresh process.
    Only those products' modules are imported (the worker is spared persona SQL's sqlglot, the quality labels'
    model code…); the registry, once asked, still lists every product, and sqlglot waits for a persona_sql run."""
    products = tmp_path / "products.pickle"
    pickled = """
import pickle, sys
from gen.products.registry import load
pickle.dump(load(sys.argv[1])[1], open(sys.argv[2], "wb"))
"""
    unpickled = """
import json, pickle, sys
import gen.pipeline.executors
pickle.load(open(sys.argv[1], "rb"))
families = sorted({m.split(".")[2] for m in sys.modules if m.startswith("gen.products.") and m.count(".") > 2})
from gen.products.registry import REGISTRY
listed = sorted(REGISTRY)
print(json.dumps([families, "sqlglot" in sys.modules, listed, "sqlglot" in sys.modules]))
"""
    quickstart = REPO / "recipes" / "quickstart.yaml"  # log, conversations, time_queries, ambiguous_time_queries
    for script, *args in ((pickled, quickstart, products), (unpickled, products)):
        done = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    families, sqlglot, registered, sqlglot_once_listed = json.loads(done.stdout)
    assert families == ["chat_log", "temporal"]
    assert sqlglot is sqlglot_once_listed is False  # even the driver, which imports every product, is spared it
    assert {"log", "time_queries", "persona_sql", "quality_labels", "teabag"} <= set(registered)


def test_the_plugins_export_format_writes_its_layout_and_reads_results_back(site, run_folder, tmp_path):
    exported = gen(site, "export", run_folder, "--format", "qa_lines", "--output", tmp_path / "qa")
    assert exported.returncode == 0, exported.stderr
    rows = read_jsonl(run_folder / "speaker_sessions" / "test.jsonl")
    now = {row["conversation_id"]: row["now"] for row in read_jsonl(run_folder / "conversations" / "test.jsonl")}
    assert read_jsonl(tmp_path / "qa" / "speaker_sessions.jsonl") == [
        {
            "id": row["question_id"],
            "conversation": row["conversation_id"].replace("/", "-"),  # "locomo/sample-1" → "locomo-sample-1"
            "now": now[row["conversation_id"]],
            "question": row["question"],
            "relevant": row["relevant_response_indices"],
        }
        for row in rows
    ]
    manifest = json.loads((tmp_path / "qa" / "gen-export.json").read_text())
    assert manifest["format"] == "qa_lines"
    assert manifest["configs"]["speaker_sessions"]["path"] == "speaker_sessions.jsonl"
    assert manifest["configs"]["speaker_sessions"]["tests"] == {row["question_id"]: row["test"] for row in rows}

    results = tmp_path / "ranked.jsonl"  # what a harness might write back: its ranking per question
    results.write_text("".join(json.dumps({"id": row["question_id"], "ranked": [3, 1]}) + "\n" for row in rows))
    imported = gen(site, "import-predictions", results, "--format", "qa_lines", "--output", tmp_path / "p.jsonl")
    assert imported.returncode == 0, imported.stderr
    assert read_jsonl(tmp_path / "p.jsonl") == [{"question_id": r["question_id"], "retrieved": [3, 1]} for r in rows]


def test_an_unknown_format_is_one_error_listing_every_registered_one(site, run_folder, tmp_path):
    done = gen(site, "export", run_folder, "--format", "qa_line", "--output", tmp_path / "x")
    assert done.returncode == 2 and not (tmp_path / "x").exists()
    assert done.stderr.strip().splitlines() == [
        "error: --format: unknown export format 'qa_line'; did you mean 'qa_lines'? "
        "(expected one of locomo, longmemeval, beir, qa_lines)"
    ]


def write_nothing(job: formats.ConfigToWrite) -> formats.Written:
    (job.folder / f"{job.config}.txt").touch()
    return formats.Written.of(job, f"{job.config}.txt", [], 0)


WRITE_ONLY = ExportFormat("write_only", "a format without a results reader", write=write_nothing)


def test_a_format_entry_point_is_checked_and_a_write_only_format_reads_no_results(monkeypatch):
    from importlib import metadata

    from gen import plugins

    real = list(metadata.entry_points(group=plugins.EXPORTS))
    mine = metadata.EntryPoint("mine", "tests.test_plugin:WRITE_ONLY", plugins.EXPORTS)
    monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: [*real, mine])
    formats.registered.cache_clear()
    try:
        assert list(formats.registered()) == ["locomo", "longmemeval", "beir", "write_only"]
        with pytest.raises(GenError) as info:
            formats.find("write_only", reading=True)
        assert str(info.value) == (
            "format: the export format 'write_only' cannot read a harness's results back "
            "(expected one of locomo, longmemeval, beir)"
        )
        wrong = metadata.EntryPoint("wrong", "tests.test_plugin:PLUGIN", plugins.EXPORTS)
        monkeypatch.setattr(plugins.metadata, "entry_points", lambda group: [*real, wrong])
        formats.registered.cache_clear()
        with pytest.raises(GenError, match=r"tests\.test_plugin:PLUGIN holds PosixPath\(.*, not an export format"):
            formats.registered()
    finally:
        formats.registered.cache_clear()


def test_gen_schema_includes_the_plugins_product_and_its_options(site):
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the test extra")

    done = gen(site, "schema")
    assert done.returncode == 0, done.stderr
    validator = jsonschema.Draft202012Validator(json.loads(done.stdout))
    recipe = {
        "name": "speakers",
        "sources": [{"format": "locomo", "path": "sample_locomo.json"}],
        "products": [{"type": "log"}, {"type": "speaker_sessions", "min_responses": 3}],
    }
    assert list(validator.iter_errors(recipe)) == []
    recipe["products"][1]["min_responses"] = 0  # the plugin's option model: ge=1
    assert [error.message for error in validator.iter_errors(recipe)] == ["0 is less than the minimum of 1"]
    builtin = gen(site, "schema", "--builtin")
    assert builtin.stdout == (REPO / "recipe.schema.json").read_text(encoding="utf-8")
