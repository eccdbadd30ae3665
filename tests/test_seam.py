"""The product seam: a product from outside gen's families runs end to end, build order follows needs
whatever the recipe's order, layers import one way, and a recipe without time products needs no timelines."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from gen.products import registry
from tests.conftest import REPO, read_jsonl, require_shared, run_cli, write_json, write_recipe
from tests.fakes.openai_server import FakeOpenAI, tcq_question
from tests.fixtures.speaker_turns import SessionSizes, SpeakerTurns

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"
FIXTURE_TEMPLATES = REPO / "tests" / "fixtures" / "templates"


@pytest.fixture
def speaker_turns(monkeypatch):
    monkeypatch.setitem(registry.REGISTRY, SpeakerTurns.name, SpeakerTurns)
    return SpeakerTurns


@pytest.fixture
def session_sizes(monkeypatch):
    monkeypatch.setitem(registry.REGISTRY, SessionSizes.name, SessionSizes)
    return SessionSizes


def source_counts(sample_id: str) -> dict[str, tuple[int, int]]:
    """speaker → (responses, words) straight from the bundled sample file."""
    sample = next(s for s in json.loads(SAMPLE.read_text()) if s["sample_id"] == sample_id)
    counts: dict[str, tuple[int, int]] = {}
    for key, turns in sample["conversation"].items():
        if key.startswith("session_") and isinstance(turns, list):
            for turn in turns:
                responses, words = counts.get(turn["speaker"], (0, 0))
                counts[turn["speaker"]] = (responses + 1, words + len(turn["text"].split()))
    return counts


def test_a_product_with_two_configs_and_a_need_runs_end_to_end(tmp_path, capsys, speaker_turns):
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "turns",
            "seed": 1,
            "templates_dir": str(FIXTURE_TEMPLATES),
            "sources": [{"format": "locomo", "path": str(SAMPLE), "ids": ["sample-1"]}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [{"type": "speaker_turns"}],
        },
    )
    code, _, err = run_cli(["run", recipe, "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    folder = tmp_path / "out" / "turns"
    rows = read_jsonl(folder / "speaker_turns" / "test.jsonl")
    assert {r["speaker"]: (r["responses"], r["words"]) for r in rows} == source_counts("sample-1")
    [note] = read_jsonl(folder / "speaker_notes" / "test.jsonl")
    most = max(source_counts("sample-1").items(), key=lambda item: item[1][1])
    assert note["note"] == f"{most[0]} spoke the most, {most[1][1]} words."
    report = json.loads((folder / "run.json").read_text())
    # log is built for it but not written: the recipe did not ask for it and no time product needs it
    assert set(report["configs"]) == {"speaker_turns", "speaker_notes"}
    assert report["configs"]["speaker_notes"]["summary"] == {"rows": 1}
    assert report["validation"]["speaker_turns"]["passed"]
    assert not (folder / "log").exists()
    header = (folder / "README.md").read_text().split("---")[1]
    assert "config_name: speaker_turns" in header and "config_name: speaker_notes" in header


def run_folder_bytes(folder: Path) -> dict[str, bytes]:
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and path.name != "recipe.yaml":
            data = path.read_bytes()
            if path.name == "run.json":  # timings vary from run to run; everything else must not
                report = json.loads(data)
                report.pop("timings_s")
                data = json.dumps(report, sort_keys=True).encode()
            if path.name == "README.md":  # the card quotes the recipe as written and names the folder
                before, _, rest = data.partition(b"```yaml\n# ")
                data = (before + rest.partition(b"```")[2]).replace(str(folder).encode(), b"<run folder>")
            out[str(path.relative_to(folder))] = data
    return out


def test_the_order_of_products_in_a_recipe_changes_nothing(tmp_path, capsys):
    products = [
        {"type": "ambiguous_time_queries", "tests": ["session", "dates"]},
        {"type": "time_queries", "tests": ["session", "dates"]},
        {"type": "log"},
    ]
    outputs = []
    for name, order in (("a", products), ("b", products[::-1])):
        recipe = write_recipe(
            tmp_path / name / "r.yaml",
            {
                "name": "same",
                "seed": 3,
                "sources": [{"format": "locomo", "path": str(SAMPLE)}],
                "timeline": {"padding": {"mode": "donor", "target_words": 300}},
                "products": order,
            },
        )
        code, _, err = run_cli(["run", recipe, "--output-dir", tmp_path / name / "out"], capsys)
        assert code == 0, err
        outputs.append(run_folder_bytes(tmp_path / name / "out" / "same"))
    assert outputs[0].keys() == outputs[1].keys() and "ambiguous_time_queries/test.jsonl" in outputs[0]
    for path in outputs[0]:
        assert outputs[0][path] == outputs[1][path], path


def test_one_or_two_workers_write_the_same_bytes(tmp_path, capsys):
    """Every seeded choice (donors, the padding offset drawn from a range, the wordings kept per base question)
    follows from the seed and the conversation alone, so splitting the work changes no byte."""
    recipe = yaml.safe_load((REPO / "recipes" / "quickstart.yaml").read_text())
    recipe["sources"][0]["path"] = str(REPO / "gen" / "data" / "sample_locomo.json")
    recipe["timeline"]["padding"]["after_minutes"] = {"min": 30, "max": 600}
    recipe_path = write_recipe(tmp_path / "quickstart.yaml", recipe)
    outputs = []
    for workers in ("1", "2"):
        code, _, err = run_cli(["run", recipe_path, "--output-dir", tmp_path / workers, "--workers", workers], capsys)
        assert code == 0, err
        outputs.append(run_folder_bytes(tmp_path / workers / "quickstart"))
    assert outputs[0] == outputs[1]
    offsets = [
        json.loads(line)["padding_after_minutes"] for line in outputs[0]["conversations/test.jsonl"].splitlines()
    ]
    assert len(offsets) == 2 and all(30 <= m <= 600 and m == int(m) for m in offsets)
    # the quickstart's 62 base questions (docs/time-queries.md: 41 + 21), 3 wordings each by default
    assert len(outputs[0]["time_queries/test.jsonl"].splitlines()) == 62 * 3


def test_a_pool_never_has_more_processes_than_conversations(tmp_path, capsys, monkeypatch):
    import multiprocessing

    from gen.pipeline import executors

    started = []
    fork = multiprocessing.get_context("fork")

    class CountingContext:
        def Pool(self, processes, **kwargs):
            started.append(processes)
            return fork.Pool(processes, **kwargs)

    monkeypatch.setattr(executors.multiprocessing, "get_context", lambda method: CountingContext())
    recipe = yaml.safe_load((REPO / "recipes" / "quickstart.yaml").read_text())
    recipe["sources"][0]["path"] = str(REPO / "gen" / "data" / "sample_locomo.json")  # 2 conversations
    code, _, err = run_cli(
        ["run", write_recipe(tmp_path / "q.yaml", recipe), "--output-dir", tmp_path, "--workers", "200"], capsys
    )
    assert code == 0, err
    assert started == [2]


def test_one_stage_or_two_write_the_same_bytes_with_llm_products(tmp_path, capsys):
    """With LLM products, one process builds every product in its batches of conversations (one stage); a pool
    builds the products that need no model first, then this process the LLM ones (two stages). Every record,
    reject and count is the same either way."""
    with FakeOpenAI(tcq_question) as server:
        recipe = write_recipe(
            tmp_path / "r.yaml",
            {
                "name": "both",
                "seed": 5,
                "sources": [{"format": "locomo", "path": str(SAMPLE)}],
                "timeline": {"padding": {"mode": "donor", "target_words": 300}},
                "llm": {
                    "main": {
                        "model": "fake-model",
                        "base_url": server.base_url,
                        "api_key_env": None,
                        "structured_output": "json_object",
                    }
                },
                "products": [{"type": "time_queries"}, {"type": "time_content_questions", "per_conversation": 4}],
            },
        )
        outputs = []
        for workers in ("1", "2"):
            command = ["run", recipe, "--output-dir", tmp_path / workers, "--cache-dir", tmp_path / f"cache{workers}"]
            code, _, err = run_cli([*command, "--workers", workers], capsys)
            assert code == 0, err
            outputs.append(run_folder_bytes(tmp_path / workers / "both"))
        calls = len(server.requests)
    assert calls == 2 * 2 * 4  # each run asked for every question: nothing came from the other's cache
    assert outputs[0].keys() == outputs[1].keys()
    assert {"conversations/test.jsonl", "time_queries/test.jsonl", "time_content_questions/test.jsonl"} <= set(
        outputs[0]
    )
    for path in outputs[0]:
        if path != "run.json":
            assert outputs[0][path] == outputs[1][path], path
    reports = [json.loads(output["run.json"]) for output in outputs]
    for report in reports:  # the LLM step's seconds vary from run to run, as the timings do
        report["llm"]["steps"]["time_content_questions"].pop("seconds")
    assert reports[0] == reports[1]


def test_the_configuration_layer_imports_no_product_and_no_engine():
    code = (
        "import sys, gen.recipe, gen.sources, gen.timeline, gen.llm.config; "
        "loaded = [m for m in sys.modules if m.startswith(('gen.products', 'gen.llm.engine', 'gen.pipeline.runner', "
        "'gen.export.card', 'openai', 'datasets'))]; print(loaded)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    assert result.stdout.strip() == "[]"


def test_a_recipe_without_time_products_needs_no_timeline_or_padding(tmp_path, capsys, session_sizes, speaker_turns):
    """One conversation and donor padding: products that need time fail (no donor), this one needs none."""
    single = write_json(tmp_path / "one.json", [json.loads(SAMPLE.read_text())[1]])  # no other conversation
    recipe = {
        "name": "no-time",
        "sources": [{"format": "locomo", "path": str(single)}],
        "products": [{"type": "session_sizes"}],
    }
    code, _, err = run_cli(["validate", write_recipe(tmp_path / "a.yaml", recipe)], capsys)
    assert code == 0 and "no product needs timelines" in err, err
    code, _, err = run_cli(["run", tmp_path / "a.yaml", "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "out" / "no-time").iterdir()) == [
        ".gen-files.json",
        "README.md",
        "recipe.yaml",
        "rejects.jsonl",
        "run.json",
        "session_sizes",
    ]  # no log, no conversations
    sessions = json.loads(SAMPLE.read_text())[1]["conversation"]
    expected = [len(sessions[f"session_{n}"]) for n in range(1, 10) if f"session_{n}" in sessions]
    assert [r["turns"] for r in read_jsonl(tmp_path / "out" / "no-time" / "session_sizes" / "test.jsonl")] == expected
    for needs_time in ({"type": "log"}, {"type": "speaker_turns"}):  # the second needs the log, which needs time
        recipe["products"] = [needs_time]
        code, _, err = run_cli(["validate", write_recipe(tmp_path / "b.yaml", recipe)], capsys)
        assert code == 2 and "padding mode `donor` needs another conversation" in err


@pytest.mark.integration
def test_validate_passes_on_a_teabag_shaped_recipe_over_the_cc_sample(tmp_path, capsys, session_sizes):
    sample = require_shared("teabag/theanine_sample/sample_dialogue.json")
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "teabag-shaped",
            "sources": [{"format": "cc", "path": str(sample), "default_interval": "A few days after"}],
            "products": [{"type": "session_sizes"}],
        },
    )
    code, _, err = run_cli(["validate", recipe], capsys)
    assert code == 0 and "1 conversations" in err and "no product needs timelines" in err, err
