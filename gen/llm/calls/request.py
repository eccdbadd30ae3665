"""One request to an endpoint, and the policy that says what a failed one means.

:func:`send_once` makes a single attempt and returns either an :class:`Answer` (the server replied with a
completion) or a :class:`Failure` with a kind, as counted in the run report:

==================  ===================================================  ====================================
kind                cause                                                what happens
==================  ===================================================  ====================================
timeout             no reply within the endpoint's ``timeout_s``          retried after a backoff
connection_error    the server could not be reached                      retried after a backoff
invalid_response    the reply is not a completion (gen/llm/calls/replies.py)    retried after a backoff
rate_limited        429                                                  retried after ``Retry-After``; the
                                                                         whole endpoint pauses
http_503            503                                                  same as 429 (the server is busy)
http_5xx            other server errors                                  retried after a backoff; not when
                                                                         the same request gets the same
                                                                         message again (a refusal)
http_408, http_409  request timeout, conflict                            retried after a backoff
http_400... (4xx)   the request itself is wrong                          not retried: the item is rejected
http_401, http_403  the key is refused                                   stops the run
http_404            unknown model or URL                                 stops the run
redirect            any 3xx (never followed: gen/llm/calls/clients.py)         stops the run
quota_exhausted     429 ``insufficient_quota``                           stops the run
==================  ===================================================  ====================================

Every retry stays within the call's budget, and runs of failures stop the run (:mod:`gen.llm.calls.giveup`).
A server's error message is kept in its own words, shortened (:func:`server_message`).

:class:`RetryPolicy` holds the waiting rules: ``Retry-After`` when the server gives one (capped, with a
little jitter so paused workers do not return all at once), else exponential backoff with jitter.
"""

from __future__ import annotations

import asyncio
import random
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from gen.errors import Stopped
from gen.llm.calls.limiter import backoff_delay, retry_after_seconds
from gen.llm.calls.replies import Answer, Malformed, answer_of, reply_json
from gen.llm.config import EndpointConfig
from gen.llm.task import Task

__all__ = [
    "Answer",
    "Failure",
    "RetryPolicy",
    "answer_of",
    "body_messages",
    "build_request",
    "http_stack",
    "send_once",
    "server_message",
    "stop_error",
]

Scrub = Callable[[str], str]  # removes API keys from a text that leaves the engine

FATAL_KINDS = {"http_401", "http_403", "http_404", "quota_exhausted", "redirect"}
PAUSING_KINDS = {"rate_limited", "http_503"}  # the server is overloaded: every worker of the endpoint waits
RETRIED_4XX = {"http_408", "http_409"}


def build_request(
    endpoint: EndpointConfig, messages: list[dict], response_format: dict | None, sample: int, task: Task | None = None
) -> dict:
    """The request body: every data parameter of the endpoint, and what the task asks for besides (its own output
    cap, log-probabilities; a scored text goes to /completions, see :class:`Task`)."""
    max_tokens = task.max_tokens if task is not None and task.max_tokens is not None else endpoint.max_tokens
    logprobs = task.logprobs if task is not None else 0
    body: dict[str, Any] = {"model": endpoint.model}
    if task is not None and task.score_text:
        body.update(prompt=messages[0]["content"], echo=True, logprobs=logprobs)
    else:
        body["messages"] = messages
        if logprobs:
            body.update(logprobs=True, top_logprobs=logprobs)
    if endpoint.temperature is not None:
        body["temperature"] = endpoint.temperature
    if endpoint.top_p is not None:
        body["top_p"] = endpoint.top_p
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if endpoint.seed is not None:
        body["seed"] = endpoint.seed + sample
    if response_format is not None:
        body["response_format"] = response_format
    body.update(endpoint.extra_params)
    return body


def body_messages(body: dict) -> list[dict]:
    """The chat messages of a request body; a /completions prompt counts as one user message."""
    return body["messages"] if "messages" in body else [{"role": "user", "content": body["prompt"]}]


def http_stack() -> tuple[ModuleType, Any]:
    """(the HTTP module, the async HTTP client factory) of the openai 3.x client the engine uses.

    The client is openai's aiohttp client (the `aiohttp` extra: at a few hundred requests in flight the default
    one's connection pool costs three times its CPU per request, bench/bench_llm.py) with gen's own transport
    for direct connections (gen/llm/calls/transport.py); every client is made by
    :func:`gen.llm.calls.clients.openai_client`.
    Imported on first use: plans and fully cached runs never load openai.
    """
    import httpx2

    from gen.llm.calls.clients import LeanClient

    return httpx2, LeanClient


@dataclass(frozen=True)
class Failure:
    """An attempt that brought no completion. ``answered``: the server itself replied (with an error)."""

    kind: str
    reason: str
    retry_after: float | None = None
    answered: bool = False


async def send_once(client: Any, body: dict, timeout_s: float, scrub: Scrub) -> Answer | Failure:
    """One POST /chat/completions (/completions for a scored text), its outcome classified; never raises for a
    failed request."""
    import openai

    from gen.llm.calls.clients import RedirectRefused

    http, _ = http_stack()
    try:
        async with asyncio.timeout(timeout_s):
            # client.post sends the body as given; chat.completions.create would first re-walk the whole
            # request (JSON schema included) through the SDK's TypedDict transform, which costs more CPU
            # than everything else per call.
            path = "/chat/completions" if "messages" in body else "/completions"
            response = await client.post(path, body=body, cast_to=http.Response)
            data = reply_json(response.content)
        return answer_of(data, logprobs=bool(body.get("logprobs")))
    except Malformed as exc:
        return Failure("invalid_response", scrub(str(exc))[:300], answered=True)
    except RedirectRefused as exc:
        return Failure("redirect", scrub(str(exc)), answered=True)
    except (TimeoutError, openai.APITimeoutError) as exc:
        if refused := _refused_connection(exc):
            return Failure("connection_error", scrub(refused))
        return Failure("timeout", f"no reply within {timeout_s}s")
    except openai.APIStatusError as exc:
        return _status_failure(exc, scrub)
    except openai.APIConnectionError as exc:
        return Failure("connection_error", scrub(_refused_connection(exc) or _transport_reason(exc) or str(exc)))
    except (openai.APIResponseValidationError, LookupError, TypeError, AttributeError, ValueError) as exc:
        return Failure("invalid_response", scrub(f"{type(exc).__name__}: {exc}")[:300])


def _refused_connection(exc: BaseException) -> str | None:
    """What says why a connection could not be made (refused, no such host), from the error's causes: gen's
    transport raises a ConnectError, and the aiohttp transport (behind a proxy) a connect timeout caused by
    one of its own. None for a real timeout."""
    import aiohttp
    import httpx2

    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, aiohttp.ClientConnectorError | httpx2.ConnectError):
            return str(cause)
        cause = cause.__cause__ or cause.__context__
    return None


def _transport_reason(exc: BaseException) -> str | None:
    """What the transport said went wrong (a reply cut short, or longer than its limit once decoded), which
    the openai client's own "Connection error." leaves out."""
    import httpx2

    cause = exc.__cause__
    while cause is not None:
        if isinstance(cause, httpx2.RequestError) and str(cause):
            return str(cause)
        cause = cause.__cause__ or cause.__context__
    return None


def _status_failure(exc: Any, scrub: Scrub) -> Failure:
    status = exc.status_code
    message = server_message(scrub(_error_message(exc)))
    if status == 429 and getattr(exc, "code", None) == "insufficient_quota":
        return Failure("quota_exhausted", message, answered=True)
    retry_after = retry_after_seconds(exc.response.headers) if exc.response is not None else None
    kind = "rate_limited" if status == 429 else f"http_{status}"
    return Failure(kind, message, None if kind in FATAL_KINDS else retry_after, answered=True)


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])
        if body.get("message"):
            return str(body["message"])
    return str(getattr(exc, "message", "") or exc)


_TRACE = re.compile(r'\n\s*File "')  # a Python traceback line some servers append (it names their files)
_PYDANTIC = re.compile(r"""'loc': \(([^)]*)\), 'msg': ("[^"]*"|'[^']*')(?:, 'input': ("[^"]*"|'[^']*'|[^,}]+))?""")
MESSAGE_CHARS = 240


def server_message(text: str, limit: int = MESSAGE_CHARS) -> str:
    """A server's error message in its own words, shortened: validation errors printed as Python dicts
    (FastAPI servers such as llama.cpp's) become "field: message (got value)", whitespace is collapsed, and
    anything past ``limit`` characters is cut."""
    text = _TRACE.split(text, maxsplit=1)[0]
    found = _PYDANTIC.findall(text)
    if found:
        parts = []
        for loc, msg, given in found[:3]:
            names = [part.strip().strip("'\"") for part in loc.split(",")]
            where = ".".join(name for name in names if name and name != "body")
            parts.append(f"{where}: {msg[1:-1]}" + (f" (got {given.strip()})" if given else ""))
        text = "; ".join(parts)
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def stop_error(failure: Failure, where: str, key_env: str | None) -> Stopped | None:
    """The stop for a failure no retry can fix (refused key, unknown model, no quota); exit code 2, as for
    other settings that are wrong."""
    kind, message = failure.kind, failure.reason
    if kind in ("http_401", "http_403"):
        status = kind.removeprefix("http_")
        expected = f"a valid key in the environment variable {key_env}" if key_env else "an endpoint that needs no key"
        return Stopped(
            f"the endpoint refused the API key (HTTP {status}): {message}",
            record=where,
            field="api_key_env",
            expected=expected,
            exit_code=2,
        )
    if kind == "http_404":
        return Stopped(
            f"model or URL not found (HTTP 404): {message}",
            record=where,
            field="model",
            expected="a model the server at base_url serves, and a base_url ending in the API root (e.g. /v1)",
            exit_code=2,
        )
    if kind == "redirect":
        return Stopped(
            f"{message}: it would send the request (the corpus text, the API key) somewhere the recipe does not name",
            record=where,
            field="base_url",
            expected="the base_url the endpoint really answers at; if you trust where the redirect points, write that "
            "address into the recipe",
            exit_code=2,
        )
    if kind == "quota_exhausted":
        return Stopped(
            f"the account's quota is exhausted (HTTP 429 insufficient_quota): {message}",
            record=where,
            expected="credit on the account behind the key",
            exit_code=2,
        )
    return None


@dataclass
class RetryPolicy:
    """How long to wait before the next attempt, and which failures are worth another one."""

    backoff_base_s: float = 0.5
    backoff_cap_s: float = 30.0
    retry_after_cap_s: float = 120.0
    rng: random.Random = field(default_factory=random.Random)

    @staticmethod
    def retryable(failure: Failure) -> bool:
        """A 4xx (other than 408 and 409) says the request itself is wrong: sending it again will not help."""
        return not failure.kind.startswith("http_4") or failure.kind in RETRIED_4XX

    @staticmethod
    def pauses_endpoint(failure: Failure) -> bool:
        return failure.kind in PAUSING_KINDS

    def delay(self, failure: Failure, attempt: int) -> float:
        """Seconds before attempt ``attempt + 1`` (``attempt`` counts from 0)."""
        if failure.retry_after is not None:
            return min(failure.retry_after, self.retry_after_cap_s) * self.rng.uniform(1.0, 1.1)
        return backoff_delay(attempt, self.backoff_base_s, self.backoff_cap_s, self.rng)
