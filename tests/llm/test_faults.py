"""Done-when tests of issue 4: fault mix, SIGKILL and resume, warm cache, no key anywhere, throughput."""

from __future__ import annotations

import json
import logging
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from gen.errors import GenError
from gen.llm import Engine, RunSettings, Task
from gen.llm.calls.request import RetryPolicy
from gen.llm.structured import correction_message
from tests.fakes.openai_server import FakeOpenAI, FaultMix, Reply, body_key, count_words

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


class Summary(BaseModel):
    topic: str
    words: int


def original_text(request) -> str:
    return request.messages[0]["content"]


def summarize(request):
    """A realistic structured answer about the task's own text (also in correction rounds)."""
    text = original_text(request)
    return {"topic": text.split()[0], "words": count_words(text)}


def engine_for(server, cache_dir, **endpoint):
    config = {
        "model": "fake-model",
        "base_url": server.base_url,
        "api_key_env": "GEN_TEST_API_KEY",
        "structured_output": "json_schema",  # the fault plans below predict every request; no probe among them
        **endpoint,
    }
    return Engine(
        {"main": config},
        RunSettings(cache_dir=cache_dir, progress="off"),
        retry=RetryPolicy(backoff_base_s=0.005, backoff_cap_s=0.02),
    )


# -- fault mix --------------------------------------------------------------------------------------------
RETRYABLE = {"rate_limit", "server_error", "timeout"}
SCHEMA_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "Summary", "schema": Summary.model_json_schema(), "strict": False},
}


def predict(mix: FaultMix, text: str, max_retries: int):
    """What must happen to one item, derived from the fault plan alone (not from the engine's run).

    Policy under test: retry 429 / 500 / timeouts up to max_retries times; a reply that is not valid JSON
    gets one correction round (the reply and the error sent back); still invalid -> rejected ("parse");
    attempts exhausted -> rejected ("request_failed"). Returns (kind, value, requests).
    """
    requests = 0

    def call(messages):
        nonlocal requests
        body = {"model": "fake-model", "messages": messages, "response_format": SCHEMA_FORMAT}
        for attempt in range(max_retries + 1):
            requests += 1
            fault = mix.fault_for(body_key(body), attempt)
            if fault not in RETRYABLE:
                content = json.dumps({"topic": text.split()[0], "words": count_words(text)})
                if fault == "malformed":
                    content = "Sure! Here it is: {" + content[: len(content) // 2]
                return content, fault
        return None, "failed"

    first_messages = [{"role": "user", "content": text}]
    content, fault = call(first_messages)
    if fault == "failed":
        return "request_failed", None, requests
    if fault != "malformed":
        return "ok", Summary.model_validate_json(content), requests
    error = "the reply contains no valid JSON value"
    content, fault = call(
        [
            *first_messages,
            {"role": "assistant", "content": content},
            {"role": "user", "content": correction_message(Summary, error)},
        ]
    )
    if fault == "failed":
        return "request_failed", None, requests
    if fault == "malformed":
        return "parse", None, requests
    return "ok", Summary.model_validate_json(content), requests


def test_fault_mix_every_item_ends_valid_or_rejected_with_its_reason(api_key, cache_dir):
    mix = FaultMix(
        summarize,
        rate_limit=0.20,
        server_error=0.10,
        timeout=0.05,
        malformed=0.10,
        seed=2,
        retry_after_s=0.01,
        timeout_delay=3.0,
    )
    texts = [f"topic{i} " + "word " * (i % 9) for i in range(120)]
    max_retries = 3
    expected = [predict(mix, text, max_retries) for text in texts]
    kinds = [kind for kind, _, _ in expected]
    # the plan exercises every path: clean, retried, corrected, rejected both ways
    assert {"ok", "parse", "request_failed"} <= set(kinds)

    with FakeOpenAI(mix) as server:
        with engine_for(server, cache_dir, max_concurrency=16, timeout_s=0.3, max_retries=max_retries) as engine:
            tasks = [Task(f"item-{i}", "main", t, Summary) for i, t in enumerate(texts)]
            outcomes = engine.run_step("summaries", tasks)
            report = engine.report()["steps"]["summaries"]
            rejects = list(engine.rejects)
        faults_seen = {r.fault for r in server.requests}
        requests_made = server.count

    assert faults_seen >= {"rate_limit", "server_error", "timeout", "malformed"}
    assert len(outcomes) == len(texts)
    for i, (outcome, (kind, value, _)) in enumerate(zip(outcomes, expected)):
        assert outcome.item_id == f"item-{i}"
        if kind == "ok":
            assert outcome.ok and outcome.value == value, i
        else:
            assert not outcome.ok and outcome.kind == kind and outcome.reason, i
    # nothing silently dropped: every failure is in the rejects, with its reason; counts add up
    assert [r["item_id"] for r in rejects] == [f"item-{i}" for i, k in enumerate(kinds) if k != "ok"]
    assert all(r["reason"] and r["kind"] in ("parse", "request_failed") for r in rejects)
    assert all(r["raw_text"] for r in rejects if r["kind"] == "parse")
    assert report["ok"] + report["rejected"] == report["items"] == len(texts)
    assert report["ok"] == kinds.count("ok") and report["rejected"] == len(rejects)
    assert requests_made == sum(n for _, _, n in expected) == report["requests"]
    assert report["calls_made"] + report["calls_failed"] + report["retries"] == report["requests"]
    assert set(report["errors"]) <= {"rate_limited", "http_500", "timeout"}


# -- SIGKILL half-way, then resume ------------------------------------------------------------------------
def cache_rows(cache_dir: Path) -> int:
    path = cache_dir / "llm.sqlite"
    if not path.exists():
        return 0
    try:
        with sqlite3.connect(path, timeout=5) as conn:
            return conn.execute("SELECT COUNT(*) FROM replies").fetchone()[0]
    except sqlite3.OperationalError:
        return 0


def run_driver(base_url, cache_dir, out_path, n, wait=True):
    command = [sys.executable, str(HERE / "kill_driver.py"), base_url, str(cache_dir), str(out_path), str(n)]
    proc = subprocess.Popen(command, env={**os.environ}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if wait:
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err.decode()
    return proc


def test_sigkill_half_way_then_rerun_repeats_no_successful_call_and_output_is_identical(api_key, tmp_path):
    n, half = 40, 20
    state = {"served": 0, "hold": True}

    def script(request):
        if state["hold"]:
            if state["served"] >= half:
                return Reply(hang=True)  # stay in flight until the process is killed
            state["served"] += 1
        return summarize(request)

    interrupted_cache, fresh_cache = tmp_path / "cache-a", tmp_path / "cache-b"
    interrupted_out, fresh_out = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    with FakeOpenAI(script) as server:
        proc = run_driver(server.base_url, interrupted_cache, interrupted_out, n, wait=False)
        deadline = time.monotonic() + 30
        while cache_rows(interrupted_cache) < half and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        assert cache_rows(interrupted_cache) == half
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert proc.returncode == -signal.SIGKILL and not interrupted_out.exists()
        with sqlite3.connect(interrupted_cache / "llm.sqlite") as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        before = server.count

        state["hold"] = False
        run_driver(server.base_url, interrupted_cache, interrupted_out, n)
        delivered = server.delivered_keys()
        resumed_requests = server.count - before
        run_driver(server.base_url, fresh_cache, fresh_out, n)  # uninterrupted reference run

    assert len(delivered) == len(set(delivered)) == n  # no call that had succeeded was made twice
    assert resumed_requests == n - half
    assert interrupted_out.read_bytes() == fresh_out.read_bytes()
    assert len(interrupted_out.read_text().splitlines()) == n


def test_ctrl_c_half_way_stops_promptly_and_the_rerun_makes_only_the_missing_calls(api_key, tmp_path):
    n, half = 24, 12
    state = {"served": 0, "hold": True}

    def script(request):
        if state["hold"]:
            if state["served"] >= half:
                return Reply(hang=True)
            state["served"] += 1
        return summarize(request)

    cache_dir, out = tmp_path / "cache", tmp_path / "out.jsonl"
    with FakeOpenAI(script) as server:
        proc = run_driver(server.base_url, cache_dir, out, n, wait=False)
        deadline = time.monotonic() + 30
        while cache_rows(cache_dir) < half and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=20)  # in-flight requests are cancelled, the cache is closed
        assert proc.returncode != 0 and b"KeyboardInterrupt" in err and not out.exists()
        assert cache_rows(cache_dir) == half
        before = server.count
        state["hold"] = False
        run_driver(server.base_url, cache_dir, out, n)
        assert server.count - before == n - half
        delivered = server.delivered_keys()
    assert len(delivered) == len(set(delivered)) == n


# -- warm cache: zero HTTP requests ---------------------------------------------------------------------------
def test_second_run_with_a_warm_cache_makes_zero_http_requests(api_key, tmp_path):
    mix = FaultMix(summarize, rate_limit=0.2, server_error=0.1, malformed=0.1, seed=3, retry_after_s=0.005)
    tasks = [Task(f"item-{i}", "main", f"topic{i} x y", Summary) for i in range(60)]
    with FakeOpenAI(mix) as server:
        with engine_for(server, tmp_path, max_concurrency=8, max_retries=8) as engine:
            first = engine.run_step("s", tasks)
        assert not [o for o in first if o.kind == "request_failed"]  # (those are never cached, by design)
        counted = server.http_requests
        with engine_for(server, tmp_path, max_concurrency=8) as engine:
            second = engine.run_step("s", tasks)
            step = engine.report()["steps"]["s"]
        assert server.http_requests == counted  # counted at the server: not a single HTTP request
    assert [(o.ok, o.value, o.text, o.kind) for o in second] == [(o.ok, o.value, o.text, o.kind) for o in first]
    assert all(o.cached for o in second)
    assert step["requests"] == 0 and step["calls_cached"] == step["calls_made"] + step["calls_cached"] > 0


# -- the API key appears nowhere ------------------------------------------------------------------------------
def test_a_recognisable_api_key_appears_in_no_output_log_cache_row_or_error(api_key, tmp_path, caplog, capfd):
    caplog.set_level(logging.DEBUG)

    def leaky(request):  # a server that echoes the key back in every way it can
        text = original_text(request)
        if "err500" in text and request.attempt == 0:
            return Reply.error(500, f"internal error while serving key {request.api_key}")
        if "err400" in text:
            return Reply.error(400, f"bad request from {request.api_key}")
        if "echo" in text:
            return {"topic": request.api_key, "words": 1}
        if "noise" in text:
            return f"I was called with {request.api_key}, not JSON"
        return summarize(request)

    texts = ["topicA fine", "topicB err500", "topicC err400", "topicD echo", "topicE noise", "topicF fine"]
    cache_dir = tmp_path / "cache"
    with FakeOpenAI(leaky) as server:
        with Engine(
            {
                "main": {
                    "model": "fake-model",
                    "base_url": server.base_url,
                    "api_key_env": "GEN_TEST_API_KEY",
                    "max_retries": 2,
                    "structured_output": "json_schema",
                }
            },
            RunSettings(cache_dir=cache_dir, progress="plain", progress_interval_s=0.01),
            retry=RetryPolicy(backoff_base_s=0.005),
        ) as engine:
            outcomes = engine.run_step(
                "s", [Task(f"i{i}", "main", t, Summary) for i, t in enumerate(texts)], max_reject_rate=None
            )
            rejects, report = list(engine.rejects), engine.report()
        assert all(r.api_key == api_key for r in server.requests)  # the key was really sent
        with (
            FakeOpenAI(lambda r: Reply.error(401, f"Incorrect API key provided: {r.api_key}")) as refusing,
            engine_for(refusing, tmp_path / "other") as engine,
            pytest.raises(GenError) as refused,
        ):
            engine.run_step("s", [Task("x", "main", "topicX", Summary)])

    assert [o.ok for o in outcomes] == [True, True, False, True, False, True]
    assert outcomes[3].value.topic == "[redacted]"
    places = {
        "outcomes": json.dumps([[o.text, o.reason, o.value.model_dump() if o.ok else None] for o in outcomes]),
        "rejects": json.dumps(rejects),
        "report": json.dumps(report),
        "logs": caplog.text,
        "stdout+stderr": "".join(capfd.readouterr()),
        "refused error": str(refused.value) + repr(refused.value) + repr(refused.value.__cause__),
    }
    for path in sorted(tmp_path.rglob("*")):
        if path.is_file():
            places[str(path)] = path.read_bytes().decode("latin-1")
    assert any("llm.sqlite" in name for name in places)
    leaks = [name for name, text in places.items() if api_key in text]
    assert leaks == []
    assert "refused the API key" in places["refused error"] and "[redacted]" in places["refused error"]


# -- throughput (the figures are in bench/bench_llm.py; here only that concurrency is really used) ----------
def test_throughput_uses_the_concurrency(api_key, tmp_path):
    with FakeOpenAI(lambda r: {"topic": "t", "words": 1}, delay=0.02) as server:
        with engine_for(server, tmp_path, max_concurrency=16) as engine:
            outcomes = engine.run_step("s", [Task(f"i{i}", "main", f"q {i}", Summary) for i in range(160)])
        spans = sorted((r.started, r.finished) for r in server.requests)
    assert all(o.ok for o in outcomes)
    peak = max(sum(1 for s, f in spans if s <= start < f) for start, _ in spans)
    assert 8 <= peak <= 16  # loose: the limit is reached (or nearly) and never exceeded
