"""Requests sent from worker processes (gen.llm.calls.senders): the same outcomes, accounting and cache as from the
engine's own loop, failures classified and retried the same way, keys scrubbed from what comes back."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import time
from pathlib import Path

from gen.llm import Engine
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.llm.test_engine import TEXTS, Summary, make_engine, summary_script, tasks_for


def engine_with(server, cache_dir, processes: int, **endpoint) -> Engine:
    return make_engine(server, cache_dir, request_processes=processes, **endpoint)


def request_processes() -> int:
    return len(sender_pids())


def cached_rows(cache_dir) -> list[tuple]:
    with sqlite3.connect(cache_dir / "llm.sqlite") as conn:
        return sorted(conn.execute("SELECT key, text, finish_reason, input_tokens, output_tokens FROM replies"))


def test_two_request_processes_give_the_outcomes_accounting_and_cache_of_the_engine_loop(api_key, tmp_path):
    results = {}
    with FakeOpenAI(summary_script) as server:
        for processes in (0, 2):
            cache_dir = tmp_path / f"cache-{processes}"
            with engine_with(server, cache_dir, processes) as engine:
                outcomes = engine.run_step("summaries", tasks_for(TEXTS))
                step = engine.report()["steps"]["summaries"]
                assert request_processes() == processes  # started with the engine, until it closes
            assert request_processes() == 0
            results[processes] = (
                [(o.item_id, o.ok, o.value, o.text) for o in outcomes],
                {k: v for k, v in step.items() if k != "seconds"},
                cached_rows(cache_dir),
            )
        keys = [r.api_key for r in server.requests]
    assert results[2] == results[0]
    assert results[0][1]["calls_made"] == 20 and len(keys) == 40 and set(keys) == {api_key}


def test_request_processes_start_with_an_online_engine_before_any_request_and_not_for_a_plan_or_offline(
    api_key, tmp_path
):
    with FakeOpenAI(summary_script) as server:
        with engine_with(server, tmp_path / "cache", 2):
            deadline = time.monotonic() + 30
            while request_processes() < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert request_processes() == 2 and not server.requests
        assert request_processes() == 0
        for mode in ({"plan_only": True}, {"offline": True}):
            with engine_with(server, tmp_path / "cache", 2, **mode):
                time.sleep(0.5)  # an online engine has started its processes well within this
                assert request_processes() == 0, mode


def test_failures_from_a_request_process_are_retried_and_scrubbed_of_the_key(api_key, tmp_path):
    seen: dict[str, int] = {}

    def flaky(request):  # each prompt: a 500 first, then a refusal that quotes the key, or an answer
        seen[request.last_user] = seen.get(request.last_user, 0) + 1
        if seen[request.last_user] == 1:
            return Reply.server_error()
        if request.last_user.startswith("topic3 "):
            return Reply.error(400, f"bad request from key {api_key}")
        return summary_script(request)

    with FakeOpenAI(flaky) as server, engine_with(server, tmp_path / "cache", 2) as engine:
        outcomes = engine.run_step("summaries", tasks_for(TEXTS[:6]), max_reject_rate=None)
        step = engine.report()["steps"]["summaries"]
    assert [o.ok for o in outcomes] == [True, True, True, False, True, True]
    assert outcomes[3].kind == "refused" and "http_400" not in outcomes[3].reason
    assert api_key not in outcomes[3].reason and "bad request from key" in outcomes[3].reason
    assert step["errors"] == {"http_500": 6, "http_400": 1} and step["retries"] == 6


def sender_pids() -> list[int]:
    """This process's children that run gen.llm.calls.senders (Linux /proc)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            command = (stat.parent / "cmdline").read_bytes()
        except (OSError, ValueError, IndexError):
            continue
        if parent == os.getpid() and b"gen.llm.calls.senders" in command:
            found.append(int(stat.parent.name))
    return found


def test_a_request_process_that_dies_fails_its_requests_which_are_retried_through_a_new_one(api_key, tmp_path):
    killed: list[int] = []

    def killing(request):  # the fifth request kills a request process; every request waits a little
        if len(killed) == 0 and request.last_user.startswith("topic4 "):
            killed.append(sender_pids()[0])
            os.kill(killed[0], signal.SIGKILL)
        return Reply.slow(0.2, json.dumps(summary_script(request)))

    with FakeOpenAI(killing) as server, engine_with(server, tmp_path / "cache", 2) as engine:
        outcomes = engine.run_step("summaries", tasks_for(TEXTS))
        step = engine.report()["steps"]["summaries"]
        alive = sender_pids()
    assert all(o.ok for o in outcomes) and [o.value for o in outcomes] == [summary_script_value(t) for t in TEXTS]
    assert step["errors"]["connection_error"] >= 1 and step["calls_made"] == 20
    assert len(alive) == 2 and killed[0] not in alive


def summary_script_value(text: str):
    return Summary(topic=text.split()[0], words=len(text.split()))


def test_no_more_request_processes_start_than_requests_may_be_in_flight(api_key, tmp_path):
    with FakeOpenAI(summary_script) as server, engine_with(server, tmp_path / "cache", 5, max_concurrency=2) as engine:
        outcomes = engine.run_step("summaries", tasks_for(TEXTS))
        assert all(outcome.ok for outcome in outcomes)
        assert request_processes() == 2  # asked for 5; at most 2 requests are ever in flight
