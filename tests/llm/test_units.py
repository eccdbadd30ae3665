"""Unit tests of the engine's parts: config, cache keys and store, JSON extraction and parsers, limiter."""

from __future__ import annotations

import email.utils
import hashlib
import json
import sqlite3
import time

import pytest
from pydantic import BaseModel, ValidationError

from gen.errors import GenError
from gen.llm import (
    Cache,
    EndpointConfig,
    RunSettings,
    build_request,
    cache_key,
    data_fingerprint,
    data_params,
    default_cache_path,
    estimate_input_tokens,
    extract_json,
    split_messages,
)
from gen.llm.cache.store import CachedReply
from gen.llm.calls.limiter import Slots, TokenBucket, backoff_delay, retry_after_seconds
from gen.llm.config import RateLimits, apply_limits
from gen.llm.structured import ParseFailure, correction_message, parse_reply, response_format_for
from gen.templating import Templates


class Item(BaseModel):
    name: str
    count: int


# -- config -------------------------------------------------------------------------------------------
def test_endpoint_config_forbids_unknown_keys_and_credentials_in_url():
    with pytest.raises(ValidationError):
        EndpointConfig(model="m", temprature=0.3)  # typo
    with pytest.raises(ValidationError, match="credentials"):
        EndpointConfig(model="m", base_url="https://user:secret@example.com/v1")
    with pytest.raises(ValidationError):
        EndpointConfig(model="m", base_url="ftp://example.com")
    with pytest.raises(ValidationError, match="extra_params"):
        EndpointConfig(model="m", extra_params={"temperature": 1})
    assert EndpointConfig(model="m", base_url="http://localhost:8000/v1/").base_url == "http://localhost:8000/v1"


def test_data_params_hold_only_what_changes_the_data():
    base = EndpointConfig(model="m", temperature=0.7, max_tokens=100, seed=3)
    limits = base.model_copy(
        update={
            "max_concurrency": 99,
            "requests_per_minute": 10.0,
            "timeout_s": 5.0,
            "max_retries": 1,
            "api_key_env": "OTHER",
            "price": {"input_per_million": 1, "output_per_million": 2},
        }
    )
    assert data_fingerprint(base) == data_fingerprint(limits)
    assert set(data_params(base)) == {
        "base_url",
        "model",
        "temperature",
        "top_p",
        "max_tokens",
        "seed",
        "extra_params",
        "structured_output",
    }
    for change in (
        {"temperature": 0.2},
        {"model": "n"},
        {"seed": 4},
        {"max_tokens": 101},
        {"top_p": 0.5},
        {"structured_output": "off"},
        {"extra_params": {"top_k": 5}},
        {"base_url": "http://x/v1"},
    ):
        assert data_fingerprint(base.model_copy(update=change)) != data_fingerprint(base), change


def test_run_settings_override_limits_only(tmp_path):
    endpoint = EndpointConfig(model="m", max_concurrency=4, temperature=0.5)
    limits = RateLimits(max_concurrency=16, requests_per_minute=60)
    effective = apply_limits(endpoint, limits)
    assert (effective.max_concurrency, effective.requests_per_minute, effective.temperature) == (16, 60, 0.5)
    assert data_fingerprint(effective) == data_fingerprint(endpoint)
    assert RunSettings(cache_dir=tmp_path, limits=limits).cache_path() == tmp_path / "llm.sqlite"
    with pytest.raises(GenError, match=r"RunSettings\.cache_folder: unknown key 'cache_folder'; did you mean"):
        RunSettings(cache_folder=tmp_path)


def test_default_cache_path(monkeypatch, tmp_path):
    monkeypatch.setenv("GEN_CACHE_DIR", str(tmp_path / "c"))
    assert default_cache_path() == tmp_path / "c" / "llm.sqlite"
    monkeypatch.delenv("GEN_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert default_cache_path() == tmp_path / "xdg" / "gen" / "llm.sqlite"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_path() == tmp_path / "home" / ".cache" / "gen" / "llm.sqlite"


# -- request body and cache key -------------------------------------------------------------------------
def test_build_request_sends_every_sampling_parameter_and_offsets_the_seed_by_sample():
    endpoint = EndpointConfig(model="m", temperature=0.7, top_p=0.9, max_tokens=50, seed=10, extra_params={"top_k": 4})
    messages = [{"role": "user", "content": "hi"}]
    body = build_request(endpoint, messages, {"type": "json_object"}, sample=2)
    assert body == {
        "model": "m",
        "messages": messages,
        "temperature": 0.7,
        "top_p": 0.9,
        "max_tokens": 50,
        "seed": 12,
        "top_k": 4,
        "response_format": {"type": "json_object"},
    }
    assert "temperature" not in build_request(EndpointConfig(model="m"), messages, None, 0)


def test_cache_key_is_sha256_of_canonical_json_and_sensitive_to_each_part():
    body = {"model": "m", "messages": [{"role": "user", "content": "héllo"}], "temperature": 0.7}
    material = {"v": 1, "base_url": "http://h/v1", "body": body, "sample": 0}
    expected = hashlib.sha256(
        json.dumps(material, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    ).hexdigest()
    assert cache_key("http://h/v1", body, 0) == expected
    assert cache_key("http://h/v1/", dict(reversed(list(body.items()))), 0) == expected  # order/slash-insensitive
    assert cache_key("http://h/v1", body, 1) != expected
    assert cache_key("http://other/v1", body, 0) != expected
    assert cache_key("http://h/v1", {**body, "temperature": 0.8}, 0) != expected
    assert cache_key("http://h/v1", {**body, "messages": [{"role": "user", "content": "hello"}]}, 0) != expected


def test_cache_store_roundtrip_wal_and_persistence(tmp_path):
    path = tmp_path / "sub" / "llm.sqlite"
    cache = Cache(path)
    cache.put("k1", CachedReply("text one", "stop", 5, 2, "m"))
    cache.put("k2", CachedReply("text two", "stop", 6, 3, "m"))
    cache.flush()
    assert cache.get("k1") == CachedReply("text one", "stop", 5, 2, "m")
    assert set(cache.get_many(["k1", "k2", "nope"])) == {"k1", "k2"}
    cache.close()
    reopened = Cache(path)
    assert len(reopened) == 2 and reopened.get("k2").text == "text two"
    reopened.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_cache_in_unwritable_place_is_a_clear_error(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(GenError, match="cannot open the LLM cache"):
        Cache(blocker / "llm.sqlite")


# -- structured output -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"a": 1}', {"a": 1}),
        ("  [1, 2] ", [1, 2]),
        ('Here you go:\n```json\n{"a": [1, {"b": "}"}]}\n```\nDone.', {"a": [1, {"b": "}"}]}),
        ('Sure! {"a": "x"} and then {"b": 2}', {"a": "x"}),
        ('noise { not json } then {"ok": true}', {"ok": True}),
    ],
)
def test_extract_json(text, expected):
    assert extract_json(text) == expected


def test_extract_json_failure():
    with pytest.raises(ParseFailure, match="no valid JSON"):
        extract_json('{"a": "unterminated')


def test_parse_reply_with_model_function_and_none():
    assert parse_reply(Item, 'Result: {"name": "x", "count": 2}') == Item(name="x", count=2)
    with pytest.raises(ParseFailure, match="count"):
        parse_reply(Item, '{"name": "x"}')
    assert parse_reply(None, "raw") == "raw"

    def upper_word(text: str) -> str:
        if " " in text.strip():
            raise ValueError("expected a single word")
        return text.strip().upper()

    assert parse_reply(upper_word, " hi ") == "HI"
    with pytest.raises(ParseFailure, match="single word"):
        parse_reply(upper_word, "two words")
    with pytest.raises(ParseFailure, match="KeyError"):
        parse_reply(lambda text: {}["missing"], "x")


def test_response_format_per_endpoint_mode():
    schema_format = response_format_for(Item, "json_schema")
    assert schema_format["type"] == "json_schema"
    assert schema_format["json_schema"]["name"] == "Item"
    assert schema_format["json_schema"]["schema"] == Item.model_json_schema()
    assert response_format_for(Item, "json_object") == {"type": "json_object"}
    assert response_format_for(Item, "off") is None
    assert response_format_for(None, "json_schema") is None
    assert response_format_for(lambda t: t, "json_schema") is None


def test_correction_message_comes_from_the_template():
    text = correction_message(Item, "JSON does not match the schema: count: Field required")
    assert "count: Field required" in text
    assert '"count"' in text and "only the corrected JSON" in text
    plain = correction_message(None, "expected a single word")
    assert "expected a single word" in plain and "schema" not in plain


def test_a_recipe_templates_dir_shadows_the_correction_prompt(tmp_path):
    (tmp_path / "llm").mkdir()
    (tmp_path / "llm" / "correction.j2").write_text("Try again: {{ error }}")
    assert correction_message(None, "one word only", Templates.of(tmp_path)) == "Try again: one word only"
    assert correction_message(None, "one word only") != "Try again: one word only"


def test_split_messages_and_token_estimate():
    text = "<<system>>\nYou are terse.\n<<user>>\nSay hi.\n"
    assert split_messages(text) == [
        {"role": "system", "content": "You are terse."},
        {"role": "user", "content": "Say hi."},
    ]
    assert split_messages("Just a question?") == [{"role": "user", "content": "Just a question?"}]
    with pytest.raises(GenError):
        split_messages("stray\n<<user>>\nx")
    # a tag is a role line only alone on its line (trailing blanks allowed); anywhere else it is text
    text = "<<system>>  \nSay <<user>> here.\nx <<assistant>>\n<<<user>>\n<<user>>\t\nHi <<developer>>"
    assert split_messages(text) == [
        {"role": "system", "content": "Say <<user>> here.\nx <<assistant>>\n<<<user>>"},
        {"role": "user", "content": "Hi <<developer>>"},
    ]
    messages = [{"role": "system", "content": "a" * 8}, {"role": "user", "content": "b" * 9}]
    assert estimate_input_tokens(messages) == (2 + 4) + (3 + 4) + 3


# -- limiter ---------------------------------------------------------------------------------------------
def test_retry_after_forms():
    assert retry_after_seconds({"retry-after-ms": "250"}) == 0.25
    assert retry_after_seconds({"retry-after": "3"}) == 3.0
    assert retry_after_seconds({"retry-after-ms": "100", "retry-after": "9"}) == 0.1
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert 28 <= retry_after_seconds({"retry-after": date}, now=now) <= 31
    assert retry_after_seconds({"retry-after": "soon"}) is None
    assert retry_after_seconds({}) is None


def test_backoff_grows_exponentially_with_jitter_and_a_cap():
    import random

    rng = random.Random(1)
    for attempt in range(8):
        ceiling = min(4.0, 0.5 * 2**attempt)
        for _ in range(50):
            assert ceiling / 2 <= backoff_delay(attempt, 0.5, 4.0, rng) <= ceiling


def test_slots_halve_on_rate_limit_and_recover():
    slots = Slots(8)
    slots.on_rate_limited()
    assert slots.limit == 4
    slots.on_rate_limited()  # within the same second: once only
    assert slots.limit == 4
    for _ in range(200):
        slots.on_success()
    assert slots.limit == 8


def test_waiting_requests_get_free_slots_by_priority_then_in_order_of_arrival():
    import asyncio

    from gen.llm.calls.limiter import PRIORITY

    order: list[str] = []

    async def request(slots: Slots, name: str, rank: int, hold: asyncio.Event) -> None:
        PRIORITY.set(rank)  # (each task has its own copy of the context)
        async with slots:
            order.append(name)
            await hold.wait()

    async def scenario() -> None:
        slots, hold, release = Slots(1), asyncio.Event(), asyncio.Event()
        first = asyncio.create_task(request(slots, "holder", 0, hold))
        await asyncio.sleep(0)  # the holder has the only slot
        waiting = [("newer batch a", 7), ("older batch a", 3), ("newer batch b", 7), ("older batch b", 3)]
        tasks = [asyncio.create_task(request(slots, name, rank, release)) for name, rank in waiting]
        await asyncio.sleep(0)  # every one of them waits, in this order of arrival
        hold.set()
        release.set()  # each hands its slot on as soon as it has it
        await asyncio.gather(first, *tasks)

    asyncio.run(scenario())
    assert order == ["holder", "older batch a", "older batch b", "newer batch a", "newer batch b"]


def test_token_bucket_paces_by_its_rate(monkeypatch):
    import asyncio

    clock = [1000.0]
    monkeypatch.setattr("gen.llm.calls.limiter.time.monotonic", lambda: clock[0])
    slept = []

    async def fake_sleep(seconds):
        slept.append(seconds)
        clock[0] += seconds

    monkeypatch.setattr("gen.llm.calls.limiter.asyncio.sleep", fake_sleep)

    async def scenario():
        bucket = TokenBucket(per_minute=120)  # 2 per second, burst 2
        for _ in range(6):
            await bucket.acquire(1)

    asyncio.run(scenario())
    assert sum(slept) == pytest.approx(2.0)  # 6 requests at 2/s with a burst of 2: 4 more need 2 seconds


def test_a_failing_cache_write_is_a_clear_error_on_the_next_put_or_flush(tmp_path):
    cache = Cache(tmp_path / "llm.sqlite")
    cache.put("bad", CachedReply(None, "stop", 1, 1, "m"))  # violates NOT NULL, as a full disk would fail a write
    with pytest.raises(GenError, match="cannot write the LLM cache"):
        cache.flush()
    with pytest.raises(GenError, match="cannot write the LLM cache"):
        cache.put("next", CachedReply("ok", "stop", 1, 1, "m"))


# -- package layout -----------------------------------------------------------------------------------------
def test_importing_the_config_loads_neither_the_engine_nor_openai():
    import subprocess
    import sys
    from pathlib import Path

    code = (
        "import gen.llm.config, sys; "
        "assert 'gen.llm.engine' not in sys.modules and 'openai' not in sys.modules, "
        "sorted(m for m in sys.modules if m.startswith(('gen.llm', 'openai')))"
    )
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_package_names_resolve_lazily_to_their_modules():
    import gen.llm
    import gen.llm.calls.request
    import gen.llm.engine

    assert gen.llm.Engine is gen.llm.engine.Engine
    assert gen.llm.build_request is gen.llm.calls.request.build_request
    assert set(gen.llm.__all__) <= set(dir(gen.llm))
    with pytest.raises(AttributeError, match="no attribute 'Engin'"):
        gen.llm.Engin  # noqa: B018 - the lookup itself is under test


# -- request policy and key scrubbing ------------------------------------------------------------------------
def test_retry_policy_retries_server_trouble_but_not_a_wrong_request():
    from gen.llm.calls.request import Failure, RetryPolicy

    policy = RetryPolicy()
    retried = [
        "timeout",
        "connection_error",
        "invalid_response",
        "rate_limited",
        "http_500",
        "http_503",
        "http_408",
        "http_409",
    ]
    assert [kind for kind in retried if not policy.retryable(Failure(kind, ""))] == []
    assert [policy.retryable(Failure(kind, "")) for kind in ("http_400", "http_422")] == [False, False]
    assert [policy.pauses_endpoint(Failure(kind, "")) for kind in ("rate_limited", "http_503", "http_500")] == [
        True,
        True,
        False,
    ]
    assert policy.delay(Failure("rate_limited", "", retry_after=500.0), 0) >= 120.0  # capped, then jittered
    assert policy.delay(Failure("rate_limited", "", retry_after=500.0), 0) <= 132.0


def test_key_scrubber_replaces_known_keys_and_ignores_tiny_ones(monkeypatch):
    from gen.llm.calls.endpoint import KeyScrubber

    monkeypatch.setenv("GEN_TEST_SCRUB", "sk-abcdef123456")
    scrub = KeyScrubber()
    scrub.add_from_env("GEN_TEST_SCRUB")
    scrub.add_from_env("GEN_TEST_UNSET_VARIABLE")
    scrub.add("ab")  # too short to be a key: replacing it would garble ordinary text
    assert scrub("key sk-abcdef123456 in abc") == "key [redacted] in abc"


def test_a_step_freezes_the_heap_it_found_and_restores_the_collector_after():
    import gc

    from gen.llm.engine.workers import YOUNG_THRESHOLD, LoopThread, frozen_heap

    class Node:  # a reference cycle: only the cyclic collector can free it
        def __init__(self) -> None:
            self.me = self

    before_threshold = gc.get_threshold()
    gc.collect()
    assert gc.get_freeze_count() == 0
    alive = [object() for _ in range(100)]
    seen = {}

    async def inside() -> None:  # what the loop thread sees while a step runs
        seen["frozen"] = gc.get_freeze_count()
        seen["threshold"] = gc.get_threshold()
        Node()  # garbage made during the step is still collected then
        seen["collected"] = gc.collect()

    loop = LoopThread()
    try:
        loop.run(inside())
    finally:
        loop.close()
    assert seen["frozen"] >= len(alive)  # every object alive at the start, these included
    assert seen["threshold"] == (max(before_threshold[0], YOUNG_THRESHOLD), *before_threshold[1:])
    assert seen["collected"] >= 1
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before_threshold

    gc.freeze()  # someone else's freeze is left as it is, thresholds too
    try:
        frozen = gc.get_freeze_count()
        with frozen_heap():
            assert gc.get_freeze_count() == frozen and gc.get_threshold() == before_threshold
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()
    gc.disable()
    gc.set_threshold(0)  # collection switched off stays off
    try:
        with frozen_heap():
            assert gc.get_threshold()[0] == 0
    finally:
        gc.set_threshold(*before_threshold)
        gc.enable()


@pytest.mark.parametrize(
    "reply",
    [
        "[" * 200_000,  # deeper than any parser recurses
        '{"a":' * 50_000,
        "x" * 2_000_000,  # past the size limit
        "{" * 100_000 + " text " + "[" * 100_000,  # many places a value could start: only the first few are tried
        '{"facts": ["\x00", "\udcff"]}',  # a NUL and a lone surrogate inside strings: parsed as text
    ],
    ids=["deep list", "deep object", "2 MB", "many starts", "NUL"],
)
def test_a_hostile_reply_is_a_parse_failure_or_a_value_never_a_crash(reply):
    try:
        value = extract_json(reply)
    except ParseFailure as failure:
        assert str(failure)
    else:
        assert value == {"facts": ["\x00", "\udcff"]}


def test_a_reject_reason_quoting_a_signed_url_is_written_without_its_secret():
    from gen.llm.accounts.counts import reject_record
    from gen.llm.task import Outcome, Task

    task = Task(item_id="i", endpoint="main", messages="hi")
    reason = "request failed: 403 from https://u:pw@files.example.org/x?sig=s3cret"
    record = reject_record("step", Outcome(task, ok=False, text="raw", reason=reason, kind="request_failed"))
    assert record["reason"] == "request failed: 403 from https://***@files.example.org/x?***"
    assert record["raw_text"] == "raw"


def test_step_seconds_count_the_time_any_step_of_the_name_ran_once():
    from gen.llm.accounts.lanes import covered_seconds

    # two batches' steps overlapping from 1 to 2, then a gap, then a third: 3 + 1 seconds
    assert covered_seconds([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)]) == 4.0
    assert covered_seconds([(1.0, 3.0), (0.0, 2.0), (1.5, 2.5)]) == 3.0  # any order; one inside another
    assert covered_seconds([]) == 0.0


def test_overlapping_steps_share_one_freeze_undone_when_the_last_ends():
    import gc

    from gen.llm.engine.workers import YOUNG_THRESHOLD, frozen_heap

    before = gc.get_threshold()
    gc.collect()
    first, second = frozen_heap(), frozen_heap()
    first.__enter__()
    frozen = gc.get_freeze_count()
    second.__enter__()  # a second batch's step starts while the first runs: nothing more is frozen
    assert gc.get_freeze_count() == frozen > 0
    first.__exit__(None, None, None)  # the first ends: the second still runs with the heap frozen
    assert gc.get_freeze_count() == frozen and gc.get_threshold()[0] == max(before[0], YOUNG_THRESHOLD)
    second.__exit__(None, None, None)
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == before


def test_live_bars_of_steps_running_at_once_share_one_display_until_the_last_ends():
    from gen.llm.accounts.progress import LiveReporter, StepCounters
    from gen.progress import _Display

    older, newer = LiveReporter(), LiveReporter()
    older.start(StepCounters("batch 0", 10))
    newer.start(StepCounters("batch 1", 10))  # a second live display would fight the first for the terminal
    assert older._progress is newer._progress and len(older._progress.tasks) == 2
    older.stop("batch 0 done")
    assert _Display.progress is newer._progress  # still showing the step that runs
    newer.stop("batch 1 done")
    assert _Display.progress is None
