"""A fake OpenAI-compatible server for tests: real HTTP on 127.0.0.1, scripted replies, injectable faults.

The real ``openai`` client (and therefore ``gen.llm``) talks to it over HTTP, so tests exercise the
whole stack without a network. Typical use::

    from tests.fakes.openai_server import FakeOpenAI, Reply, FaultMix

    def script(req):                      # called once per POST /v1/chat/completions
        if "summarize" in req.last_user:
            return {"summary": ["..."]}   # dict/list -> JSON text as the assistant content
        return "plain text answer"        # str -> the assistant content, finish_reason "stop"

    with FakeOpenAI(script, delay=0.0) as server:
        endpoint = {"model": "fake", "base_url": server.base_url}
        ...  # run code that calls the LLM
        assert server.count == 3          # chat requests received
        server.requests[0].messages       # what was sent, in arrival order

Pytest users can import the ``fake_openai`` fixture (``from tests.fakes.openai_server import fake_openai``
in a conftest.py) and set ``fake_openai.script = ...`` inside the test.

Script return values
    ``str``             assistant content, ``finish_reason="stop"``
    ``dict`` / ``list``  ``json.dumps(value)`` as the content
    ``Reply``           full control: status, headers, delay, finish_reason, usage, hang, raw body
    ``None``            the default reply (``"ok"``)

Faults (``Reply`` constructors): ``Reply.rate_limited(retry_after_s)`` (429 with ``retry-after-ms`` and
``Retry-After``), ``Reply.server_error()`` (500), ``Reply.slow(seconds)`` (answers after a delay, e.g. past the
client's timeout), ``Reply.malformed()`` (content that is not JSON), ``Reply.truncated(text)``
(``finish_reason="length"``), ``Reply.error(status, message)``, ``Reply(hang=True)`` (never answers until the
server stops). ``FaultMix(script, rate_limit=0.2, ...)`` wraps a script and injects faults at given rates,
decided deterministically from (request body, attempt number, seed) so a test is repeatable regardless of
timing. ``FormatGate(script, accepts=("text", "json_object"))`` wraps a script and refuses every other
``response_format`` type the way llama-cpp-python's server does (HTTP 500 whose message is the request's
validation error, see :func:`llama_cpp_refusal`).

Usage fields: ``prompt_tokens`` = whitespace-separated words over all message contents, ``completion_tokens``
= words of the reply content (override with ``Reply(usage={...})``).

Each request is recorded (``server.requests``: arrival index, body hash ``key``, ``attempt`` = how many
earlier requests had the identical body, status, finish_reason, injected ``fault``, ``delivered`` = the full
reply was written to a live connection). The ``Authorization`` header is not kept in the log; the bearer
token the client sent is available as ``request.api_key`` for tests that check key handling.

The server runs its own asyncio loop in a daemon thread and stops (cancelling slow and hanging replies) when
the ``with`` block ends. An exception raised by a script is answered with a 500 and re-raised when the
``with`` block exits, so a broken script fails the test loudly.

Run standalone (used by bench/bench_llm.py so the server's CPU is not the client's)::

    python tests/fakes/openai_server.py --delay 0.05      # prints the base_url, serves until stdin closes
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "FakeOpenAI",
    "FakeRequest",
    "FaultMix",
    "FormatGate",
    "Reply",
    "body_key",
    "count_words",
    "fake_openai",
    "llama_cpp_refusal",
]


def count_words(text: str | None) -> int:
    return len((text or "").split())


def _canonical(obj: Any) -> str:
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def body_key(body: dict) -> str:
    """The ``key`` the server gives a request body (sha256 of its canonical JSON): lets a test predict
    which faults a ``FaultMix`` injects for a given request and attempt."""
    return hashlib.sha256(_canonical(body).encode()).hexdigest()


@dataclass
class FakeRequest:
    """One chat-completions request as the script sees it (and as it is kept in ``server.requests``)."""

    index: int
    body: dict
    headers: dict[str, str]
    key: str
    attempt: int
    api_key: str | None = None
    # filled in once the reply is decided / sent
    status: int | None = None
    finish_reason: str | None = None
    content: str | None = None
    fault: str | None = None
    delivered: bool = False
    started: float = 0.0
    finished: float | None = None

    @property
    def model(self) -> str:
        return self.body.get("model", "")

    @property
    def messages(self) -> list[dict]:
        return self.body.get("messages", [])

    @property
    def last_user(self) -> str:
        """The last user message (a /completions request's prompt)."""
        if "prompt" in self.body:
            return str(self.body["prompt"])
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return _text(message.get("content"))
        return ""

    @property
    def system(self) -> str | None:
        for message in self.messages:
            if message.get("role") in ("system", "developer"):
                return _text(message.get("content"))
        return None

    @property
    def response_format(self) -> dict | None:
        return self.body.get("response_format")

    @property
    def is_correction(self) -> bool:
        """True when the conversation already holds an assistant turn (e.g. a correction round)."""
        return any(message.get("role") == "assistant" for message in self.messages)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return " ".join(part.get("text", "") for part in content if isinstance(part, dict))
    return ""


@dataclass
class Reply:
    """A scripted reply. Defaults: 200, ``finish_reason="stop"``, the server's default delay."""

    content: str | None = "ok"
    finish_reason: str = "stop"
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float | None = None
    hang: bool = False
    error_message: str | None = None
    usage: dict | None = None
    raw_body: bytes | None = None
    fault: str | None = None
    error_type: str | None = None  # the error body's "type" (default: by status)
    logprobs: Any = None  # the choice's logprobs object
    batch_error: str | None = None  # in a batch: an error line with this code instead of a response

    @classmethod
    def text(cls, content: str, **kw) -> Reply:
        return cls(content=content, **kw)

    @classmethod
    def json(cls, value: Any, **kw) -> Reply:
        return cls(content=json.dumps(value), **kw)

    @classmethod
    def rate_limited(cls, retry_after_s: float = 0.05, *, header: str = "both") -> Reply:
        """429. ``header``: "ms" (``retry-after-ms``), "s" (``Retry-After``, whole seconds), "both" or "none"."""
        headers = {}
        if header in ("ms", "both"):
            headers["retry-after-ms"] = str(int(retry_after_s * 1000))
        if header in ("s", "both"):
            headers["retry-after"] = str(max(0, round(retry_after_s)))
        return cls(status=429, headers=headers, error_message="Rate limit reached (fake)", fault="rate_limit")

    @classmethod
    def server_error(cls, status: int = 500) -> Reply:
        return cls(status=status, error_message="The server had an error (fake)", fault="server_error")

    @classmethod
    def error(cls, status: int, message: str = "error (fake)") -> Reply:
        return cls(status=status, error_message=message, fault=f"http_{status}")

    @classmethod
    def request_timeout(cls) -> Reply:
        """The model call timed out: online a 408; in a batch, the error line the Batch API writes for it
        (``"response": null, "error": {"code": "request_timeout"}``)."""
        return cls(
            status=408,
            error_message="The model did not answer in time (fake)",
            fault="timeout",
            batch_error="request_timeout",
        )

    @classmethod
    def slow(cls, seconds: float, content: str = "ok") -> Reply:
        return cls(content=content, delay=seconds, fault="slow")

    @classmethod
    def malformed(cls, content: str = '{"answer": "unterminated') -> Reply:
        return cls(content=content, fault="malformed")

    @classmethod
    def truncated(cls, content: str = '{"answer": "cut off mid-') -> Reply:
        return cls(content=content, finish_reason="length", fault="truncated")


Script = Callable[[FakeRequest], Any]


def _default_script(request: FakeRequest) -> str:
    return "ok"


FAULTS = ("rate_limit", "server_error", "timeout", "malformed", "truncated")  # in the order they are drawn


class FaultMix:
    """Wrap a script and inject faults at the given rates (fractions of requests, summing to <= 1).

    The fault for a request is a pure function of (seed, request body hash, attempt number), so the same
    test always sees the same faults, and a retried request (attempt + 1) draws again.
    ``timeout`` replies are delayed by ``timeout_delay`` seconds (set it above the client's timeout).
    ``malformed`` replaces the content with text that is not JSON; ``truncated`` cuts the content and sets
    ``finish_reason="length"``.
    """

    def __init__(
        self,
        script: Script | None = None,
        *,
        seed: int = 0,
        retry_after_s: float = 0.02,
        timeout_delay: float = 5.0,
        **rates: float,  # the share of requests answered with each fault: rate_limit, server_error, ...
    ) -> None:
        self.script = script or _default_script
        if unknown := set(rates) - set(FAULTS):
            raise TypeError(f"unknown faults: {sorted(unknown)}; known: {FAULTS}")
        self.rates = [(name, rates.get(name, 0.0)) for name in FAULTS]
        if sum(rate for _, rate in self.rates) > 1.0 + 1e-9:
            raise ValueError("fault rates sum to more than 1")
        self.seed = seed
        self.retry_after_s = retry_after_s
        self.timeout_delay = timeout_delay

    def fault_for(self, key: str, attempt: int) -> str | None:
        digest = hashlib.sha256(f"{self.seed}:{key}:{attempt}".encode()).digest()
        u = int.from_bytes(digest[:8], "big") / 2**64
        edge = 0.0
        for name, rate in self.rates:
            edge += rate
            if u < edge:
                return name
        return None

    def __call__(self, request: FakeRequest) -> Any:
        fault = self.fault_for(request.key, request.attempt)
        if fault == "rate_limit":
            return Reply.rate_limited(self.retry_after_s)
        if fault == "server_error":
            return Reply.server_error()
        base = _as_reply(self.script(request))
        if fault == "timeout":
            base.delay = self.timeout_delay
            base.fault = "timeout"
        elif fault == "malformed" and base.status == 200:
            base.content = "Sure! Here it is: {" + (base.content or "")[: max(1, len(base.content or "") // 2)]
            base.fault = "malformed"
        elif fault == "truncated" and base.status == 200:
            base.content = (base.content or "")[: max(1, len(base.content or "") // 2)]
            base.finish_reason = "length"
            base.fault = "truncated"
        return base


def _literal_choices(values: tuple[str, ...]) -> str:
    """How pydantic lists the values a Literal allows: 'a', 'a' or 'b', 'a', 'b' or 'c'."""
    quoted = [f"'{value}'" for value in values]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} or {quoted[-1]}"


def llama_cpp_refusal(sent: str, accepts: tuple[str, ...] = ("text", "json_object")) -> Reply:
    """The reply of llama-cpp-python's server (0.3.x) to a ``response_format.type`` it does not take.

    Its request model types ``response_format.type`` as ``Literal["text", "json_object"]``; FastAPI's
    validation error is caught by the server's catch-all route handler, which answers HTTP 500 with
    ``{"error": {"message": str(error), "type": "internal_server_error", "param": null, "code": null}}``, the
    message being FastAPI's rendering of pydantic's error list followed by the endpoint's location.
    """
    choices = _literal_choices(accepts)
    error = {
        "type": "literal_error",
        "loc": ("body", "response_format", "type"),
        "msg": f"Input should be {choices}",
        "input": sent,
        "ctx": {"expected": choices},
    }
    message = (
        f"1 validation error:\n  {error}\n\n"
        '  File "/usr/lib/python3/site-packages/llama_cpp/server/app.py", line 376, in create_chat_completion\n'
        "    POST /v1/chat/completions"
    )
    return Reply(status=500, error_message=message, error_type="internal_server_error", fault="format_refused")


class FormatGate:
    """Wrap a script; a request whose ``response_format.type`` is not in ``accepts`` gets
    :func:`llama_cpp_refusal` (default: llama.cpp's server, which takes ``text`` and ``json_object``, the
    latter optionally with a ``schema``). ``accepts=("text",)`` refuses JSON mode too."""

    def __init__(self, script: Script | None = None, accepts: tuple[str, ...] = ("text", "json_object")) -> None:
        self.script = script or _default_script
        self.accepts = accepts

    def __call__(self, request: FakeRequest) -> Any:
        sent = (request.response_format or {}).get("type")
        if sent is not None and sent not in self.accepts:
            return llama_cpp_refusal(sent, self.accepts)
        return self.script(request)


def _as_reply(value: Any) -> Reply:
    if value is None:
        return Reply()
    if isinstance(value, Reply):
        return value
    if isinstance(value, str):
        return Reply(content=value)
    if isinstance(value, (dict, list)):
        return Reply(content=json.dumps(value))
    raise TypeError(f"a fake-server script returned {type(value).__name__}; expected str, dict, list, Reply or None")


_REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    408: "Request Timeout",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
}


class FakeOpenAI:
    """The server. ``with FakeOpenAI(script, delay=0.0) as server: server.base_url``."""

    def __init__(
        self,
        script: Script | None = None,
        *,
        delay: float = 0.0,
        model_ids: tuple[str, ...] = ("fake-model",),
        port: int = 0,  # 0: any free port; a fixed one keeps base_url (and what hashes it) the same across runs
    ) -> None:
        self.script: Script = script or _default_script
        self.delay = delay
        self.model_ids = model_ids
        self.requests: list[FakeRequest] = []
        self.http_requests = 0  # every HTTP request, any path
        self.script_errors: list[BaseException] = []
        self.port: int | None = port or None
        self._wanted_port = port
        self._seen: dict[str, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._stop: asyncio.Event | None = None
        self._handlers: set[asyncio.Task] = set()
        self._start_error: BaseException | None = None
        self.batch_api = FakeBatchAPI(self)

    # -- public -------------------------------------------------------------------------------------
    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def count(self) -> int:
        """Chat-completion requests received (whatever their outcome)."""
        return len(self.requests)

    @property
    def ok_count(self) -> int:
        """200 replies fully written to a live connection."""
        return sum(1 for r in self.requests if r.delivered and r.status == 200)

    def delivered_keys(self) -> list[str]:
        """Body hashes of the 200 replies delivered, in order (a repeated key = a repeated successful call)."""
        return [r.key for r in self.requests if r.delivered and r.status == 200]

    def start(self) -> FakeOpenAI:
        self._thread = threading.Thread(target=self._run, name="fake-openai", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("fake OpenAI server did not start")
        if self._start_error:
            raise self._start_error
        return self

    def stop(self) -> None:
        if self._loop and self._stop and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._stop.set)
        if self._thread:
            self._thread.join(10)
            self._thread = None

    def __enter__(self) -> FakeOpenAI:
        return self.start()

    def __exit__(self, exc_type, exc, tb) -> None:
        self.stop()
        if exc_type is None and self.script_errors:
            raise AssertionError("the fake server's script raised") from self.script_errors[0]

    # -- server -------------------------------------------------------------------------------------
    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._serve())
        except BaseException as exc:  # pragma: no cover - surfaced through start()
            self._start_error = exc
            self._ready.set()
        finally:
            loop.close()

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(self._connection, "127.0.0.1", self._wanted_port, backlog=512)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        try:
            await self._stop.wait()
        finally:
            server.close()
            for task in list(self._handlers):
                task.cancel()
            if self._handlers:
                await asyncio.wait(list(self._handlers), timeout=5)
            await server.wait_closed()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._handlers.add(task)
        try:
            while True:
                try:
                    head = await reader.readuntil(b"\r\n\r\n")
                    arrived = time.monotonic()
                except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
                    break
                lines = head.decode("latin-1").split("\r\n")
                try:
                    method, target, version = lines[0].split(" ", 2)
                except ValueError:
                    break
                headers: dict[str, str] = {}
                for line in lines[1:]:
                    if line:
                        name, _, value = line.partition(":")
                        headers[name.strip().lower()] = value.strip()
                try:
                    if headers.get("transfer-encoding", "").lower() == "chunked":
                        body = await self._read_chunked(reader)
                    else:
                        length = int(headers.get("content-length") or 0)
                        body = await reader.readexactly(length) if length else b""
                except (asyncio.IncompleteReadError, ConnectionError, ValueError):
                    break
                self.http_requests += 1
                keep_open = await self._dispatch(
                    method, target.split("?", 1)[0], headers, body, reader, writer, arrived
                )
                if not keep_open or headers.get("connection", "").lower() == "close" or version != "HTTP/1.1":
                    break
        except asyncio.CancelledError:
            pass
        finally:
            self._handlers.discard(task)
            with contextlib.suppress(Exception):
                writer.close()

    @staticmethod
    async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
        chunks = []
        while True:
            size = int((await reader.readline()).split(b";")[0].strip() or b"0", 16)
            if size == 0:
                await reader.readline()
                return b"".join(chunks)
            chunks.append(await reader.readexactly(size))
            await reader.readline()

    async def _send(
        self,
        writer,
        reader,
        status: int,
        payload: bytes,
        headers: dict[str, str] | None = None,
        content_type: str = "application/json",
    ) -> bool:
        if writer.transport.is_closing() or reader.at_eof():
            return False
        head = [
            f"HTTP/1.1 {status} {_REASONS.get(status, 'Status')}",
            f"content-type: {content_type}",
            f"content-length: {len(payload)}",
            "x-request-id: req_fake",
        ]
        head += [f"{name}: {value}" for name, value in (headers or {}).items()]
        try:
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + payload)
            await writer.drain()
        except (ConnectionError, RuntimeError):
            return False
        return True

    def _record(self, request_body: dict, headers: dict[str, str], arrived: float) -> FakeRequest:
        key = body_key(request_body)
        attempt = self._seen.get(key, 0)
        self._seen[key] = attempt + 1
        auth = headers.get("authorization", "")
        safe_headers = {k: v for k, v in headers.items() if k not in ("authorization", "api-key")}
        request = FakeRequest(
            index=len(self.requests),
            body=request_body,
            headers=safe_headers,
            key=key,
            attempt=attempt,
            api_key=auth[7:] if auth.lower().startswith("bearer ") else None,
            started=arrived,
        )
        self.requests.append(request)
        return request

    def _scripted(self, request: FakeRequest) -> Reply:
        try:
            reply = _as_reply(self.script(request))
        except Exception as exc:  # reported at the end of the with-block
            self.script_errors.append(exc)
            reply = Reply(status=500, error_message=f"fake server script raised {type(exc).__name__}")
        request.status, request.fault = reply.status, reply.fault
        request.finish_reason = reply.finish_reason if reply.status == 200 else None
        request.content = reply.content if reply.status == 200 else None
        return reply

    async def _dispatch(self, method, path, headers, body, reader, writer, arrived: float) -> bool:
        if path.startswith("/v1/files") or path.startswith("/v1/batches"):
            status, payload, kind = self.batch_api.handle(method, path, headers, body)
            return await self._send(writer, reader, status, payload, content_type=kind)
        if method == "GET" and path.rstrip("/").endswith("/models"):
            data = [{"id": model, "object": "model", "created": 0, "owned_by": "fake"} for model in self.model_ids]
            return await self._send(writer, reader, 200, json.dumps({"object": "list", "data": data}).encode())
        completions = path.rstrip("/").endswith("/v1/completions")  # the legacy API: a prompt, not messages
        if method != "POST" or not (completions or path.rstrip("/").endswith("/chat/completions")):
            payload = json.dumps({"error": {"message": f"no route {method} {path}", "type": "not_found_error"}})
            return await self._send(writer, reader, 404, payload.encode())
        try:
            request_body = json.loads(body or b"{}")
        except json.JSONDecodeError:
            payload = json.dumps({"error": {"message": "request body is not JSON", "type": "invalid_request_error"}})
            return await self._send(writer, reader, 400, payload.encode())

        request = self._record(request_body, headers, arrived)
        reply = self._scripted(request)
        if reply.hang:
            await self._stop.wait()
            return False
        delay = self.delay if reply.delay is None else reply.delay
        remaining = arrived + delay - time.monotonic()  # the delay counts from the request's arrival
        if remaining > 0:
            await asyncio.sleep(remaining)
        payload = reply.raw_body if reply.raw_body is not None else json.dumps(_reply_body(request, reply)).encode()
        request.delivered = await self._send(writer, reader, reply.status, payload, reply.headers)
        request.finished = time.monotonic()
        return request.delivered


def _reply_body(request: FakeRequest, reply: Reply) -> dict:
    """The JSON body of a reply: a chat completion (a text completion for /v1/completions), or an error."""
    if reply.status != 200:
        error_type = reply.error_type or _ERROR_TYPES.get(reply.status, "server_error")
        return {
            "error": {"message": reply.error_message or "error (fake)", "type": error_type, "code": None, "param": None}
        }
    completions = "prompt" in request.body
    usage = {
        "prompt_tokens": count_words(request.last_user)
        if completions
        else sum(count_words(_text(m.get("content"))) for m in request.messages),
        "completion_tokens": count_words(reply.content),
    }
    usage.update(reply.usage or {})
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    choice = (
        {"text": reply.content, "index": 0, "logprobs": reply.logprobs, "finish_reason": reply.finish_reason}
        if completions
        else {
            "index": 0,
            "message": {"role": "assistant", "content": reply.content},
            "finish_reason": reply.finish_reason,
            "logprobs": reply.logprobs,
        }
    )
    return {
        "id": f"chatcmpl-fake-{request.index}",
        "object": "text_completion" if completions else "chat.completion",
        "created": 1700000000,
        "model": request.model,
        "choices": [choice],
        "usage": usage,
    }


class FakeBatchAPI:
    """The server's /v1/files and /v1/batches, as the OpenAI Batch API answers them.

    A batch is ``in_progress`` for ``polls`` retrieves (forever while ``hold`` is set), then ends as ``end``
    says: ``completed`` (every line run through the server's script: a 200 reply goes to the output file, any
    other status to the error file), ``expired`` (the first ``finished`` lines run, the others in the error file
    as ``batch_expired``), or ``failed`` (the input file refused by validation, with ``failure`` as the message).
    A cancelled batch (``POST /v1/batches/{id}/cancel``) ends ``cancelled`` on its next retrieve, with the first
    ``finished`` lines run. ``creates`` counts ``batches.create`` calls, ``retrieves`` every ``GET /batches/{id}``;
    ``files`` holds every file ever made, by id (``DELETE /v1/files/{id}`` adds the id to ``deleted``, after which
    the file answers 404, as does ``files.content``).

    Faults: a batch is known only to the key that created it (another key's retrieve answers 404, as OpenAI does
    across projects); ``purge(id)`` makes the server forget a batch; ``retrieve_status``, ``create_status`` and
    ``delete_status`` make every such call answer that HTTP status instead. A script's
    ``Reply.request_timeout()`` becomes an error line with the code ``request_timeout``.
    """

    def __init__(self, server: FakeOpenAI) -> None:
        self.server = server
        self.files: dict[str, bytes] = {}
        self.batches: dict[str, dict] = {}
        self.creates = 0
        self.polls = 1
        self.hold = False
        self.end: str | list[str] = "completed"  # a list: one end per batch, in order, then "completed"
        self.finished: int | None = None  # lines run before an expiry or a cancel (default: half)
        self.failure = "line 1: model 'x' is not available for batches"
        self.retrieves = 0
        self.deleted: list[str] = []
        self.retrieve_status: int | None = None
        self.create_status: int | None = None
        self.delete_status: int | None = None
        self._polled: dict[str, int] = {}
        self._owners: dict[str, str] = {}  # batch id -> the key that created it

    def purge(self, batch_id: str) -> None:
        """The server forgets the batch (as a provider does with old batches): it answers 404 from now on."""
        del self.batches[batch_id]

    def handle(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes, str]:
        parts = path.strip("/").split("/")[1:]  # after "v1"
        key = headers.get("authorization", "")
        if parts == ["files"] and method == "POST":
            return self._upload(headers, body)
        if len(parts) >= 2 and parts[0] == "files" and (parts[1] not in self.files or parts[1] in self.deleted):
            return self._error(404, f"No such File object: {parts[1]}")
        if len(parts) == 3 and parts[0] == "files" and parts[2] == "content":
            return 200, self.files[parts[1]], "application/octet-stream"
        if len(parts) == 2 and parts[0] == "files" and method == "DELETE":
            if self.delete_status is not None:
                return self._error(self.delete_status, "the file could not be deleted (fake)")
            self.deleted.append(parts[1])
            return self._json({"id": parts[1], "object": "file", "deleted": True})
        if parts == ["batches"] and method == "POST":
            if self.create_status is not None:
                return self._error(self.create_status, "the batch could not be created (fake)")
            self._owners[f"batch_fake_{self.creates + 1}"] = key
            return self._create(json.loads(body))
        if len(parts) >= 2 and parts[0] == "batches":
            if parts[1] not in self.batches or self._owners.get(parts[1]) != key:
                return self._error(404, f"No batch found with id '{parts[1]}'.")
            batch = self.batches[parts[1]]
            if len(parts) == 3 and parts[2] == "cancel" and method == "POST":
                if batch["status"] not in ("completed", "failed", "expired", "cancelled"):
                    batch["status"] = "cancelling"
                return self._json(batch)
            if len(parts) == 2 and method == "GET":
                self.retrieves += 1
                if self.retrieve_status is not None:
                    return self._error(self.retrieve_status, "the batch could not be read (fake)")
                return self._json(self._advance(batch))
        return self._error(404, f"no route {method} {path}")

    @staticmethod
    def _error(status: int, message: str) -> tuple[int, bytes, str]:
        error = {"message": message, "type": _ERROR_TYPES.get(status, "server_error"), "param": None, "code": None}
        return status, json.dumps({"error": error}).encode(), "application/json"

    @staticmethod
    def _json(value: dict) -> tuple[int, bytes, str]:
        return 200, json.dumps(value).encode(), "application/json"

    def _upload(self, headers: dict[str, str], body: bytes) -> tuple[int, bytes, str]:
        from email.parser import BytesParser
        from email.policy import default

        head = f"Content-Type: {headers.get('content-type', '')}\r\n\r\n".encode()
        message = BytesParser(policy=default).parsebytes(head + body)
        fields = {part.get_param("name", header="content-disposition"): part for part in message.iter_parts()}
        data = fields["file"].get_payload(decode=True)
        file_id = f"file-fake-{len(self.files) + 1}"
        self.files[file_id] = data
        purpose = fields["purpose"].get_payload(decode=True).decode()
        return self._json(
            {
                "id": file_id,
                "object": "file",
                "bytes": len(data),
                "created_at": 1700000000,
                "filename": fields["file"].get_filename() or "upload.jsonl",
                "purpose": purpose,
                "status": "processed",
            }
        )

    def _create(self, request: dict) -> tuple[int, bytes, str]:
        self.creates += 1
        batch_id = f"batch_fake_{self.creates}"
        lines = [line for line in self.files[request["input_file_id"]].decode().splitlines() if line.strip()]
        self.batches[batch_id] = {
            "id": batch_id,
            "object": "batch",
            "endpoint": request["endpoint"],
            "errors": None,
            "input_file_id": request["input_file_id"],
            "completion_window": request["completion_window"],
            "status": "validating",
            "output_file_id": None,
            "error_file_id": None,
            "created_at": 1700000000,
            "request_counts": {"total": len(lines), "completed": 0, "failed": 0},
            "metadata": request.get("metadata"),
        }
        self._polled[batch_id] = 0
        return self._json(self.batches[batch_id])

    def _advance(self, batch: dict) -> dict:
        if batch["status"] in ("completed", "failed", "expired", "cancelled"):
            return batch
        if batch["status"] == "cancelling":
            return self._end(batch, "cancelled")
        self._polled[batch["id"]] += 1
        if self.hold or self._polled[batch["id"]] <= self.polls:
            batch["status"] = "in_progress"
            return batch
        end = self.end.pop(0) if isinstance(self.end, list) and self.end else self.end
        return self._end(batch, end if isinstance(end, str) else "completed")

    def _end(self, batch: dict, status: str) -> dict:
        if status == "failed":
            batch["status"] = "failed"
            error = {"code": "invalid_request", "message": self.failure, "param": None, "line": 1}
            batch["errors"] = {"object": "list", "data": [error]}
            return batch
        lines = [json.loads(line) for line in self.files[batch["input_file_id"]].decode().splitlines() if line.strip()]
        run = len(lines) if status == "completed" else (len(lines) // 2 if self.finished is None else self.finished)
        output, errors = [], []
        for number, line in enumerate(lines):
            if number >= run:
                code = "batch_expired" if status == "expired" else "batch_cancelled"
                errors.append(
                    {
                        "id": f"batch_req_{number}",
                        "custom_id": line["custom_id"],
                        "response": None,
                        "error": {"code": code, "message": "the batch ended before this request ran"},
                    }
                )
                continue
            request = self.server._record(line["body"], {"x-fake-batch": batch["id"]}, time.monotonic())
            reply = self.server._scripted(request)
            if reply.batch_error is not None:
                error = {"code": reply.batch_error, "message": reply.error_message or "the request failed (fake)"}
                errors.append(
                    {"id": f"batch_req_{number}", "custom_id": line["custom_id"], "response": None, "error": error}
                )
                continue
            result = {
                "id": f"batch_req_{number}",
                "custom_id": line["custom_id"],
                "response": {
                    "status_code": reply.status,
                    "request_id": f"req_{number}",
                    "body": _reply_body(request, reply),
                },
                "error": None,
            }
            (output if reply.status == 200 else errors).append(result)
        for kind, found in (("output_file_id", output), ("error_file_id", errors)):
            if found:
                file_id = f"file-fake-{len(self.files) + 1}"
                self.files[file_id] = "".join(json.dumps(x) + "\n" for x in found).encode()
                batch[kind] = file_id
        batch["status"] = status
        batch["request_counts"] = {"total": len(lines), "completed": len(output), "failed": len(errors)}
        return batch


try:  # the pytest fixture, for suites that want it: `from tests.fakes.openai_server import fake_openai`
    import pytest

    @pytest.fixture
    def fake_openai():
        """A running FakeOpenAI with the default script; set ``fake_openai.script`` in the test."""
        with FakeOpenAI() as server:
            yield server
except ImportError:  # pragma: no cover
    pass


class _FastReplyProtocol(asyncio.Protocol):
    """Benchmark mode: every POST gets the same precomputed reply exactly ``delay`` after it arrived.

    No scripting and no per-request JSON work, so the server adds as little latency as possible.
    """

    def __init__(self, payload: Callable[[bytes], bytes], delay: float, counter: list[int]) -> None:
        self.payload, self.delay, self.counter = payload, delay, counter
        self.buffer = b""
        self.transport = None

    def connection_made(self, transport) -> None:
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        loop = asyncio.get_running_loop()
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].decode("latin-1").lower()
            length = 0
            for line in head.split("\r\n"):
                if line.startswith("content-length:"):
                    length = int(line.split(":", 1)[1])
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4 : end + 4 + length]
            self.buffer = self.buffer[end + 4 + length :]
            self.counter[0] += 1
            loop.call_at(loop.time() + self.delay, self._reply, self.payload(body))

    def _reply(self, payload: bytes) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(payload)

    def connection_lost(self, exc) -> None:
        self.transport = None


def fast_payload(content: str) -> bytes:
    """A whole HTTP response carrying one chat completion whose content is `content`."""
    body = json.dumps(
        {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": 1700000000,
            "model": "fake-model",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                    "logprobs": None,
                }
            ],
            "usage": {
                "prompt_tokens": 10,
                "completion_tokens": count_words(content),
                "total_tokens": 10 + count_words(content),
            },
        }
    ).encode()
    return (f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n\r\n").encode() + body


def tcq_question(request) -> dict:
    """A scripted model for time+content question prompts: it always writes "What did <speaker> talk about
    <time phrase>?", both read from the prompt, which passes gen's checks, and answers with a stretch of the
    passage's own words (:func:`passage_answer`)."""
    prompt = request.last_user
    speaker = re.search(r"^1\. It asks about what (.+?) said", prompt, re.M).group(1)
    reference = re.search(r'with this phrase: "([^"]+)"', prompt).group(1)
    question = f"What did {speaker} talk about {reference}?"
    return {"question": question, "answer": passage_answer(prompt)}


ANSWER_WORDS = 12
TCQ_PASSAGE = re.compile(r"It comes from session .*?\n\n(.*?)\n\n", re.S)
TCQ_NAMES = re.compile(r"^5\. .*, with (.+?) and (.+?) referred to by name", re.M)


def passage_answer(prompt: str) -> str:
    """Twelve words of the prompt's passage ("Speaker: text" lines), from its first word of six letters or more
    that is not a speaker's name: a stretch that holds content words of the passage, so it passes gen's answer
    rule."""
    passage = TCQ_PASSAGE.search(prompt).group(1)
    names = set(TCQ_NAMES.search(prompt).groups())
    said = [word for line in passage.splitlines() for word in line.split(": ", 1)[-1].split()]
    bare = [word.strip(".,!?;:'\"") for word in said]
    start = next((i for i, word in enumerate(bare) if len(word) >= 6 and word not in names), 0)
    return " ".join(said[start : start + ANSWER_WORDS])


TCQ_SPEAKER = re.compile(rb"It asks about what (.+?) said")
TCQ_PHRASE = re.compile(rb'with this phrase: \\"(.+?)\\"')
TCQ_USER = re.compile(rb'"(Here is the passage(?:[^"\\]|\\.)*)"')  # the user message, a JSON string


def tcq_payload(body: bytes) -> bytes:
    """Benchmark mode --tcq: a time+content question and answer that pass gen's checks, read from the prompt with
    regular expressions (the user message alone is decoded, for the answer), like tcq_question above."""
    speaker, phrase, user = TCQ_SPEAKER.search(body), TCQ_PHRASE.search(body), TCQ_USER.search(body)
    if speaker is None or phrase is None or user is None:  # the structured-output probe and anything else
        return fast_payload('{"question": "ok"}')
    question = f"What did {speaker[1].decode()} talk about {phrase[1].decode()}?"
    answer = passage_answer(json.loads(b'"' + user[1] + b'"'))
    return fast_payload(json.dumps({"question": question, "answer": answer}))


def serve_fast(content: str, delay: float, tcq: bool = False) -> int:
    """Serve fixed replies (or, with tcq, questions built from each prompt) until stdin closes (prints the
    base_url first)."""
    fixed = fast_payload(content)
    payload = tcq_payload if tcq else (lambda body: fixed)
    counter = [0]

    async def run() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: _FastReplyProtocol(payload, delay, counter), "127.0.0.1", 0, backlog=512
        )
        print(f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/v1", flush=True)
        await loop.run_in_executor(None, sys.stdin.read)
        server.close()

    asyncio.run(run())
    print(f"served {counter[0]} requests", file=sys.stderr)
    return 0


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description="Fake OpenAI-compatible server (serves until stdin closes).")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each chat reply")
    parser.add_argument("--content", default="ok", help="assistant content of every reply")
    parser.add_argument(
        "--fast", action="store_true", help="benchmark mode: fixed replies, exact delay, minimal server overhead"
    )
    parser.add_argument(
        "--tcq", action="store_true", help="with --fast: answer time+content question prompts with a valid question"
    )
    args = parser.parse_args(argv)
    if args.fast:
        return serve_fast(args.content, args.delay, args.tcq)
    with FakeOpenAI(lambda request: args.content, delay=args.delay) as server:
        print(server.base_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt):
            sys.stdin.read()
        print(f"served {server.count} chat requests", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
