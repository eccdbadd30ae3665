"""The HTTP transport under the engine's openai client: HTTP/1.1 on asyncio protocols, kept-alive connections.

The openai client stays the client (it builds every request, sends it through its httpx2 client and reads
what comes back); only the transport, the part that moves bytes, is gen's. openai's aiohttp transport makes an
aiohttp request out of each httpx2 request and an httpx2 response out of each aiohttp one: with it a bare
loop at 256 in flight spent 1.53–1.56 ms of CPU per request, with this one 1.13–1.21 (README, target 3). This
one writes the request's bytes as httpx2 prepared them (headers and body unchanged) and reads the status,
headers and body (by Content-Length, chunked, or up to the close) into an httpx2 response, which decodes
any Content-Encoding itself.

It sends the completion requests (their bodies are bytes and their replies small); every other request (the
Batch API's files, which are streamed both ways) goes through openai's aiohttp transport, as do all requests
through a proxy from the environment (httpx2 mounts that transport for the URLs the proxy covers).
Connections are kept per origin (scheme, host, port) while idle, as many as the client's keep-alive limit; a
request that finds its kept connection closed by the server before any reply byte came is sent once more on a
new one. Errors become httpx2's (ConnectError, ReadError, RemoteProtocolError), which the openai client reports
as connection errors; the engine's own timeout bounds every request.
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from typing import Any

import httpx2
from openai import DefaultAioHttpClient

__all__ = ["LeanClient", "LeanTransport"]

MAX_HEAD = 1 << 16  # the longest status line and headers accepted
COMPLETIONS = "/completions"  # (and /chat/completions): the requests this transport sends


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; ``exchange(data)`` sends a request and returns the parsed reply."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.error: BaseException | None = None
        self.received = False  # any byte of a reply yet
        self._waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        self.received = True
        self._wake()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed, self.error = True, exc
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    async def _more(self) -> None:
        """Wait for more bytes; RemoteProtocolError when the server closed the connection."""
        if self.closed:
            raise httpx2.RemoteProtocolError("the server closed the connection before the reply was complete")
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    async def exchange(self, data: bytes) -> tuple[int, bytes, list[tuple[bytes, bytes]], bytes, bool]:
        """(status, reason, headers, body, reusable) of the reply to the request `data`."""
        assert self.transport is not None
        self.received = False
        self.transport.write(data)
        while True:
            status, reason, headers = await self._head()
            if not 100 <= status < 200:  # (an informational reply comes before the real one)
                break
        fields = {name.lower(): value for name, value in headers}
        if status in (204, 304):
            body = b""
        elif b"chunked" in fields.get(b"transfer-encoding", b"").lower():
            body = await self._chunked()
        elif b"content-length" in fields:
            body = await self._exactly(int(fields[b"content-length"]))
        else:  # the body runs to the close
            while not self.closed:
                await self._more_or_close()
            body, fields[b"connection"] = bytes(self.buffer), b"close"
            self.buffer.clear()
        reusable = fields.get(b"connection", b"").lower() != b"close" and not self.closed
        return status, reason, headers, body, reusable

    async def _more_or_close(self) -> None:
        with contextlib.suppress(httpx2.RemoteProtocolError):
            await self._more()

    async def _head(self) -> tuple[int, bytes, list[tuple[bytes, bytes]]]:
        while (end := self.buffer.find(b"\r\n\r\n")) < 0:
            if len(self.buffer) > MAX_HEAD:
                raise httpx2.RemoteProtocolError("the reply's headers are too long")
            await self._more()
        lines = bytes(self.buffer[:end]).split(b"\r\n")
        del self.buffer[: end + 4]
        try:
            _, code, *reason = lines[0].split(b" ", 2)
            status = int(code)
            headers = [(name.strip(), value.strip()) for name, value in (line.split(b":", 1) for line in lines[1:])]
        except ValueError:
            raise httpx2.RemoteProtocolError(f"not an HTTP reply: {lines[0][:80]!r}") from None
        return status, reason[0] if reason else b"", headers

    async def _exactly(self, size: int) -> bytes:
        while len(self.buffer) < size:
            await self._more()
        body = bytes(self.buffer[:size])
        del self.buffer[:size]
        return body

    async def _chunked(self) -> bytes:
        body = bytearray()
        while True:
            while (end := self.buffer.find(b"\r\n")) < 0:
                await self._more()
            try:
                size = int(bytes(self.buffer[:end]).split(b";", 1)[0], 16)
            except ValueError:
                raise httpx2.RemoteProtocolError("a chunk size that is not a number") from None
            del self.buffer[: end + 2]
            if size == 0:  # the last chunk, then trailers up to an empty line
                while (end := self.buffer.find(b"\r\n")) != 0:
                    if end < 0:
                        await self._more()
                    else:
                        del self.buffer[: end + 2]
                del self.buffer[:2]
                return bytes(body)
            chunk = await self._exactly(size + 2)  # (and the CRLF after it)
            body += chunk[:-2]


class LeanTransport(httpx2.AsyncBaseTransport):
    """See the module docstring."""

    def __init__(self, ssl_context: ssl.SSLContext, keep: int, other: httpx2.AsyncBaseTransport) -> None:
        self.ssl_context = ssl_context
        self.keep = keep  # idle connections kept per origin
        self.other = other  # for every request but completions
        self._idle: dict[tuple[str, str, int], list[_Connection]] = {}

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        url = request.url
        if not url.path.endswith(COMPLETIONS) or not isinstance(request.stream, httpx2.ByteStream):
            return await self.other.handle_async_request(request)
        origin = (url.scheme, url.host, url.port or (443 if url.scheme == "https" else 80))
        body = await request.aread()  # (a streamed body is read whole, and sent with its length)
        head = [b"%s %s HTTP/1.1" % (request.method.encode(), url.raw_path)]
        head += [
            b"%s: %s" % (name, value) for name, value in request.headers.raw if name.lower() != b"transfer-encoding"
        ]
        if "transfer-encoding" in request.headers:
            head.append(b"Content-Length: %d" % len(body))
        data = b"\r\n".join(head) + b"\r\n\r\n" + body
        connection = self._kept(origin)
        reused = connection is not None
        while True:
            if connection is None:
                connection = await self._connect(origin)
            try:
                status, reason, headers, body, reusable = await connection.exchange(data)
            except httpx2.RemoteProtocolError:
                connection.close()
                if reused and not connection.received:  # a kept connection the server had closed meanwhile
                    connection, reused = None, False
                    continue
                raise httpx2.ReadError(str(connection.error or "the server closed the connection")) from None
            except BaseException:  # cancelled (the engine's timeout) or a failure: the connection is not reused
                connection.close()
                raise
            break
        idle = self._idle.setdefault(origin, [])
        if reusable and len(idle) < self.keep:
            idle.append(connection)
        else:
            connection.close()
        extensions = {"http_version": b"HTTP/1.1", "reason_phrase": reason}
        return httpx2.Response(status, headers=headers, content=body, request=request, extensions=extensions)

    def _kept(self, origin: tuple[str, str, int]) -> _Connection | None:
        idle = self._idle.get(origin)
        while idle:
            connection = idle.pop()
            if not connection.closed and connection.transport is not None and not connection.transport.is_closing():
                return connection
        return None

    async def _connect(self, origin: tuple[str, str, int]) -> _Connection:
        scheme, host, port = origin
        secure = self.ssl_context if scheme == "https" else None
        try:
            _, connection = await asyncio.get_running_loop().create_connection(
                _Connection, host, port, ssl=secure, server_hostname=host if secure else None
            )
        except OSError as exc:
            raise httpx2.ConnectError(f"cannot connect to {host}:{port}: {exc}") from exc
        return connection

    async def aclose(self) -> None:
        for idle in self._idle.values():
            for connection in idle:
                connection.close()
        self._idle.clear()
        await self.other.aclose()


class LeanClient(DefaultAioHttpClient):
    """openai's aiohttp client (its defaults, and its transport for proxies) with :class:`LeanTransport` for
    direct connections."""

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
            return transport
        keep = limits.max_keepalive_connections or limits.max_connections or 100
        context = httpx2.create_ssl_context(verify=verify, cert=cert, trust_env=trust_env)
        other = super()._init_transport(verify, cert, trust_env, http1, http2, limits)
        return LeanTransport(context, keep, other)
