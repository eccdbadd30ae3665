"""Hostile replies (issue 39): requests go only where the recipe says, and whatever a server sends back ends as a
record or as a reject with its reason, never as a stop, a traceback or a reply the cache cannot keep.

Every test sends through the real openai client (gen/llm/calls/clients.py) to servers on 127.0.0.1: the fake OpenAI
server for scripted bodies, and a raw one below for bytes no well-behaved server would frame."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import sqlite3
import threading
import zlib
from collections.abc import Callable

import httpx2
import openai
import pytest

from gen.errors import GenError, Stopped
from gen.llm import Engine, RunSettings, Task
from gen.llm.cache.store import Cache, CachedReply
from gen.llm.calls import transport as transport_module
from gen.llm.calls.clients import RedirectRefused, openai_client
from gen.llm.calls.request import RetryPolicy
from tests.conftest import REPO, run_cli, write_recipe
from tests.fakes.openai_server import FakeOpenAI, Reply, tcq_question

PROMPT = "say hi"  # 7 characters: ceil(7/4) + 4 + 3 = 9 tokens by gen's estimate (4 characters a token, 4 a
ESTIMATED_INPUT = 9  # message, 3 for the reply); "hi" is 1 output token by the same rule
CHOSEN = {"id": "x", "object": "chat.completion", "model": "m"}


def completion(content: object = "hi", **fields: object) -> dict:
    """A chat completion body with `content`; `fields` replace its top-level fields (usage, choices...)."""
    body = {
        **CHOSEN,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4},
    }
    return {**body, **fields}


def engine(base_url: str, cache_dir, **endpoint) -> Engine:
    config = {"model": "m", "base_url": base_url, "api_key_env": None, "structured_output": "off", "max_retries": 1}
    config.update(endpoint)
    fast = RetryPolicy(backoff_base_s=0.005, backoff_cap_s=0.02)
    return Engine({"main": config}, RunSettings(cache_dir=cache_dir, progress="off"), retry=fast)


def ask(base_url: str, cache_dir, task: Task | None = None, **endpoint):
    """(outcome, the step's report) of one task sent to `base_url`; rejects do not stop the step."""
    with engine(base_url, cache_dir, **endpoint) as eng:
        outcome = eng.run_step("s", [task or Task("item", "main", PROMPT)], max_reject_rate=None)[0]
        return outcome, eng.report()


class RawServer:
    """HTTP/1.1 on 127.0.0.1 in its own thread: the n-th request gets `reply(n)`'s bytes (then the connection
    closes), or, when it returns None, nothing at all until the server stops."""

    def __init__(self, reply: Callable[[int], bytes | None]) -> None:
        self.reply, self.count = reply, 0
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        self.ready.wait(10)
        return f"http://127.0.0.1:{self.port}/v1"

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(10)

    def _run(self) -> None:
        self.loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self.stop = asyncio.Event()
        server = await asyncio.start_server(self._answer, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self.ready.set()
        await self.stop.wait()
        server.close()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        lengths = [int(line[15:]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length:")]
        length = lengths[0] if lengths else 0
        await reader.readexactly(length)
        index, self.count = self.count, self.count + 1
        data = self.reply(index)
        if data is None:
            await self.stop.wait()
        else:
            writer.write(data)
            await writer.drain()
        writer.close()


# -- 1. redirects -------------------------------------------------------------------------------------------
@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_redirect_is_never_followed_and_stops_the_run_naming_where_it_pointed(status, cache_dir):
    with FakeOpenAI(lambda request: completion()) as elsewhere:
        port = elsewhere.base_url.split(":")[2].split("/")[0]
        target = f"http://127.0.0.1:{port}/v1/chat/completions?token=secret"
        with FakeOpenAI(lambda request: Reply(status=status, headers={"location": target}, raw_body=b"")) as server:
            with pytest.raises(Stopped) as stop:
                ask(server.base_url, cache_dir)
            asked = server.count
        received = elsewhere.count

    assert received == 0 and asked == 1  # never followed, never retried
    message = str(stop.value)
    assert f"llm endpoint 'main' ({server.base_url})" in message  # the endpoint
    assert f"a redirect to http://127.0.0.1:{port};" in message and "secret" not in message  # where, no token
    assert stop.value.field == "base_url" and stop.value.exit_code == 2


def test_no_client_gen_makes_follows_a_redirect_on_any_path():
    """The Batch API's calls go through openai's aiohttp transport, not gen's: refused there too, even when the
    request itself asks the client to follow redirects."""

    async def go(base_url: str) -> list[BaseException]:
        errors = []
        async with openai_client(base_url, "sk-test", connections=2, timeout=5) as client:
            for call in (
                client.files.list(),
                client.get("/models", cast_to=httpx2.Response, options={"follow_redirects": True}),
                client.post("/chat/completions", body={"model": "m", "messages": []}, cast_to=httpx2.Response),
            ):
                try:
                    await call
                except Exception as exc:
                    errors.append(exc)
        return errors

    with FakeOpenAI() as elsewhere:
        moved = f"HTTP/1.1 302 Found\r\nLocation: {elsewhere.base_url}/files\r\nContent-Length: 0\r\n\r\n".encode()
        with RawServer(lambda index: moved) as url:
            errors = asyncio.run(go(url))
        assert elsewhere.count == 0 and not elsewhere.batch_api.files
    assert [type(error) for error in errors] == [RedirectRefused] * 3


# -- 2. sizes: decoded bytes, streamed ----------------------------------------------------------------------
BOMB = b"\0" * (8 << 20)  # 8 MB of zeros: about 8 KB of gzip


@pytest.mark.parametrize("encoding", ["gzip", "deflate"])
def test_a_compressed_reply_is_cut_off_once_it_decodes_past_the_limit(encoding, cache_dir, monkeypatch):
    monkeypatch.setattr(transport_module, "MAX_REPLY_BYTES", 1 << 20)  # 1 MB here, so the bomb stays small
    packed = gzip.compress(BOMB) if encoding == "gzip" else zlib.compress(BOMB)
    assert len(packed) < 64 << 10  # far under the limit as sent

    def script(request):
        if "bomb" in request.last_user:
            return Reply(raw_body=packed, headers={"content-encoding": encoding})
        return Reply(raw_body=json.dumps(completion()).encode())

    with FakeOpenAI(script) as server, engine(server.base_url, cache_dir) as eng:
        tasks = [Task("bomb", "main", "bomb"), Task("fine", "main", PROMPT)]
        bomb, fine = eng.run_step("s", tasks, max_reject_rate=None)
        asked = server.count

    assert fine.ok and fine.value == "hi"
    assert not bomb.ok and bomb.kind == "request_failed" and asked == 1 + 2  # retried once, then rejected
    assert f"longer than {1 << 20:,} bytes once decoded ({encoding})" in bomb.reason


def test_a_compressed_reply_on_openais_own_transport_is_cut_off_too(monkeypatch):
    monkeypatch.setattr(transport_module, "MAX_REPLY_BYTES", 1 << 20)
    packed = gzip.compress(BOMB)
    reply = b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: %d\r\n\r\n" % len(packed) + packed

    async def go(base_url: str) -> BaseException:
        async with openai_client(base_url, "sk-test", connections=1, timeout=5) as client:
            with pytest.raises(openai.APIConnectionError) as caught:
                await client.get("/batches/b1", cast_to=httpx2.Response)  # (not a completion: aiohttp's transport)
            return caught.value

    with RawServer(lambda index: reply) as url:
        error = asyncio.run(go(url))
    assert isinstance(error.__cause__, transport_module.ReplyTooLong)


@pytest.mark.parametrize(
    "reply",
    [
        b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 99999999\r\n\r\n{"choices"',
        b'HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n{"choices": [{"m',  # never ends
        None,  # no reply at all
    ],
    ids=["content-length past the body", "chunked without its end", "silence"],
)
def test_a_reply_cut_short_or_never_finished_is_retried_then_rejected(reply, cache_dir):
    with RawServer(lambda index: reply) as url:
        outcome, report = ask(url, cache_dir, timeout_s=1)
    assert not outcome.ok and outcome.kind == "request_failed" and "given up after 2 attempts" in outcome.reason
    assert sum(report["steps"]["s"]["errors"].values()) == 2


# -- 3. numbers from the server ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "usage",
    [
        '{"prompt_tokens": -5, "completion_tokens": 1}',
        '{"prompt_tokens": 1e400, "completion_tokens": 1}',  # json reads it as inf
        '{"prompt_tokens": 3, "completion_tokens": NaN}',
        '{"prompt_tokens": 1180591620717411303424, "completion_tokens": 1}',  # 2**70
        '{"prompt_tokens": "12", "completion_tokens": 1}',
        '{"prompt_tokens": 12.0, "completion_tokens": 1}',
        '{"prompt_tokens": true, "completion_tokens": 1}',
        '{"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": -Infinity}',
        '{"prompt_tokens": 3, "completion_tokens": 1, "prompt_tokens_details": {"cached_tokens": -1}}',
        '"lots"',
    ],
)
def test_usage_that_is_not_a_token_count_is_set_aside_and_the_tokens_estimated(usage, cache_dir, caplog):
    body = json.dumps(completion(usage=None)).replace('"usage": null', f'"usage": {usage}').encode()
    with FakeOpenAI(lambda request: Reply(raw_body=body)) as server:
        outcome, report = ask(server.base_url, cache_dir)
    steps = report["steps"]["s"]
    assert outcome.ok and outcome.value == "hi"
    assert (steps["input_tokens"], steps["output_tokens"], steps["usage_estimated_calls"]) == (ESTIMATED_INPUT, 1, 1)
    json.dumps(report, allow_nan=False)  # run.json holds no Infinity or NaN
    assert "usage is not a token count" in caplog.text


def test_sound_usage_is_taken_as_the_server_gives_it(cache_dir):
    body = json.dumps(completion(usage={"prompt_tokens": 2**53, "completion_tokens": 0})).encode()
    with FakeOpenAI(lambda request: Reply(raw_body=body)) as server:
        _, report = ask(server.base_url, cache_dir)
    steps = report["steps"]["s"]
    assert (steps["input_tokens"], steps["output_tokens"], steps["usage_estimated_calls"]) == (2**53, 0, 0)


LOGPROB_TASK = Task("item", "main", PROMPT, logprobs=2)


def logprob_reply(value: str) -> bytes:
    entry = '{"token": "hi", "logprob": VALUE, "top_logprobs": [{"token": "hi", "logprob": -0.1}]}'.replace(
        "VALUE", value
    )
    body = json.dumps(completion()).replace('"finish_reason": "stop"', '"finish_reason": "stop", "logprobs": LP')
    return body.replace("LP", '{"content": [' + entry + "]}").encode()


@pytest.mark.parametrize("value", ["1e400", "NaN", '"-0.5"', "5.0", "null"])
def test_logprobs_that_are_not_log_probabilities_reject_the_reply_with_the_reason(value, cache_dir):
    with FakeOpenAI(lambda request: Reply(raw_body=logprob_reply(value))) as server:
        outcome, report = ask(server.base_url, cache_dir, LOGPROB_TASK)
    assert not outcome.ok and outcome.kind == "request_failed"
    assert "invalid_response: the reply's logprobs.content[0].logprob is" in outcome.reason
    assert report["steps"]["s"]["errors"] == {"invalid_response": 2}


def test_logprobs_are_kept_when_asked_for_and_dropped_when_not(cache_dir):
    with FakeOpenAI(lambda request: Reply(raw_body=logprob_reply("-0.25"))) as server:
        asked, _ = ask(server.base_url, cache_dir / "a", LOGPROB_TASK)
        unasked, _ = ask(server.base_url, cache_dir / "b")
    assert asked.logprobs["content"][0]["logprob"] == -0.25 and unasked.ok and unasked.logprobs is None


# -- 4. any bytes end as a record or a reject ----------------------------------------------------------------
def raw(body: dict) -> bytes:
    return json.dumps(body).encode()


@pytest.mark.parametrize(
    ("body", "value", "reason"),
    [
        (b"\xef\xbb\xbf" + raw(completion()), "hi", None),  # a byte order mark
        (raw(completion("a\u0000b")), "a\u0000b", None),  # NUL
        (raw(completion("x\ud800y")), "x\ufffdy", None),  # a lone surrogate (JSON's escape \ud800)
        (raw(completion("\udfff")), "\ufffd", None),
        (b'{"choices": [{"message": {"content": "caf\xe9"}}]}', None, "the reply is not UTF-8 text (byte 0xe9"),
        (b"", None, "the reply is not JSON"),
        (b"[" * 100_000 + b"]" * 100_000, None, "the reply is not JSON gen can read (RecursionError)"),
        (b'{"n": 1' + b"9" * 5000 + b"}", None, "the reply is not JSON gen can read (ValueError)"),  # 5001 digits
        (raw(completion(choices=[])), None, "the reply has no choices (choices: [])"),
        (raw(completion(choices=None)), None, "the reply has no choices (choices: null)"),
        (raw(completion(choices=["x"])), None, "the reply's first choice is a string, not an object"),
        (raw(completion(choices=[{"message": "x"}])), None, "the reply's message is a string, not an object"),
        (raw(completion(5)), None, "the reply's content is a number, not a string"),
        (raw(completion(["a"])), None, "the reply's content is an array, not a string"),
        (
            raw(completion(choices=[{"message": {"content": "x"}, "finish_reason": {}}])),
            None,
            "finish_reason is an object",
        ),
        (raw([completion()]), None, "the reply's JSON is an array, not an object"),
        (b"null", None, "the reply's JSON is null, not an object"),
    ],
    ids=lambda value: None if not isinstance(value, bytes) else value[:24].decode("latin-1"),
)
def test_whatever_a_reply_holds_it_ends_as_a_record_or_a_reject_with_the_reason(body, value, reason, cache_dir):
    with FakeOpenAI(lambda request: Reply(raw_body=body)) as server:
        outcome, report = ask(server.base_url, cache_dir)
    if reason is None:
        assert outcome.ok and outcome.value == value
    else:
        assert not outcome.ok and outcome.kind == "request_failed"
        assert "last error: invalid_response: " in outcome.reason and reason in outcome.reason
    json.dumps(report, allow_nan=False)


@pytest.mark.parametrize("content", [None, ""])
def test_a_reply_without_text_is_rejected_as_empty(content, cache_dir):
    with FakeOpenAI(lambda request: Reply(raw_body=raw(completion(content)))) as server:
        outcome, _ = ask(server.base_url, cache_dir)
    if content is None:
        assert not outcome.ok and outcome.kind == "empty" and outcome.reason == "the endpoint returned no text"
    else:
        assert outcome.ok and outcome.value == ""


def test_a_reply_with_a_lone_surrogate_is_cached_and_a_rerun_sends_nothing(cache_dir):
    body = raw(completion("caf\udce9 ok"))  # how Python's surrogateescape would spell a stray byte 0xe9
    with FakeOpenAI(lambda request: Reply(raw_body=body)) as server:
        first, _ = ask(server.base_url, cache_dir)
        sent = server.count
        again, report = ask(server.base_url, cache_dir)
        resent = server.count - sent
    assert first.ok and first.value == "caf\ufffd ok" and sent == 1
    assert again.ok and again.value == first.value and again.cached and resent == 0
    assert report["steps"]["s"]["calls_cached"] == 1


def test_the_cache_keeps_text_utf8_cannot_hold_exactly(cache_dir):
    odd = "\ud800 lone, \udfff too, and \x00"
    cache = Cache(cache_dir / "llm.sqlite")
    cache.put("k", CachedReply(odd, "st\udc80p", 1, 2, "m", {"content": [{"token": "\ud83d"}]}))
    cache.close()
    reopened = Cache(cache_dir / "llm.sqlite")
    kept = reopened.get("k")
    reopened.close()
    assert (kept.text, kept.finish_reason, kept.logprobs) == (odd, "st\udc80p", {"content": [{"token": "\ud83d"}]})


# -- 5. cache faults -----------------------------------------------------------------------------------------
def hold_write_lock(path) -> sqlite3.Connection:
    """Another process's view: a write transaction left open on the cache file."""
    other = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    other.execute("BEGIN IMMEDIATE")
    other.execute("INSERT INTO replies (key, text) VALUES ('someone-else', 'x')")
    return other


def test_a_lock_released_within_the_wait_costs_nothing(cache_dir, monkeypatch):
    monkeypatch.setattr("gen.llm.cache.file.LOCK_WAIT_S", 10.0)
    Cache(cache_dir / "llm.sqlite").close()
    other = hold_write_lock(cache_dir / "llm.sqlite")
    threading.Timer(0.5, lambda: other.execute("COMMIT")).start()
    with FakeOpenAI(lambda request: completion()) as server:
        outcome, _ = ask(server.base_url, cache_dir)
        again, _ = ask(server.base_url, cache_dir)
        asked = server.count
    other.close()
    assert outcome.ok and again.ok and again.cached and asked == 1


def test_a_lock_held_past_the_wait_is_one_message_naming_the_file(cache_dir, monkeypatch):
    monkeypatch.setattr("gen.llm.cache.file.LOCK_WAIT_S", 0.5)
    path = cache_dir / "llm.sqlite"
    Cache(path).close()
    other = hold_write_lock(path)
    try:
        with FakeOpenAI(lambda request: completion()) as server, pytest.raises(GenError) as error:
            ask(server.base_url, cache_dir)
    finally:
        other.close()
    assert error.value.file == str(path)
    assert error.value.message.startswith("the LLM cache file is locked by another process (waited 0.5s")
    assert "damaged" not in str(error.value)


@pytest.mark.parametrize("kind", ["folder", "text file", "fifo"])
def test_a_cache_path_that_is_no_sqlite_file_is_named_as_such(kind, cache_dir):
    path = cache_dir / "llm.sqlite"
    cache_dir.mkdir()
    if kind == "folder":
        path.mkdir()
    elif kind == "text file":
        path.write_text("these are my notes\n")
    else:
        os.mkfifo(path)
    with pytest.raises(GenError) as error:
        Cache(path)
    expected = {
        "folder": "the LLM cache path is a folder, not a SQLite file",
        "text file": "the LLM cache file is not a SQLite file (it begins b'these ar')",
        "fifo": "the LLM cache path is not a regular file (a FIFO, a socket or a device)",
    }[kind]
    assert (error.value.message, error.value.file) == (expected, str(path))


# -- through the CLI -----------------------------------------------------------------------------------------
def tcq_recipe(path, base_url: str):
    """log + two time_content_questions over the bundled sample, against `base_url`."""
    return write_recipe(
        path,
        {
            "name": "hostile",
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(REPO / "gen" / "data" / "sample_locomo.json")}],
            "timeline": {"padding": {"mode": "donor", "target_words": 800}},
            "llm": {"main": {"model": "m", "base_url": base_url, "api_key_env": None, "structured_output": "off"}},
            "products": [{"type": "log"}, {"type": "time_content_questions", "per_conversation": 1}],
        },
    )


def test_gen_run_refuses_a_redirect_with_one_message(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GEN_CACHE_DIR", str(tmp_path / "cache"))
    with FakeOpenAI(tcq_question) as elsewhere:
        moved = {"location": f"{elsewhere.base_url}/chat/completions"}
        with FakeOpenAI(lambda request: Reply(status=308, headers=moved, raw_body=b"")) as server:
            recipe = tcq_recipe(tmp_path / "r.yaml", server.base_url)
            code, _, err = run_cli(["run", recipe, "--output-dir", tmp_path / "out"], capsys)
        assert elsewhere.count == 0
    port = elsewhere.base_url.split(":")[2].split("/")[0]
    assert code == 2 and "Traceback" not in err
    assert "llm endpoint 'main'" in err and f"HTTP 308, a redirect to http://127.0.0.1:{port};" in err


def test_gen_run_names_a_cache_locked_past_the_wait(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr("gen.llm.cache.file.LOCK_WAIT_S", 0.5)
    path = tmp_path / "cache" / "llm.sqlite"
    Cache(path).close()
    other = hold_write_lock(path)
    try:
        with FakeOpenAI(tcq_question) as server:
            recipe = tcq_recipe(tmp_path / "r.yaml", server.base_url)
            code, _, err = run_cli(["run", recipe, "--output-dir", tmp_path / "out"], capsys)
    finally:
        other.close()
    assert code == 2 and "Traceback" not in err
    assert f"{path}: the LLM cache file is locked by another process (waited 0.5s" in err


def test_gen_run_names_a_cache_path_that_is_a_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("GEN_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "cache" / "llm.sqlite").mkdir(parents=True)
    with FakeOpenAI(tcq_question) as server:
        recipe = tcq_recipe(tmp_path / "r.yaml", server.base_url)
        code, _, err = run_cli(["run", recipe, "--output-dir", tmp_path / "out"], capsys)
        assert server.count == 0
    assert code == 2 and "Traceback" not in err
    assert f"{tmp_path / 'cache' / 'llm.sqlite'}: the LLM cache path is a folder, not a SQLite file" in err
