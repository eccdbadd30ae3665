"""`gen plan`, `gen preview` and `gen run [--offline]` with an LLM product, end to end through the CLI,
the engine and the real openai client against the local fake server."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import REPO, read_jsonl, run_cli, write_recipe
from tests.fakes.openai_server import FakeOpenAI

KEY = "sk-test-RECOGNISABLE-0123456789"


def is_probe(request) -> bool:
    """The request `structured_output: auto` sends once per endpoint to learn what it accepts."""
    return "Reply with the JSON object" in request.last_user


def plain_question(request):
    """A model that always writes 'What did <speaker> talk about <time phrase>?'."""
    if is_probe(request):
        return {"ok": True}
    prompt = request.last_user
    speaker = re.search(r"^1\. It asks about what (.+?) said", prompt, re.M).group(1)
    reference = re.search(r'with this phrase: "([^"]+)"', prompt).group(1)
    return {"question": f"What did {speaker} talk about {reference}?"}


def tcq_recipe(path, base_url: str, temperature: float = 0.7):
    """log + time_content_questions (4 per conversation) over the bundled sample, against `base_url`."""
    return write_recipe(
        path,
        {
            "name": "tcq",
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(REPO / "gen" / "data" / "sample_locomo.json")}],
            "timeline": {"padding": {"mode": "donor", "target_words": 800}},
            "llm": {
                "main": {
                    "model": "fake-model",
                    "base_url": base_url,
                    "api_key_env": "GEN_TEST_KEY",
                    "temperature": temperature,
                    "seed": 1,
                }
            },
            "products": [{"type": "log"}, {"type": "time_content_questions", "per_conversation": 4}],
        },
    )


@pytest.fixture
def setup(tmp_path, monkeypatch):
    monkeypatch.setenv("GEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GEN_TEST_KEY", KEY)
    with FakeOpenAI(plain_question) as server:

        def recipe(temperature: float = 0.7):
            return tcq_recipe(tmp_path / "r.yaml", server.base_url, temperature)

        yield server, recipe, tmp_path


def plan_row(out: str) -> list[str]:
    return next(line.split() for line in out.splitlines() if line.startswith("time_content_questions"))


def test_plan_run_offline_rerun_and_preview(setup, capsys):
    server, recipe, tmp_path = setup
    out_dir = tmp_path / "out"

    code, out, err = run_cli(["plan", recipe()], capsys)
    assert code == 0, err
    assert plan_row(out)[1:4] == ["8", "8", "0"]  # 2 conversations × 4 items: all needed, none cached
    assert plan_row(out)[4] == "48"  # at most: 8 items × 3 rounds (retries 2) × (call + correction round)
    assert server.count == 0

    code, _, err = run_cli(["run", recipe(), "--output-dir", out_dir], capsys)
    assert code == 0, err
    assert server.count == 1 + 8  # structured_output auto: one probe (accepted at once), then 8 questions
    assert is_probe(server.requests[0]) and server.requests[0].response_format["type"] == "json_schema"
    assert "structured_output auto uses json_schema, found by a probe" in err
    rows = read_jsonl(out_dir / "tcq" / "time_content_questions" / "test.jsonl")
    report = json.loads((out_dir / "tcq" / "run.json").read_text())
    assert len(rows) == 8 and report["validation"]["time_content_questions"]["passed"]
    assert report["llm"]["steps"]["time_content_questions"]["calls_made"] == 8
    assert report["llm"]["endpoints"]["main"]["structured_output"] == "auto"
    assert report["llm"]["endpoints"]["main"]["structured_output_chosen"] == {"mode": "json_schema", "how": "probe"}
    assert report["rejects"] == 0

    code, out, _ = run_cli(["plan", recipe()], capsys)
    assert plan_row(out)[1:4] == ["8", "0", "8"]

    first = (out_dir / "tcq" / "time_content_questions" / "test.jsonl").read_bytes()
    code, _, err = run_cli(["run", recipe(), "--output-dir", out_dir, "--offline"], capsys)
    assert code == 0, err
    assert server.count == 9  # nothing sent, not even the probe: its choice and every call came from the cache
    assert "as probed before" in err
    report = json.loads((out_dir / "tcq" / "run.json").read_text())
    assert report["llm"]["endpoints"]["main"]["structured_output_chosen"] == {"mode": "json_schema", "how": "cache"}
    assert (out_dir / "tcq" / "time_content_questions" / "test.jsonl").read_bytes() == first

    code, out, _ = run_cli(["preview", recipe(), "--product", "time_content_questions", "--index", "1"], capsys)
    assert code == 0 and "──── user ────" in out and "cached" in out

    texts = [p.read_text(errors="replace") for p in (out_dir / "tcq").rglob("*") if p.is_file()]
    assert not any(KEY in text for text in texts)


def test_offline_run_with_a_changed_sampling_parameter_fails_on_the_first_miss(setup, capsys):
    server, recipe, tmp_path = setup
    assert run_cli(["run", recipe(), "--output-dir", tmp_path / "out"], capsys)[0] == 0
    before = (tmp_path / "out" / "tcq" / "run.json").read_bytes()
    code, _, err = run_cli(["run", recipe(temperature=0.9), "--output-dir", tmp_path / "out", "--offline"], capsys)
    assert code == 2
    assert "time_content_questions" in err and "cache" in err.lower() and "Traceback" not in err
    assert server.count == 9
    assert (tmp_path / "out" / "tcq" / "run.json").read_bytes() == before  # the failed run changed nothing


def test_preview_names_the_llm_products_when_asked_for_another(setup, capsys):
    _, recipe, _ = setup
    code, _, err = run_cli(["preview", recipe(), "--product", "log"], capsys)
    assert code == 2 and "time_content_questions" in err
