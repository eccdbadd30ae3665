"""Every openai client gen makes is made here: requests go only to the URL the recipe names, and no reply is read
past a size limit once decoded.

Why one place: gen sends a recipe's endpoint the corpus text and the API key. The openai client (like httpx2 and
aiohttp under it) follows redirects by default, so a server, a proxy login page or a misconfigured load
balancer answering 3xx would have the same request sent to a host, scheme or port the recipe never named. Every
completion, the structured-output probe, the Batch API's files and batches, ``gen batches cancel``, ``gen judge``
and the quality products' endpoints get their client from :func:`openai_client`, and the client class
(:class:`LeanClient`) refuses every 3xx in a response hook, which httpx2 runs on each reply
before it would follow one, whatever ``follow_redirects`` a request asks for.

Every redirect is refused, to the same host too: an API never answers a POST with one (a 301/302 turns it into
a GET without its body), and the one that does so is almost always a base_url that differs from the right one
(http for https, a missing /v1, a proxy's login page). The refusal stops the run with one message naming the
endpoint and where the redirect pointed (scheme, host and port only: a Location may carry a signed token), so
the user can write that URL into the recipe if they trust it. The Hugging Face Hub client (``gen push``) is not
made here: the Hub answers uploads and downloads of large files with redirects to its storage, and it needs them.
"""

from __future__ import annotations

import ssl
from typing import Any

import httpx2
import openai
from openai import DefaultAioHttpClient

from gen.llm.calls.transport import DecodedLimit, LeanTransport

__all__ = ["LeanClient", "RedirectRefused", "openai_client", "redirect_in"]


class RedirectRefused(openai.OpenAIError):
    """A reply was a redirect, which gen never follows. An OpenAIError, so the openai client neither wraps it
    nor retries the request (it passes its own errors on as they are)."""

    def __init__(self, status: int, target: str | None) -> None:
        self.status, self.target = status, target
        where = f"to {target}" if target else "with no Location"
        super().__init__(f"the server answered HTTP {status}, a redirect {where}; gen does not follow redirects")


def redirect_target(response: httpx2.Response) -> str | None:
    """scheme://host[:port] of where a redirect points (resolved against the request's URL); never its path or
    query, which may carry a token."""
    location = response.headers.get("location")
    if not location:
        return None
    try:
        url = response.request.url.join(location)
    except (httpx2.InvalidURL, ValueError):
        return "an address that is not a valid URL"
    port = f":{url.port}" if url.port is not None else ""
    return f"{url.scheme}://{url.host}{port}"


async def refuse_redirects(response: httpx2.Response) -> None:
    """The response hook of every client gen makes (see the module docstring)."""
    if 300 <= response.status_code < 400:
        raise RedirectRefused(response.status_code, redirect_target(response))


def redirect_in(exc: BaseException) -> RedirectRefused | None:
    """The refused redirect behind an error, if one is (a caller may see it wrapped in another error)."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, RedirectRefused):
            return cause
        cause = cause.__cause__ or cause.__context__
    return None


class LeanClient(DefaultAioHttpClient):
    """openai's aiohttp client (its defaults, and its transport for proxies) with gen's
    :class:`~gen.llm.calls.transport.LeanTransport` for direct connections; every redirect refused and every reply's
    decoded size bounded (:class:`~gen.llm.calls.transport.DecodedLimit`), whoever makes one."""

    def __init__(self, **kwargs: Any) -> None:
        hooks = dict(kwargs.pop("event_hooks", None) or {})
        hooks["response"] = [refuse_redirects, *hooks.get("response", [])]
        super().__init__(**kwargs, follow_redirects=False, event_hooks=hooks)

    def _init_transport(
        self,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
        trust_env: bool = True,
        http1: bool = True,
        http2: bool = False,
        limits: httpx2.Limits = httpx2.Limits(max_connections=100, max_keepalive_connections=20),
        transport: httpx2.AsyncBaseTransport | None = None,
    ) -> httpx2.AsyncBaseTransport:
        if transport is not None:
            return DecodedLimit(transport)
        keep = limits.max_keepalive_connections or limits.max_connections or 100
        context = httpx2.create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)
        other = super()._init_transport(verify, cert, trust_env, http1, http2, limits)  # (LeanTransport's for the rest)
        return DecodedLimit(LeanTransport(context, keep, other))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return DecodedLimit(super()._init_proxy_transport(*args, **kwargs))


def openai_client(base_url: str, api_key: str, *, connections: int, timeout: float) -> openai.AsyncOpenAI:
    """The openai client of one endpoint: no retries of its own (the engine retries), ``connections`` kept
    alive at most, every request bounded by ``timeout`` seconds."""
    limits = httpx2.Limits(max_connections=connections, max_keepalive_connections=connections)
    http_client = LeanClient(limits=limits, timeout=timeout)
    return openai.AsyncOpenAI(
        api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout, http_client=http_client
    )
