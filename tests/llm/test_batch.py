"""Steps through the Batch API (``mode: batch``) against the fake server's /v1/files and /v1/batches, with the real
openai client: the same outcomes and request bodies as online, one batch per round, every way a batch can end,
and a run killed while its batch is in flight that resumes by polling it."""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from gen.errors import Stopped
from gen.llm import Engine, RunSettings, Task
from gen.llm.batch.commands import cancel_batch, known_batches
from tests.fakes.openai_server import FakeOpenAI, Reply, count_words

HERE = Path(__file__).resolve().parent


class Summary(BaseModel):
    topic: str
    words: int


def summarize(request):
    """A structured answer about the task's own text; a text starting with "bad" first gets a reply that does not
    parse (so it needs a correction round)."""
    text = request.messages[0]["content"]
    if text.startswith("bad") and not request.is_correction:
        return "Sure! {topic: unterminated"
    return {"topic": text.split()[0], "words": count_words(text)}


def endpoint(server, **more):
    return {
        "model": "fake-model",
        "base_url": server.base_url,
        "api_key_env": "GEN_TEST_API_KEY",
        "structured_output": "json_schema",
        "price": {"input_per_million": 2.0, "output_per_million": 8.0},
        "batch_poll_s": 0.02,
        **more,
    }


def tasks(n=6):
    texts = [f"topic{i} " + "word " * i for i in range(n)]
    texts[2] = "bad " + texts[2]
    return [Task(f"item-{i}", "main", text, Summary) for i, text in enumerate(texts)]


def run(server, cache_dir, mode, items=None, reject_rate=0.2, **more):
    with Engine(
        {"main": endpoint(server, mode=mode, **more)}, RunSettings(cache_dir=cache_dir, progress="off")
    ) as engine:
        outcomes = engine.run_step("summaries", items or tasks(), max_reject_rate=reject_rate)
        return outcomes, engine.report(), list(engine.rejects)


def batched(server):
    return [r for r in server.requests if "x-fake-batch" in r.headers]


def test_batch_mode_gives_the_online_outcomes_from_the_same_bodies_one_batch_per_round(api_key, tmp_path):
    with FakeOpenAI(summarize) as server:
        online, online_report, _ = run(server, tmp_path / "online", "online")
        online_bodies = sorted(json.dumps(r.body, sort_keys=True) for r in server.requests)
        server.requests.clear()
        outcomes, report, rejects = run(server, tmp_path / "batch", "batch")
        batch_bodies = sorted(json.dumps(r.body, sort_keys=True) for r in server.requests)

        assert [(o.ok, o.value, o.text, o.corrected) for o in outcomes] == [
            (o.ok, o.value, o.text, o.corrected) for o in online
        ]
        assert batch_bodies == online_bodies  # bodies identical to the online ones, the correction round's too
        assert len(batched(server)) == len(server.requests) == 7  # no online request at all
        assert server.batch_api.creates == 2  # 6 first calls, then the one correction round
        uploaded = [json.loads(line) for line in server.batch_api.files["file-fake-1"].decode().splitlines()]
        assert {line["url"] for line in uploaded} == {"/v1/chat/completions"}
        assert all(line["method"] == "POST" and len(line["custom_id"]) == 64 for line in uploaded)

        server.requests.clear()  # a re-run: everything is in the cache, nothing is sent
        again, again_report, _ = run(server, tmp_path / "batch", "batch")
        assert server.batch_api.creates == 2 and server.count == 0
    assert [o.value for o in again] == [o.value for o in outcomes]
    assert again_report["steps"]["summaries"]["calls_cached"] == 7

    step, online_step = report["steps"]["summaries"], online_report["steps"]["summaries"]
    assert rejects == []
    assert step["calls_made"] == step["calls_batch"] == 7 and online_step["calls_batch"] == 0
    assert step["input_tokens"] == online_step["input_tokens"]
    assert step["cost_usd"] == pytest.approx(online_step["cost_usd"] / 2)  # batch_discount 0.5
    assert [(b.status, b.requests, b.collected) for b in known_batches(tmp_path / "batch")] == [
        ("completed", 6, True),
        ("completed", 1, True),
    ]


def test_a_batch_file_is_split_at_the_request_limit(api_key, tmp_path):
    with FakeOpenAI(summarize) as server:
        outcomes, _, _ = run(server, tmp_path / "c", "batch", items=tasks(5)[:2] + tasks(5)[3:], batch_max_requests=3)
        sizes = sorted(
            len(data.splitlines())
            for fid, data in server.batch_api.files.items()
            if fid in {b["input_file_id"] for b in server.batch_api.batches.values()}
        )
    assert all(o.ok for o in outcomes)
    assert server.batch_api.creates == 2 and sizes == [1, 3]


def test_failed_lines_retry_next_round_or_are_rejected_with_the_line(api_key, tmp_path):
    def script(request):
        text = request.messages[0]["content"]
        if text.startswith("topic1 "):
            return Reply.error(400, "this prompt is not allowed")
        if text.startswith("topic3 ") and request.attempt == 0:
            return Reply.server_error()
        return summarize(request)

    with FakeOpenAI(script) as server:
        outcomes, report, rejects = run(
            server, tmp_path / "c", "batch", items=tasks(5)[:2] + tasks(5)[3:], reject_rate=None
        )
        assert server.batch_api.creates == 2  # the 500 went again in a second batch, alone
        second = server.batch_api.batches["batch_fake_2"]
        assert second["request_counts"]["total"] == 1
    assert [o.ok for o in outcomes] == [True, False, True, True]
    (reject,) = rejects
    assert reject["item_id"] == "item-1" and reject["kind"] == "refused"
    assert "HTTP 400: this prompt is not allowed" in reject["reason"]
    assert json.loads(reject["raw_text"])["response"]["status_code"] == 400  # the line itself
    assert report["steps"]["summaries"]["calls_batch"] == 3


def test_an_expired_batch_keeps_what_finished_and_sends_the_rest_next(api_key, tmp_path):
    with FakeOpenAI(summarize) as server:
        server.batch_api.end = ["expired"]
        server.batch_api.finished = 2
        outcomes, _, rejects = run(server, tmp_path / "c", "batch", items=tasks(5)[:2] + tasks(5)[3:])
        first, second = server.batch_api.batches.values()
        assert first["status"] == "expired" and first["request_counts"] == {"total": 4, "completed": 2, "failed": 2}
        assert second["status"] == "completed" and second["request_counts"]["total"] == 2
        assert len(batched(server)) == 4  # each request run once
    assert all(o.ok for o in outcomes) and rejects == []


def test_a_batch_that_fails_validation_stops_quoting_the_api_and_keeps_the_cache(api_key, tmp_path):
    with FakeOpenAI(summarize) as server:
        server.batch_api.end = "failed"
        server.batch_api.failure = "model fake-model cannot be used with the Batch API"
        with pytest.raises(Stopped) as stop:
            run(server, tmp_path / "c", "batch")
    assert (
        "refused batch batch_fake_1's request file: line 1: model fake-model cannot be used with the Batch API"
        in str(stop.value)
    )
    assert "llm endpoint 'main'" in str(stop.value)
    assert [b.status for b in known_batches(tmp_path / "c")] == ["failed"]


def test_a_cancelled_batch_keeps_what_finished_and_the_run_stops(api_key, tmp_path):
    with FakeOpenAI(summarize) as server:
        server.batch_api.hold = True
        server.batch_api.finished = 3

        said: list[str] = []

        def cancel_when_polled():  # once polled, the batch is in the cache's ledger
            try:
                while not _polled(server):
                    time.sleep(0.01)
                said.append(cancel_batch(tmp_path / "c", "batch_fake_1"))  # what `gen batches cancel` does
            finally:
                server.batch_api.hold = False  # whatever happened, the run does not wait forever

        canceller = threading.Thread(target=cancel_when_polled)
        canceller.start()
        with pytest.raises(Stopped) as stop:
            run(server, tmp_path / "c", "batch")
        canceller.join()
        assert said == ["cancelling"]
        assert "batch batch_fake_1 was cancelled" in str(stop.value)

        outcomes, report, _ = run(server, tmp_path / "c", "batch")  # the rest, in a new batch
        # the 3 that had not run, and the correction of item 2, whose first reply (finished) did not parse
        assert server.batch_api.batches["batch_fake_2"]["request_counts"]["total"] == 4
    assert all(o.ok for o in outcomes)
    assert report["steps"]["summaries"]["calls_cached"] == 3


def test_a_run_killed_while_its_batch_is_in_flight_resumes_by_polling_it(api_key, tmp_path):
    cache = tmp_path / "cache"
    with FakeOpenAI(summarize) as server:
        server.batch_api.hold = True
        command = [sys.executable, str(HERE / "kill_driver.py"), server.base_url, str(cache), str(tmp_path / "a")]
        proc = subprocess.Popen([*command, "8", "batch"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while not _polled(server) and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert _polled(server), proc.stderr.read().decode() if proc.poll() is not None else "never polled"
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        with sqlite3.connect(cache / "llm.sqlite") as conn:  # its status as last seen: killed before or after
            ((batch_id, status),) = conn.execute("SELECT id, status FROM batches").fetchall()
        assert batch_id == "batch_fake_1" and status in ("validating", "in_progress")

        server.batch_api.hold = False
        done = subprocess.run([*command, "8", "batch"], capture_output=True, timeout=60)
        assert done.returncode == 0, done.stderr.decode()
        assert server.batch_api.creates == 1  # polled, never sent again
        assert len(batched(server)) == 8
    lines = [json.loads(line) for line in (tmp_path / "a").read_text().splitlines()]
    assert [line["value"]["words"] for line in lines] == [1 + i % 7 for i in range(8)]


def _polled(server) -> bool:
    return any(b["status"] == "in_progress" for b in server.batch_api.batches.values())


def test_the_plan_counts_batches_and_prices_them_at_the_discount():
    from gen.llm.accounts.plan import PlanBuilder
    from gen.llm.config import EndpointConfig

    config = EndpointConfig(
        model="m",
        base_url="http://127.0.0.1:9/v1",
        max_tokens=50,
        price={"input_per_million": 2.0, "output_per_million": 8.0},
        batch_discount=0.25,
        batch_max_requests=3,
    )
    builder = PlanBuilder("s")
    for _ in range(7):
        builder.needed("main", 100)
    plan = builder.finish({"main": config}, items=7).to_dict()
    online = (700 * 2.0 + 7 * 50 * 8.0) / 1e6  # 7 calls: 100 input tokens each, at most 50 out each
    assert plan["projected_cost_usd"] == pytest.approx(online)
    assert plan["projected_batch_cost_usd"] == pytest.approx(online * 0.25)
    assert plan["batches"] == 3  # 7 requests, 3 to a file


def test_replies_a_batch_brings_back_are_judged_as_online_ones(api_key, tmp_path):
    def script(request):
        text = request.messages[0]["content"]
        if text.startswith("topic0 "):
            return Reply.truncated('{"topic": "cut')
        if text.startswith("topic1 "):
            return Reply(content=None)  # no text (a refusal)
        if text.startswith("topic3 "):
            return Reply.server_error()  # every time
        return summarize(request)

    with FakeOpenAI(script) as server:
        outcomes, report, rejects = run(
            server, tmp_path / "c", "batch", items=tasks(5)[:2] + tasks(5)[3:], reject_rate=None, max_retries=1
        )
        assert server.batch_api.creates == 2  # the 500 once more, then given up
    assert [o.ok for o in outcomes] == [False, False, False, True]
    kinds = {r["item_id"]: (r["kind"], r["reason"], r["raw_text"]) for r in rejects}
    assert kinds["item-0"] == ("truncated", "reply truncated (finish_reason=length, max_tokens=None)", '{"topic": "cut')
    assert kinds["item-1"][0] == "empty" and kinds["item-1"][1] == "the endpoint returned no text"
    assert kinds["item-3"][0] == "request_failed"
    assert kinds["item-3"][1].startswith("given up after 2 batches; last: HTTP 500: The server had an error (fake)")
    assert json.loads(kinds["item-3"][2])["response"]["status_code"] == 500
    step = report["steps"]["summaries"]
    assert step["calls_batch"] == 3  # the truncated and empty replies were paid for
    assert step["calls_failed"] == 2 and step["errors"] == {"empty_reply": 1, "request_failed": 1, "truncated": 1}


def test_each_kind_of_result_line_is_read_as_the_api_means_it():
    from gen.llm.batch.files import read_result

    completion = {"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}], "usage": {}}
    ok = read_result(json.dumps({"custom_id": "k1", "response": {"status_code": 200, "body": completion}}))
    assert ok.answer.text == "hi" and ok.failure is None
    odd = read_result(json.dumps({"custom_id": "k2", "response": {"status_code": 200, "body": {"id": "x"}}}))
    assert odd.failure.kind == "invalid_response" and not odd.retry
    busy = read_result(json.dumps({"custom_id": "k3", "response": {"status_code": 503, "body": {}}}))
    assert busy.retry and busy.failure.reason == "HTTP 503"
    refused = {"status_code": 400, "body": {"error": {"message": "bad model"}}}
    bad = read_result(json.dumps({"custom_id": "k4", "response": refused}))
    assert bad.failure.kind == "http_400" and not bad.retry and bad.failure.reason == "HTTP 400: bad model"
    late = read_result(json.dumps({"custom_id": "k5", "response": None, "error": {"code": "batch_expired"}}))
    assert late.retry and late.failure.kind == "not_run"
    assert read_result("not json") is None and read_result(json.dumps({"response": {}})) is None
