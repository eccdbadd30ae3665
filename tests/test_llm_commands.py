"""`gen plan`, `gen preview` and `gen run [--offline]` with an LLM product, end to end through the CLI,
the engine and the real openai client against the local fake server."""

from __future__ import annotations

import json
import socket
import subprocess

import pytest
import yaml

from tests.conftest import REPO, gen_subprocess, read_jsonl, run_cli, write_recipe
from tests.fakes.openai_server import FakeOpenAI, FormatGate, Reply, tcq_question

KEY = "sk-test-RECOGNISABLE-0123456789"


def is_probe(request) -> bool:
    """The request `structured_output: auto` sends once per endpoint to learn what it accepts."""
    return "Reply with the JSON object" in request.last_user


def plain_question(request):
    """A model that always writes 'What did <speaker> talk about <time phrase>?'."""
    return {"ok": True} if is_probe(request) else tcq_question(request)


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


# -- giving up: real processes, as a user meets it ----------------------------------------------------------
def gen_run(recipe_path, out, cache) -> subprocess.CompletedProcess[str]:
    return gen_subprocess("run", recipe_path, "--output-dir", out, cwd=REPO, env={"GEN_CACHE_DIR": str(cache)})


def five_items(path, base_url):
    """time_content_questions with 5 questions of the sample's first conversation, default endpoint limits."""
    return write_recipe(
        path,
        {
            "name": "five",
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(REPO / "gen" / "data" / "sample_locomo.json"), "limit": 1}],
            "timeline": {"padding": {"mode": "none"}},
            "llm": {"main": {"model": "fake-model", "base_url": base_url, "api_key_env": None}},
            "products": [{"type": "log"}, {"type": "time_content_questions", "per_conversation": 5}],
        },
    )


def stopped_rejects(out):
    return read_jsonl(out / ".five.stopped" / "rejects.jsonl")


def test_five_items_against_a_dead_port_end_with_every_item_given_up(tmp_path):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    result = gen_run(five_items(tmp_path / "r.yaml", f"http://127.0.0.1:{port}/v1"), tmp_path / "out", tmp_path / "c")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "cannot be reached" in result.stderr and "check base_url" in result.stderr
    rejects = stopped_rejects(tmp_path / "out")
    assert len(rejects) == 5 and {r["kind"] for r in rejects} == {"given_up"}
    assert all("cannot be reached" in r["reason"] for r in rejects)


def test_five_items_against_an_endpoint_that_always_answers_429_end_with_every_item_given_up(tmp_path):
    with FakeOpenAI(lambda request: Reply.rate_limited(1.0)) as server:
        result = gen_run(five_items(tmp_path / "r.yaml", server.base_url), tmp_path / "out", tmp_path / "c")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "the endpoint keeps answering 429" in result.stderr and "max_consecutive_failures" in result.stderr
    # the probe met the 429s first: no item was sent, and every one of them is given up with the reason
    assert all(is_probe(request) for request in server.requests)
    assert server.count <= 5 * 5  # the breaker's default 5 (a burst already on its way counts once)
    rejects = stopped_rejects(tmp_path / "out")
    assert len(rejects) == 5 and all("keeps answering 429" in r["reason"] for r in rejects)


def test_a_llama_cpp_server_works_with_the_default_and_explicit_json_schema_names_the_fix(tmp_path):
    def recipe_with(mode):
        path = five_items(tmp_path / f"{mode}.yaml", server.base_url)
        data = yaml.safe_load(path.read_text())
        if mode != "default":
            data["llm"]["main"]["structured_output"] = mode
        return write_recipe(path, data)

    with FakeOpenAI(FormatGate(plain_question)) as server:
        ok = gen_run(recipe_with("default"), tmp_path / "out", tmp_path / "c")
        refused = gen_run(recipe_with("json_schema"), tmp_path / "out2", tmp_path / "c")
    assert ok.returncode == 0, ok.stderr
    assert "structured_output auto uses json_object_schema" in ok.stderr
    assert len(read_jsonl(tmp_path / "out" / "five" / "time_content_questions" / "test.jsonl")) == 5
    assert refused.returncode != 0
    assert "response_format.type: Input should be 'text' or 'json_object' (got 'json_schema')" in refused.stderr
    assert "set structured_output: json_object (or auto" in refused.stderr
