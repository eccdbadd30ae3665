"""The engine against the fake OpenAI-compatible server (real HTTP through the openai client)."""

from __future__ import annotations

import io
import json
import math

import pytest
from pydantic import BaseModel

from gen.errors import GenError, Stopped
from gen.llm import Engine, RunSettings, Task, estimate_input_tokens
from gen.llm.accounts.progress import PlainReporter
from gen.llm.calls.request import RetryPolicy
from tests.fakes.openai_server import FakeOpenAI, Reply, count_words


class Summary(BaseModel):
    topic: str
    words: int


def summary_script(request):
    """Answers a summary request for the user's text; the correction round always gets a valid answer."""
    text = request.last_user
    return {"topic": text.split()[0], "words": count_words(text)}


def make_engine(
    server, cache_dir, *, progress="off", reporter=None, plan_only=False, offline=False, request_processes=0, **endpoint
):
    config = {
        "model": "fake-model",
        "base_url": server.base_url,
        "api_key_env": "GEN_TEST_API_KEY",
        "max_concurrency": 8,
        "timeout_s": 5,
        "max_retries": 3,
        "structured_output": "json_schema",  # the auto probe has its own tests (test_giveup.py)
        **endpoint,
    }
    return Engine(
        {"main": config},
        RunSettings(cache_dir=cache_dir, progress=progress, offline=offline, request_processes=request_processes),
        plan_only=plan_only,
        reporter=reporter,
        retry=RetryPolicy(backoff_base_s=0.01, backoff_cap_s=0.05),
    )


def tasks_for(texts, parser=Summary, endpoint="main", prefix="item"):
    return [Task(f"{prefix}-{i}", endpoint, text, parser) for i, text in enumerate(texts)]


TEXTS = [f"topic{i} " + "word " * (i % 5) for i in range(20)]


def test_run_step_parses_values_in_task_order_and_accounts_tokens(api_key, cache_dir):
    with FakeOpenAI(summary_script) as server, make_engine(server, cache_dir) as engine:
        outcomes = engine.run_step("summaries", tasks_for(TEXTS))
        report = engine.report()
        requests = list(server.requests)
    assert [o.item_id for o in outcomes] == [f"item-{i}" for i in range(20)]
    assert all(o.ok and not o.cached and not o.corrected for o in outcomes)
    assert [o.value for o in outcomes] == [Summary(topic=f"topic{i}", words=1 + i % 5) for i in range(20)]
    step = report["steps"]["summaries"]
    # independent expectations: the fake server's usage is words in / words out
    expected_in = sum(count_words(t) for t in TEXTS)
    expected_out = sum(count_words(json.dumps({"topic": t.split()[0], "words": count_words(t)})) for t in TEXTS)
    assert (step["items"], step["ok"], step["rejected"]) == (20, 20, 0)
    calls = (step["calls_made"], step["calls_cached"], step["calls_failed"], step["requests"], step["retries"])
    assert calls == (20, 0, 0, 20, 0)
    assert (step["input_tokens"], step["output_tokens"]) == (expected_in, expected_out)
    assert step["cost_usd"] is None  # no price table
    assert len(requests) == 20
    assert all(r.api_key == api_key for r in requests)
    assert requests[0].response_format["json_schema"]["schema"] == Summary.model_json_schema()
    assert report["endpoints"]["main"]["model"] == "fake-model"
    assert "api_key" not in json.dumps(report["endpoints"])


def run_twice(server, cache_dir, tasks):
    """Step "s" run by one engine, then by a new one over the same cache: (the first outcomes, the second's, the
    second's step report, the server's (calls, HTTP requests) between the two runs)."""
    with make_engine(server, cache_dir) as engine:
        first = engine.run_step("s", tasks)
    between = (server.count, server.http_requests)
    with make_engine(server, cache_dir) as engine:
        second = engine.run_step("s", tasks)
        step = engine.report()["steps"]["s"]
    return first, second, step, between


def test_warm_cache_makes_zero_http_requests_and_gives_identical_outcomes(api_key, cache_dir):
    with FakeOpenAI(summary_script) as server:
        first, second, step, (_, seen) = run_twice(server, cache_dir, tasks_for(TEXTS))
        assert server.http_requests == seen == 20
    assert [(o.value, o.text) for o in second] == [(o.value, o.text) for o in first]
    assert all(o.cached for o in second)
    assert (step["calls_made"], step["calls_cached"], step["requests"]) == (0, 20, 0)
    assert step["cached_input_tokens"] == sum(count_words(t) for t in TEXTS)


def test_editing_a_prompt_invalidates_exactly_the_changed_calls(api_key, cache_dir):
    with FakeOpenAI(summary_script) as server:
        with make_engine(server, cache_dir) as engine:
            engine.run_step("s", tasks_for(TEXTS))
        edited = [text + " (edited)" if i % 4 == 0 else text for i, text in enumerate(TEXTS)]
        with make_engine(server, cache_dir) as engine:
            outcomes = engine.run_step("s", tasks_for(edited))
        second_run = server.requests[20:]
    assert sorted(r.last_user for r in second_run) == sorted(t for t in edited if t.endswith("(edited)"))
    assert [o.cached for o in outcomes] == [i % 4 != 0 for i in range(20)]


def test_sampling_parameters_and_sample_index_enter_the_key(api_key, cache_dir):
    with FakeOpenAI(summary_script) as server:
        with make_engine(server, cache_dir, temperature=0.7, seed=100) as engine:
            engine.run_step("s", [Task("a", "main", "topicA x", Summary, sample=k) for k in range(3)])
        with make_engine(server, cache_dir, temperature=0.9, seed=100) as engine:
            engine.run_step("s", [Task("a", "main", "topicA x", Summary, sample=0)])
        with make_engine(server, cache_dir, temperature=0.9, seed=100, max_concurrency=1, timeout_s=9) as engine:
            again = engine.run_step("s", [Task("a", "main", "topicA x", Summary, sample=0)])  # limits: not data
        assert server.count == 4
        assert sorted(r.body["seed"] for r in server.requests[:3]) == [100, 101, 102]
        assert server.requests[3].body["temperature"] == 0.9
    assert again[0].cached


def test_identical_tasks_in_one_step_make_one_call(api_key, cache_dir):
    with FakeOpenAI(summary_script) as server, make_engine(server, cache_dir) as engine:
        outcomes = engine.run_step("s", [Task(f"dup-{i}", "main", "topicZ same prompt", Summary) for i in range(5)])
        assert server.count == 1
    assert all(o.ok and o.value.topic == "topicZ" for o in outcomes)


def test_correction_round_shows_the_error_and_recovers(api_key, cache_dir):
    def script(request):
        original = request.messages[0]["content"]
        if request.is_correction:
            if "words" not in request.last_user:
                return "still wrong"
            return {"topic": original.split()[0], "words": count_words(original)}
        return {"topic": original.split()[0]}  # "words" missing

    with FakeOpenAI(script) as server, make_engine(server, cache_dir) as engine:
        outcomes = engine.run_step("s", tasks_for(TEXTS[:4]))
        correction = next(r for r in server.requests if r.is_correction)
        step = engine.report()["steps"]["s"]
    assert all(o.ok and o.corrected for o in outcomes)
    assert outcomes[2].value == Summary(topic="topic2", words=3)
    roles = [m["role"] for m in correction.messages]
    assert roles == ["user", "assistant", "user"]
    assert "words: Field required" in correction.last_user
    assert (step["corrections"], step["corrected"], step["calls_made"]) == (4, 4, 8)


def test_reject_after_failed_correction_with_raw_text_and_reason(api_key, cache_dir):
    def script(request):
        if "bad" in request.messages[0]["content"]:
            return "I cannot answer in JSON, sorry." if not request.is_correction else "Still no JSON."
        return summary_script(request)

    texts = ["topicA fine", "topicB bad", "topicC fine", "topicD fine", "topicE fine"]
    with FakeOpenAI(script) as server, make_engine(server, cache_dir) as engine:
        outcomes = engine.run_step("s", tasks_for(texts))
        rejects = list(engine.rejects)
    assert [o.ok for o in outcomes] == [True, False, True, True, True]
    assert outcomes[1].kind == "parse" and outcomes[1].text == "Still no JSON."
    assert rejects == [
        {
            "step": "s",
            "item_id": "item-1",
            "sample": 0,
            "endpoint": "main",
            "kind": "parse",
            "reason": outcomes[1].reason,
            "raw_text": "Still no JSON.",
        }
    ]
    assert "no valid JSON" in rejects[0]["reason"] and "correction" in rejects[0]["reason"]


def test_max_reject_rate_stops_the_step_with_a_clear_error(api_key, cache_dir):
    def script(request):
        return "no json here"

    with FakeOpenAI(script) as server, make_engine(server, cache_dir) as engine:
        with pytest.raises(GenError) as info:
            engine.run_step("questions", tasks_for(TEXTS), max_reject_rate=0.2)
        rejected = len(engine.rejects)
    message = str(info.value)
    assert "step questions" in message and "max_reject_rate" in message and "20%" in message
    assert rejected > math.floor(0.2 * len(TEXTS))  # it stopped once the rate was certainly exceeded


def test_max_reject_rate_counts_every_call_of_a_step_together(api_key, cache_dir):
    """A follow-up round of one item whose reply never parses: 1 rejected of 21 items is within 20%."""

    def script(request):
        asked = " ".join(str(m.get("content")) for m in request.messages)  # the correction round too
        return "no json here" if "broken" in asked else summary_script(request)

    with FakeOpenAI(script) as server, make_engine(server, cache_dir) as engine:
        engine.run_step("questions", tasks_for(TEXTS), max_reject_rate=0.2)
        (retry,) = engine.run_step("questions", tasks_for(["broken text"], prefix="again"), max_reject_rate=0.2)
        with pytest.raises(GenError, match="6 of 26 items rejected"):  # 6 > floor(0.2 × 26) = 5
            engine.run_step(
                "questions", tasks_for([f"broken again {i}" for i in range(5)], prefix="more"), max_reject_rate=0.2
            )
    assert not retry.ok and retry.kind == "parse"


def test_truncated_replies_are_rejected_and_never_cached(api_key, cache_dir):
    def script(request):
        if "topic3" in request.last_user:
            return Reply.truncated('{"topic": "top')
        return summary_script(request)

    with FakeOpenAI(script) as server:
        for _ in range(2):
            with make_engine(server, cache_dir, max_tokens=5) as engine:
                outcomes = engine.run_step("s", tasks_for(TEXTS[:5]))
        truncated_calls = [r for r in server.requests if "topic3" in r.last_user]
    assert len(truncated_calls) == 2  # asked again on the second run: not cached
    assert outcomes[3].kind == "truncated" and "finish_reason=length" in outcomes[3].reason
    assert "max_tokens=5" in outcomes[3].reason and outcomes[3].text == '{"topic": "top'
    assert server.count == 5 + 1


def test_server_errors_are_retried_then_rejected_and_never_cached(api_key, cache_dir):
    def script(request):
        if "topic1" in request.last_user:
            return Reply.server_error()
        if "topic2" in request.last_user and request.attempt < 2:
            return Reply.server_error(503)
        return summary_script(request)

    with FakeOpenAI(script) as server:
        with make_engine(server, cache_dir, max_retries=3) as engine:
            outcomes = engine.run_step("s", tasks_for(TEXTS[:4]), max_reject_rate=None)
            step = engine.report()["steps"]["s"]
        failed_attempts = len([r for r in server.requests if "topic1" in r.last_user])
        with make_engine(server, cache_dir, max_retries=0) as engine:
            engine.run_step("s", tasks_for(TEXTS[:4]), max_reject_rate=None)
        total_topic1 = len([r for r in server.requests if "topic1" in r.last_user])
    assert failed_attempts == 4  # 1 + max_retries
    assert total_topic1 == 5  # the failure was not cached: the second run asked again (once, no retries)
    assert outcomes[1].kind == "request_failed" and "after 4 attempts" in outcomes[1].reason
    assert "http_500" in outcomes[1].reason
    assert outcomes[2].ok  # two 503s, then success
    assert step["errors"] == {"http_500": 4, "http_503": 2}
    assert (step["calls_made"], step["calls_failed"], step["requests"], step["retries"]) == (3, 1, 9, 5)


def test_rate_limits_honour_retry_after_and_pause_everyone(api_key, cache_dir):
    def script(request):
        if request.index == 0:
            return Reply.rate_limited(0.3, header="ms")
        return summary_script(request)

    with FakeOpenAI(script) as server, make_engine(server, cache_dir, max_concurrency=4) as engine:
        outcomes = engine.run_step("s", tasks_for(TEXTS))
        step = engine.report()["steps"]["s"]
        limited = server.requests[0]
        others = [r for r in server.requests[1:] if r.key != limited.key]
    assert all(o.ok for o in outcomes)
    assert step["errors"] == {"rate_limited": 1}
    # once the 429 is seen every worker holds back for the advised 300 ms (margins for requests already sent)
    window = (limited.finished + 0.05, limited.finished + 0.25)
    assert not [r for r in server.requests if window[0] < r.started < window[1]]
    assert [r for r in others if r.started >= window[1]]  # other items were held back, not only the retry
    retry = next(r for r in server.requests if r.key == limited.key and r.attempt == 1)
    assert retry.started - limited.finished >= 0.25


def test_timeouts_are_retried(api_key, cache_dir):
    def script(request):
        if "topic1" in request.last_user and request.attempt == 0:
            return Reply.slow(3.0, json.dumps(summary_script(request)))
        return summary_script(request)

    with FakeOpenAI(script) as server, make_engine(server, cache_dir, timeout_s=0.3) as engine:
        outcomes = engine.run_step("s", tasks_for(TEXTS[:3]))
        step = engine.report()["steps"]["s"]
    assert all(o.ok for o in outcomes)
    assert step["errors"] == {"timeout": 1}


def test_refused_key_stops_the_run_and_missing_key_fails_before_any_request(api_key, cache_dir, monkeypatch):
    with FakeOpenAI(lambda r: Reply.error(401, "Incorrect API key provided")) as server:
        with make_engine(server, cache_dir) as engine, pytest.raises(GenError) as info:
            engine.run_step("s", tasks_for(TEXTS[:3]))
        assert "refused the API key" in str(info.value) and "GEN_TEST_API_KEY" in str(info.value)
        monkeypatch.delenv("GEN_TEST_API_KEY")
        before = server.count
        with make_engine(server, cache_dir) as engine, pytest.raises(GenError, match="GEN_TEST_API_KEY is not set"):
            engine.run_step("s", tasks_for(TEXTS[:3]))
        assert server.count == before


def test_unknown_endpoint_names_the_nearest(api_key, cache_dir):
    with (
        FakeOpenAI() as server,
        make_engine(server, cache_dir) as engine,
        pytest.raises(GenError, match="did you mean 'main'"),
    ):
        engine.run_step("s", [Task("x", "mian", "hi")])


def test_offline_passes_on_a_warm_cache_and_fails_on_the_first_miss(api_key, cache_dir):
    with FakeOpenAI(summary_script) as server:
        with make_engine(server, cache_dir) as engine:
            engine.run_step("s", tasks_for(TEXTS[:5]))
        before = server.count
        with make_engine(server, cache_dir, offline=True) as engine:
            assert all(o.ok for o in engine.run_step("s", tasks_for(TEXTS[:5])))
            with pytest.raises(GenError) as info:
                engine.run_step("questions", tasks_for([*TEXTS[:3], "topicNEW never seen", "topicNEW2"]))
        assert server.count == before
    assert "offline" in str(info.value) and "step questions, item item-3" in str(info.value)


def test_plan_counts_cached_and_needed_calls_and_projects_tokens_without_network(cache_dir, monkeypatch):
    monkeypatch.delenv("GEN_TEST_API_KEY", raising=False)  # planning needs no key
    with FakeOpenAI(summary_script) as server:
        monkeypatch.setenv("GEN_TEST_API_KEY", "sk-plan-phase")
        price = {"input_per_million": 2.0, "output_per_million": 8.0}
        with make_engine(server, cache_dir, price=price, max_tokens=40) as engine:
            engine.run_step("s", tasks_for(TEXTS[:6]))
        monkeypatch.delenv("GEN_TEST_API_KEY")
        before = server.http_requests
        tasks = tasks_for(TEXTS[:10])
        with make_engine(server, cache_dir, price=price, max_tokens=40) as engine:
            plan = engine.plan("s", tasks)
        assert server.http_requests == before
    cached_out = [count_words(json.dumps(summary_script(type("R", (), {"last_user": t})()))) for t in TEXTS[:6]]
    per_call = round(sum(cached_out) / len(cached_out))
    needed_in = sum(estimate_input_tokens([{"role": "user", "content": t}]) for t in TEXTS[6:10])
    assert (plan.items, plan.calls_needed, plan.calls_cached) == (10, 4, 6)
    assert plan.projected_input_tokens == needed_in
    assert plan.projected_output_tokens == 4 * per_call
    assert plan.projected_cost_usd == pytest.approx((needed_in * 2.0 + 4 * per_call * 8.0) / 1e6)
    assert plan.to_dict()["endpoints"]["main"]["output_basis"].startswith("observed average of 6")


def test_plan_only_engine_returns_cached_outcomes_and_records_a_plan(api_key, cache_dir):
    with FakeOpenAI(summary_script) as server:
        with make_engine(server, cache_dir) as engine:
            engine.run_step("s", tasks_for(TEXTS[:3]))
        before = server.count
        with make_engine(server, cache_dir, plan_only=True) as engine:
            outcomes = engine.run_step("s", tasks_for(TEXTS[:5]))
            report = engine.report()
        assert server.count == before
    assert [o.ok for o in outcomes] == [True, True, True, False, False]
    assert outcomes[4].kind == "not_cached"
    assert report["mode"] == "plan" and engine.rejects == []
    assert report["plan"]["s"]["calls_needed"] == 2 and report["plan"]["s"]["calls_cached"] == 3
    # with no max_tokens and no observations for the endpoint, the assumption is stated
    assert report["plan"]["s"]["endpoints"]["main"]["output_basis"].startswith("observed average of 3")


def test_concurrency_is_bounded_and_used(api_key, cache_dir):
    with FakeOpenAI(summary_script, delay=0.05) as server:
        with make_engine(server, cache_dir, max_concurrency=4) as engine:
            engine.run_step("s", tasks_for([f"topic{i} x" for i in range(24)]))
        spans = [(r.started, r.finished) for r in server.requests]
    peak = max(sum(1 for s, f in spans if s <= start < f) for start, _ in spans)
    assert 2 <= peak <= 4


def test_structured_output_modes_shape_the_request(api_key, cache_dir):
    with FakeOpenAI(summary_script) as server:
        for mode in ("json_schema", "json_object", "off"):
            with make_engine(server, cache_dir, structured_output=mode) as engine:
                assert engine.run_step("s", [Task("a", "main", "topicQ x", Summary)])[0].ok
        with make_engine(server, cache_dir) as engine:
            text = engine.run_step("s", [Task("b", "main", "plain please", None)])[0]
        formats = [r.response_format for r in server.requests]
    assert formats[0]["type"] == "json_schema" and formats[1] == {"type": "json_object"} and formats[2] is None
    assert formats[3] is None and text.value == text.text


def test_progress_plain_lines_and_error_summary(api_key, cache_dir):
    stream = io.StringIO()

    def script(request):
        if request.attempt == 0 and "topic1 " in request.last_user:
            return Reply.server_error()
        return summary_script(request)

    with FakeOpenAI(script) as server, make_engine(server, cache_dir, reporter=PlainReporter(stream, 0.0)) as engine:
        engine.run_step("summaries", tasks_for(TEXTS[:4]))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "[llm] summaries: 4 calls"
    assert "4/4 calls done, 0 cached, items: 4 ok, 0 rejected of 4" in lines[-2]
    assert lines[-1] == "[llm] summaries: errors by type: http_500 ×1"


def test_preview_renders_prompts_with_cache_status(api_key, cache_dir):
    with FakeOpenAI(summary_script) as server, make_engine(server, cache_dir, temperature=0.3) as engine:
        engine.run_step("s", [Task("a", "main", "topicP x", Summary)])
        text = engine.preview(
            [
                Task(
                    "a",
                    "main",
                    [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "topicP y"}],
                    Summary,
                ),
                Task("b", "main", "topicP x", Summary),
            ]
        )
    assert "item a" in text and "not cached" in text and "──── system ────\nBe brief." in text
    assert "item b · sample 0 · endpoint main · cached" in text and "'temperature': 0.3" in text
    assert "response_format: json_schema (Summary)" in text


def test_endpoint_without_key_and_invalid_endpoint_config(cache_dir, monkeypatch):
    monkeypatch.delenv("GEN_TEST_API_KEY", raising=False)
    with FakeOpenAI(summary_script) as server:
        with make_engine(server, cache_dir, api_key_env=None) as engine:
            assert engine.run_step("s", tasks_for(TEXTS[:1]))[0].ok
        assert server.requests[0].api_key == "no-key"
    with pytest.raises(GenError) as info:
        Engine({"main": {"model": "m", "temperature": 7}}, RunSettings(cache_dir=cache_dir))
    assert "llm endpoint 'main'" in str(info.value) and "temperature" in str(info.value)


def test_an_unreachable_endpoint_stops_the_run_quickly(api_key, cache_dir):
    import socket

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = {
        "model": "m",
        "base_url": f"http://127.0.0.1:{port}/v1",
        "api_key_env": "GEN_TEST_API_KEY",
        "max_retries": 2,
        "max_concurrency": 2,
    }
    with Engine(
        {"main": config}, RunSettings(cache_dir=cache_dir, progress="off"), retry=RetryPolicy(backoff_base_s=0.01)
    ) as engine:
        with pytest.raises(GenError) as info:
            engine.run_step("s", tasks_for(TEXTS))
        report = engine.report()["steps"]["s"]
        probe = engine.report()["steps"]["structured_output probe"]
        given_up = [r for r in engine.rejects if r["kind"] == "given_up"]
    assert isinstance(info.value, Stopped)
    assert "cannot be reached" in str(info.value) and f"127.0.0.1:{port}" in str(info.value)
    assert "base_url" in str(info.value)
    # stopped after 3 refused connections (the probe's), not 20 items x 3 attempts
    assert report["requests"] + probe["requests"] <= 3 + 2
    assert len(given_up) == 20 and all("cannot be reached" in r["reason"] for r in given_up)
