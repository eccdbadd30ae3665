"""gen's HTTP transport under the openai client (gen/llm/calls/transport.py) against a raw server that answers each
request with bytes given by the test: the reply framings HTTP/1.1 allows, kept connections, and failures."""

from __future__ import annotations

import asyncio
import gzip
import json
import shutil
import socket
import ssl
import subprocess

import httpx2
import openai
import pytest

from gen.llm.calls import transport
from gen.llm.calls.clients import LeanClient

BODY = json.dumps({"choices": [{"message": {"content": "hi"}, "finish_reason": "stop"}]}).encode()


def length_reply(body: bytes = BODY, extra: bytes = b"") -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n%s\r\n"
        % (
            len(body),
            extra,
        )
        + body
    )


class RawServer:
    """Answers the n-th request it reads with replies[n] (bytes, or None to close the connection unanswered);
    closes a connection after its reply when `close_after` says so. Counts connections."""

    def __init__(self, replies: list[bytes | None], close_after: set[int] = frozenset()) -> None:
        self.replies, self.close_after = replies, close_after
        self.connections = 0
        self.requests: list[bytes] = []
        self.ssl: ssl.SSLContext | None = None

    async def __aenter__(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/v1"

    async def __aexit__(self, *exc: object) -> None:
        self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length")
                    ),
                    0,
                )
                body = await reader.readexactly(length)
                index = len(self.requests)
                self.requests.append(head + body)
                reply = self.replies[index]
                if reply is None:
                    break
                writer.write(reply)
                await writer.drain()
                if index in self.close_after:
                    break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        writer.close()


def client(base_url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="sk-test", base_url=base_url, max_retries=0, http_client=LeanClient())


async def post(api: openai.AsyncOpenAI) -> httpx2.Response:
    return await api.post("/chat/completions", body={"model": "m", "messages": []}, cast_to=httpx2.Response)


def run(coro):
    return asyncio.run(coro)


@pytest.mark.parametrize(
    "reply",
    [
        length_reply(),
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        + b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (BODY[:7], BODY[7:]))
        + b"0\r\nX-Trailer: 1\r\n\r\n",
        length_reply(gzip.compress(BODY), b"Content-Encoding: gzip\r\n"),
        b"HTTP/1.1 100 Continue\r\n\r\n" + length_reply(),
    ],
    ids=["content-length", "chunked", "gzip", "informational first"],
)
def test_each_framing_of_a_reply_reads_the_same_body(reply):
    async def go():
        async with RawServer([reply, reply]) as url, client(url) as api:
            first, second = await post(api), await post(api)
        return first, second

    first, second = run(go())
    assert (
        first.status_code == 200 and json.loads(first.content) == json.loads(BODY) and second.content == first.content
    )


def test_a_body_up_to_the_close_and_a_kept_connection_reused():
    async def go():
        server = RawServer([length_reply(), length_reply(), b"HTTP/1.1 200 OK\r\n\r\n" + BODY], close_after={2})
        async with server as url, client(url) as api:
            replies = [await post(api) for _ in range(3)]
        return server, replies

    server, replies = run(go())
    assert [json.loads(r.content) for r in replies] == [json.loads(BODY)] * 3
    assert server.connections == 1
    sent = server.requests[0]
    assert sent.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n") and b'"model":"m"' in sent


def test_a_kept_connection_the_server_closed_is_replaced_once():
    async def go():
        server = RawServer([length_reply(), length_reply()], close_after={0})
        async with server as url, client(url) as api:
            first = await post(api)
            await asyncio.sleep(0.05)  # the server has closed the kept connection
            second = await post(api)
        return server, first, second

    server, first, second = run(go())
    assert first.content == second.content == BODY and server.connections == 2


def test_a_connection_closed_before_the_reply_and_a_refused_one_are_connection_errors():
    async def closed():
        async with RawServer([None]) as url, client(url) as api:
            await post(api)

    with pytest.raises(openai.APIConnectionError):
        run(closed())
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # nothing listens there once the socket closes

    async def refused():
        async with client(f"http://127.0.0.1:{port}/v1") as api:
            await post(api)

    with pytest.raises(openai.APIConnectionError):
        run(refused())


@pytest.mark.parametrize(
    "reply",
    [
        b"HTTP/1.1 200 OK\r\nContent-Length: 64\r\n\r\n" + b"x" * 64,  # past the limit (set to 32 below)
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",  # cut off by the close
        b"SMTP ready\r\n\r\n",  # not HTTP
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",  # a chunk size that is not hex
    ],
    ids=["too long", "cut off", "not http", "bad chunk"],
)
def test_a_reply_too_long_cut_off_or_malformed_is_a_connection_error(reply, monkeypatch):
    monkeypatch.setattr(transport, "MAX_REPLY_BYTES", 32)

    async def go():
        async with RawServer([reply], close_after={0}) as url, client(url) as api:
            await post(api)

    with pytest.raises(openai.APIConnectionError):
        run(go())


def test_a_refused_connection_fails_with_the_reason():
    from gen.llm.calls.request import send_once

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]

    async def go():
        async with client(f"http://127.0.0.1:{port}/v1") as api:
            return await send_once(api, {"model": "m", "messages": []}, 5, lambda text: text)

    failure = run(go())
    assert failure.kind == "connection_error" and f"127.0.0.1:{port}" in failure.reason


def test_requests_other_than_completions_go_through_openais_transport():
    seen: list[str] = []

    def other(request: httpx2.Request) -> httpx2.Response:
        seen.append(request.url.path)
        return httpx2.Response(200, json={"object": "list", "data": []})

    async def go():
        async with RawServer([length_reply()]) as url, client(url) as api:
            api._client._transport.inner.other = httpx2.MockTransport(other)  # (openai's aiohttp transport otherwise)
            listed = await api.get("/files", cast_to=httpx2.Response)
            completed = await post(api)
        return listed, completed

    listed, completed = run(go())
    assert seen == ["/v1/files"] and listed.json()["object"] == "list" and completed.content == BODY


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make a certificate")
def test_https_with_the_clients_certificate_settings(tmp_path):
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"),
            *("-addext", "subjectAltName=DNS:localhost", "-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    served = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    served.load_cert_chain(cert, key)

    async def go():
        server = RawServer([length_reply(), length_reply()])
        server.ssl = served
        async with server as url:
            secure = url.replace("http://127.0.0.1", "https://localhost")
            trusted = LeanClient(verify=ssl.create_default_context(cafile=str(cert)))
            async with openai.AsyncOpenAI(api_key="k", base_url=secure, max_retries=0, http_client=trusted) as api:
                replies = [await post(api), await post(api)]
            async with client(secure) as api:  # the system's certificates do not know this one
                with pytest.raises(openai.APIConnectionError):
                    await post(api)
        return server, replies

    server, replies = run(go())
    assert [r.content for r in replies] == [BODY, BODY] and server.connections == 1  # (one kept connection)
