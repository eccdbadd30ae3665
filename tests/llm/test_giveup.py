"""Giving up (issue 11 item 6), the server's own words (issue 18 item 3) and structured_output auto (item 2),
against the fake server through the real openai client. Request counts are worked out by hand from the
rules in gen/llm/calls/giveup.py; most tests use max_concurrency 1 so that the order of requests is fixed."""

from __future__ import annotations

import socket

import pytest
from pydantic import BaseModel

from gen.errors import GenError, Stopped
from gen.llm import Engine, RunSettings, Task
from gen.llm.calls.request import RetryPolicy
from tests.fakes.openai_server import FakeOpenAI, FormatGate, Reply

REFUSAL = "response_format.type: Input should be 'text' or 'json_object' (got 'json_schema')"


class Summary(BaseModel):
    topic: str


def answer(request):
    if "Reply with the JSON object" in request.last_user:  # the structured-output probe
        return {"ok": True}
    return {"topic": request.last_user.split()[0]}


def engine_for(server_or_url, cache_dir, settings=None, **endpoint):
    base_url = server_or_url if isinstance(server_or_url, str) else server_or_url.base_url
    config = {
        "model": "fake-model",
        "base_url": base_url,
        "api_key_env": None,
        "max_concurrency": 1,
        "structured_output": "json_schema",
        **endpoint,
    }
    return Engine(
        {"main": config},
        settings or RunSettings(cache_dir=cache_dir, progress="off"),
        retry=RetryPolicy(backoff_base_s=0.005, backoff_cap_s=0.02),
    )


def tasks(n):
    return [Task(f"item-{i}", "main", f"topic{i} text", Summary) for i in range(n)]


def given_up(engine):
    return [r for r in engine.rejects if r["kind"] == "given_up"]


# -- the give-up budget and the breaker -------------------------------------------------------------------
def test_an_endpoint_that_always_answers_429_stops_the_run_after_max_consecutive_failures(cache_dir):
    with FakeOpenAI(lambda r: Reply.rate_limited(0.01)) as server, engine_for(server, cache_dir) as engine:
        with pytest.raises(Stopped) as info:
            engine.run_step("s", tasks(5))
        report = engine.report()
        rejects = engine.rejects
    # one slot: item-0 is sent, paused, sent again... its 5th 429 in a row is the default breaker's limit
    assert server.count == 5
    message = str(info.value)
    assert "keeps answering 429" in message and "llm endpoint 'main'" in message
    assert "max_consecutive_failures (now 5)" in message and "max_concurrency" in message
    assert [r["item_id"] for r in rejects] == [f"item-{i}" for i in range(5)]  # every unfinished item
    assert all(r["kind"] == "given_up" and "keeps answering 429" in r["reason"] for r in rejects)
    assert report["steps"]["s"]["rejected"] == 5 and report["steps"]["s"]["errors"] == {"rate_limited": 5}


def test_a_call_is_given_up_after_its_attempts_and_the_next_item_goes_on(cache_dir):
    with (
        FakeOpenAI(lambda r: Reply.rate_limited(0.01)) as server,
        engine_for(server, cache_dir, max_retries=2, max_consecutive_failures=100) as engine,
    ):
        outcomes = engine.run_step("s", tasks(2), max_reject_rate=None)
    assert server.count == 2 * 3  # 1 + max_retries attempts per item
    assert [o.kind for o in outcomes] == ["request_failed", "request_failed"]
    assert "given up after 3 attempts" in outcomes[0].reason and "(max_retries 2)" in outcomes[0].reason
    assert "rate_limited: Rate limit reached (fake)" in outcomes[0].reason


def test_a_call_is_given_up_rather_than_wait_past_max_wait_s(cache_dir):
    # the server asks for 5 s; the call may spend 1 s in all: it gives up at once instead of waiting
    with (
        FakeOpenAI(lambda r: Reply.rate_limited(5.0, header="ms")) as server,
        engine_for(server, cache_dir, max_wait_s=1) as engine,
    ):
        outcomes = engine.run_step("s", tasks(2), max_reject_rate=None)
    assert server.count == 2  # one attempt per item, no wait
    assert all(o.kind == "request_failed" and "(max_wait_s 1)" in o.reason for o in outcomes)


def test_a_hanging_server_costs_one_timeout_per_call_within_max_wait_s(cache_dir):
    # timeout 0.3 s, wait budget 0.5 s: the second attempt starts at ~0.3 s, ends at ~0.6 s, past the budget
    with (
        FakeOpenAI(lambda r: Reply(hang=True)) as server,
        engine_for(server, cache_dir, timeout_s=0.3, max_wait_s=0.5) as engine,
    ):
        outcomes = engine.run_step("s", tasks(1), max_reject_rate=None)
    assert server.count == 2
    assert outcomes[0].kind == "request_failed" and "(max_wait_s 0.5)" in outcomes[0].reason
    assert "timeout" in outcomes[0].reason


def test_consecutive_timeouts_stop_the_run_saying_so(cache_dir):
    with (
        FakeOpenAI(lambda r: Reply(hang=True)) as server,
        engine_for(server, cache_dir, timeout_s=0.2, max_retries=0, max_consecutive_failures=3) as engine,
    ):
        with pytest.raises(Stopped) as info:
            engine.run_step("s", tasks(5), max_reject_rate=None)
        rejects = engine.rejects
    assert server.count == 3  # items 0, 1 and 2 time out once each: the third is the limit
    assert "keeps timing out" in str(info.value) and "timeout_s 0.2s" in str(info.value)
    assert "raise timeout_s" in str(info.value)
    # items 0 and 1 were given up by their own budget (max_retries 0), the rest when the run stopped
    assert [r["kind"] for r in rejects] == ["request_failed", "request_failed", "given_up", "given_up", "given_up"]


def test_a_dead_port_stops_after_three_refused_connections_with_every_item_given_up(cache_dir):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with engine_for(f"http://127.0.0.1:{port}/v1", cache_dir) as engine:
        with pytest.raises(Stopped) as info:
            engine.run_step("s", tasks(5))
        report = engine.report()["steps"]["s"]
        rejects = given_up(engine)
    assert "cannot be reached" in str(info.value) and "check base_url" in str(info.value)
    assert report["errors"] == {"connection_error": 3}
    assert report["requests"] in (3, 4)  # a 4th may have taken the slot as the 3rd failed (then cancelled)
    assert len(rejects) == 5


def test_a_reply_in_between_resets_the_breaker(cache_dir):
    # every other request is a 429: never two in a row, so 12 items all succeed whatever the limit (2)
    def script(request):
        return Reply.rate_limited(0.01) if request.index % 2 == 0 else answer(request)

    with FakeOpenAI(script) as server, engine_for(server, cache_dir, max_consecutive_failures=2) as engine:
        outcomes = engine.run_step("s", tasks(12))
    assert all(o.ok for o in outcomes) and server.count == 24


# -- what the server said ---------------------------------------------------------------------------------
def test_explicit_json_schema_on_llama_cpp_fails_within_a_few_requests_quoting_the_server(cache_dir):
    with FakeOpenAI(FormatGate(answer)) as server, engine_for(server, cache_dir) as engine:
        with pytest.raises(Stopped) as info:
            engine.run_step("s", tasks(20))
        rejects = engine.rejects
    # one request at a time: the first 500 is retried; the same message again is a refusal, and so are the
    # next two: 3 refusals in a row after 4 requests (a 5th may have taken the slot as the 4th failed; it is
    # cancelled with the stop, as in the dead-port test above)
    assert server.count in (4, 5)
    message = str(info.value)
    assert f'"HTTP 500: {REFUSAL}" (×3)' in message
    assert "set structured_output: json_object (or auto" in message
    assert "File " not in message  # the server's traceback line is dropped
    refused = [r for r in rejects if r["kind"] == "refused"]
    assert len(refused) == 2 and all(REFUSAL in r["reason"] for r in refused)  # the third stopped the run
    assert len(given_up(engine)) == 18


def test_a_4xx_is_not_retried_and_names_the_setting(cache_dir):
    def script(request):
        return Reply.error(400, "Unrecognized request argument supplied: top_k")

    with (
        FakeOpenAI(script) as server,
        engine_for(server, cache_dir, extra_params={"top_k": 5}) as engine,
        pytest.raises(Stopped) as info,
    ):
        engine.run_step("s", tasks(10))
    assert server.count == 3  # one request per item, three refusals in a row
    assert "Unrecognized request argument supplied: top_k" in str(info.value)
    assert "remove or fix top_k in the endpoint's extra_params" in str(info.value)


def test_a_refused_item_among_answered_ones_is_rejected_alone(cache_dir):
    def script(request):
        if "topic3" in request.last_user:
            return Reply.error(400, "This model's maximum context length is 8 tokens")
        return answer(request)

    with FakeOpenAI(script) as server, engine_for(server, cache_dir) as engine:
        outcomes = engine.run_step("s", tasks(6), max_reject_rate=None)
    assert server.count == 6
    assert [o.ok for o in outcomes] == [True, True, True, False, True, True]
    assert outcomes[3].kind == "refused" and "maximum context length is 8 tokens" in outcomes[3].reason
    assert "a lower max_tokens" in outcomes[3].reason


# -- structured_output: auto ------------------------------------------------------------------------------
def probes(server):
    return [r for r in server.requests if "Reply with the JSON object" in r.last_user]


def test_auto_on_llama_cpp_picks_json_object_with_the_schema_and_remembers_it(cache_dir, capsys):
    settings = RunSettings(cache_dir=cache_dir, progress="plain")
    with FakeOpenAI(FormatGate(answer)) as server:
        with engine_for(server, cache_dir, settings, structured_output="auto") as engine:
            outcomes = engine.run_step("s", tasks(3))
            chosen = engine.report()["endpoints"]["main"]["structured_output_chosen"]
        first = list(server.requests)
        with engine_for(server, cache_dir, settings, structured_output="auto") as engine:
            again = engine.run_step("s", tasks(3))
            cached = engine.report()["endpoints"]["main"]["structured_output_chosen"]
    assert [r.response_format["type"] for r in probes(server)] == ["json_schema", "json_object"]
    assert "schema" in probes(server)[1].response_format
    assert all(o.ok for o in outcomes) and len(first) == 2 + 3
    assert all(r.response_format == {"type": "json_object", "schema": Summary.model_json_schema()} for r in first[2:])
    assert chosen == {"mode": "json_object_schema", "how": "probe", "refused": {"json_schema": f"HTTP 500: {REFUSAL}"}}
    assert server.count == 5 and all(o.ok and o.cached for o in again)  # no probe, no call: both cached
    assert cached == {"mode": "json_object_schema", "how": "cache"}
    err = capsys.readouterr().err
    assert "structured_output auto uses json_object_schema, found by a probe" in err
    assert "set structured_output: json_object_schema in the recipe to skip the probe" in err


def test_auto_falls_back_to_plain_text_when_json_mode_is_refused_too(cache_dir):
    with (
        FakeOpenAI(FormatGate(answer, accepts=("text",))) as server,
        engine_for(server, cache_dir, structured_output="auto") as engine,
    ):
        outcomes = engine.run_step("s", tasks(2))
        chosen = engine.report()["endpoints"]["main"]["structured_output_chosen"]
    formats = [(r.response_format or {}).get("type") for r in server.requests]
    assert formats == ["json_schema", "json_object", "json_object", None, None, None]
    assert chosen["mode"] == "off" and list(chosen["refused"]) == ["json_schema", "json_object_schema", "json_object"]
    assert all(o.ok for o in outcomes)


def test_an_explicit_mode_is_never_probed(cache_dir):
    with (
        FakeOpenAI(answer) as server,
        engine_for(server, cache_dir, structured_output="json_object") as engine,
    ):
        engine.run_step("s", tasks(2))
        report = engine.report()["endpoints"]["main"]
    assert server.count == 2 and not probes(server)
    assert all(r.response_format == {"type": "json_object"} for r in server.requests)
    assert "structured_output_chosen" not in report


def test_auto_needs_no_network_to_plan_and_an_offline_run_without_a_probe_says_why(cache_dir):
    with FakeOpenAI(answer) as server:
        with Engine(
            {"main": {"model": "fake-model", "base_url": server.base_url, "api_key_env": None}},
            RunSettings(cache_dir=cache_dir, progress="off"),
            plan_only=True,
        ) as engine:
            plan = engine.plan("s", tasks(3))
        with (
            engine_for(
                server, cache_dir, RunSettings(cache_dir=cache_dir, offline=True), structured_output="auto"
            ) as e,
            pytest.raises(GenError) as info,
        ):
            e.run_step("s", tasks(3))
    assert server.count == 0 and plan.calls_needed == 3
    assert "never probed" in str(info.value) and "structured_output" in str(info.value)


def test_text_tasks_need_no_probe(cache_dir):
    with FakeOpenAI(lambda r: "plain") as server, engine_for(server, cache_dir, structured_output="auto") as engine:
        outcomes = engine.run_step("s", [Task("a", "main", "hello")])
    assert outcomes[0].value == "plain" and server.count == 1
