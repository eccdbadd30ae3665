"""Whole runs with an endpoint in batch mode, and through offline batch files: the same product files as online.

The online and batch runs talk to the fake server (its /v1/files and /v1/batches beside /v1/chat/completions);
the offline loop writes request files with --batch-export, answers them with a stand-in for vLLM's run_batch
(tests/fakes/run_batch.py) and reads the answers back with --batch-import until the recipe is finished."""

from __future__ import annotations

import json
from pathlib import Path

from tests.conftest import REPO, gen_subprocess, run_cli, write_recipe
from tests.fakes.openai_server import FakeOpenAI, tcq_question
from tests.fakes.run_batch import answer_file

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"


def recipe(tmp_path: Path, name: str, base_url: str, **endpoint) -> Path:
    data = {
        "name": name,
        "seed": 5,
        "sources": [{"format": "locomo", "path": str(SAMPLE)}],
        "llm": {
            "main": {
                "model": "fake-model",
                "base_url": base_url,
                "api_key_env": None,
                "structured_output": "json_schema",
                "batch_poll_s": 0.02,
                **endpoint,
            }
        },
        "products": [{"type": "log"}, {"type": "time_content_questions", "per_conversation": 3, "verify": False}],
    }
    return write_recipe(tmp_path / f"{name}.yaml", data)


def products(folder: Path) -> dict[str, bytes]:
    """The product files and rejects of a run folder (run.json and the card say how they were made)."""
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*.jsonl"))
        if path.name != "run.json"
    }


def test_a_run_in_batch_mode_writes_the_online_run_s_files(tmp_path, capsys):
    with FakeOpenAI(tcq_question) as server:
        online = recipe(tmp_path, "tcq", server.base_url)
        code, _, err = run_cli(
            ["run", online, "--output-dir", tmp_path / "online", "--cache-dir", tmp_path / "a"], capsys
        )
        assert code == 0, err
        batch = recipe(tmp_path, "tcq", server.base_url, mode="batch")
        code, _, err = run_cli(
            ["run", batch, "--output-dir", tmp_path / "batch", "--cache-dir", tmp_path / "b"], capsys
        )
        assert code == 0, err
        sent_in_batches = [r for r in server.requests if "x-fake-batch" in r.headers]
    online_files, batch_files = products(tmp_path / "online" / "tcq"), products(tmp_path / "batch" / "tcq")
    assert "time_content_questions/test.jsonl" in batch_files
    assert batch_files == online_files
    report = json.loads((tmp_path / "batch" / "tcq" / "run.json").read_text())
    step = report["llm"]["steps"]["time_content_questions"]
    questions = (tmp_path / "batch" / "tcq" / "time_content_questions" / "test.jsonl").read_text().count("\n")
    assert step["calls_batch"] == step["calls_made"] == len(sent_in_batches) == questions
    assert server.batch_api.creates >= 1


def test_offline_batch_files_round_trip_until_the_recipe_is_finished(tmp_path, capsys):
    with FakeOpenAI(tcq_question) as server:  # the reference: the same recipe online
        online = recipe(tmp_path, "tcq", server.base_url)
        code, _, err = run_cli(
            ["run", online, "--output-dir", tmp_path / "online", "--cache-dir", tmp_path / "a"], capsys
        )
        assert code == 0, err
    nowhere = recipe(tmp_path, "tcq", "http://127.0.0.1:9/v1")  # no server: every answer comes from files
    requests, answers = tmp_path / "requests", tmp_path / "answers"
    answers.mkdir()
    args = ["run", nowhere, "--output-dir", tmp_path / "offline", "--cache-dir", tmp_path / "b"]
    rounds, imported = 0, []
    while True:
        result = gen_subprocess(*args, *imported, "--batch-export", requests)
        assert result.returncode == 0, result.stderr
        if "--batch-import" not in result.stderr:
            break
        rounds += 1
        assert rounds < 5, result.stderr
        assert "still needs into" in result.stderr
        for request_file in sorted(requests.glob("*.jsonl")):
            answer_file(request_file, answers / f"round{rounds}-{request_file.name}")
            request_file.unlink()
        imported = ["--batch-import", answers]
    assert rounds == 1  # one question step, no correction needed
    assert products(tmp_path / "offline" / "tcq") == products(tmp_path / "online" / "tcq")
    report = json.loads((tmp_path / "offline" / "tcq" / "run.json").read_text())
    assert report["llm"]["steps"]["time_content_questions"]["calls_batch"] > 0


def test_a_batch_import_that_is_not_a_batch_output_is_one_error(tmp_path, capsys):
    bad = tmp_path / "out.jsonl"
    bad.write_text('{"question": "not a result line"}\n')
    path = recipe(tmp_path, "tcq", "http://127.0.0.1:9/v1")
    code, _, err = run_cli(["run", path, "--output-dir", tmp_path / "o", "--batch-import", bad], capsys)
    assert code == 2
    assert f"{bad}: no line of this file is a batch result" in err and "Traceback" not in err
    code, _, err = run_cli(["run", path, "--batch-import", tmp_path / "missing.jsonl"], capsys)
    assert code == 2 and "--batch-import: no such file or folder" in err


def test_batch_files_need_a_structured_output_named_and_gen_batches_lists_what_was_sent(tmp_path, capsys):
    path = recipe(tmp_path, "tcq", "http://127.0.0.1:9/v1", structured_output="auto")
    code, _, err = run_cli(["run", path, "--output-dir", tmp_path / "o", "--batch-export", tmp_path / "r"], capsys)
    assert code == 2
    assert "batch files (--batch-export): structured_output is auto and this endpoint was never probed" in err

    with FakeOpenAI(tcq_question) as server:
        batch = recipe(tmp_path, "tcq", server.base_url, mode="batch")
        code, _, err = run_cli(["run", batch, "--output-dir", tmp_path / "o", "--cache-dir", tmp_path / "c"], capsys)
        assert code == 0, err
        sent = server.batch_api.batches["batch_fake_1"]["request_counts"]["total"]
    code, out, _ = run_cli(["batches", "--cache-dir", tmp_path / "c"], capsys)
    assert code == 0
    (line,) = [line for line in out.splitlines() if line.startswith("batch_fake_1")]
    assert line.split()[1:5] == ["main", "time_content_questions", "completed", f"{sent}/{sent}"]
    code, out, _ = run_cli(["batches", "--cache-dir", tmp_path / "empty"], capsys)
    assert code == 2
