"""The HTTP transport under the engine's openai client: HTTP/1.1 on asyncio protocols, kept-alive connections.

The openai client stays the client (it builds every request, sends it through its httpx2 client and reads
what comes back); only the transport, the part that moves bytes, is gen's. openai's aiohttp transport makes an
aiohttp request out of each httpx2 request and an httpx2 response out of each aiohttp one: with it a bare
loop at 256 in flight spent 1.53–1.56 ms of CPU per request, with this one 1.13–1.21 (README, target 3). This
one writes the request's bytes as httpx2 prepared them (headers and body unchanged) and hands the reply's
bytes to httptools (llhttp, the parser under Node.js and uvicorn) for its status, headers and body (by
Content-Length, chunked, or up to the close), which become an httpx2 response. A reply over MAX_REPLY_BYTES is
refused while it arrives; :class:`DecodedLimit`, around this transport and every other one, decodes any
Content-Encoding as the body is read and refuses it once it decodes past the same limit.

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
import ssl
from collections.abc import AsyncIterator

import httptools
import httpx2

__all__ = ["MAX_FILE_BYTES", "MAX_REPLY_BYTES", "DecodedLimit", "LeanTransport", "ReplyTooLong"]

MAX_REPLY_BYTES = 1 << 26  # a completion's reply is kilobytes; a longer one is refused, not held (64 MB)
MAX_FILE_BYTES = 1 << 34  # a Batch API file, read line by line as it streams (16 GB)
Reply = tuple[int, bytes, list[tuple[bytes, bytes]], bytes, bool]  # (status, reason, headers, body, reusable)
COMPLETIONS = "/completions"  # (and /chat/completions): the requests this transport sends


class _Connection(asyncio.Protocol):
    """One HTTP/1.1 connection; ``exchange(data)`` sends a request and returns the parsed reply. The reply's
    framing (Content-Length, chunked, informational replies first, a body up to the close) is read by
    httptools (llhttp, the parser under Node.js and uvicorn)."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.error: BaseException | None = None
        self.received = False  # any byte of a reply yet
        self.parser = httptools.HttpResponseParser(self)
        self._reply: asyncio.Future[Reply] | None = None
        self._start()

    def _start(self) -> None:
        self.reason, self.body = b"", bytearray()
        self.headers: list[tuple[bytes, bytes]] = []
        self.framed: bool | None = None  # whether the reply says where its body ends (None: headers not read yet)

    # asyncio's calls
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx2.RemoteProtocolError(f"not a valid HTTP reply: {exc}"))

    def eof_received(self) -> bool:
        self.closed = True
        if self.framed is False:  # the body ran to the close: it is complete now
            self._done((self.parser.get_status_code(), self.reason, self.headers, bytes(self.body), False))
        self._fail(httpx2.RemoteProtocolError("the server closed the connection before the reply was complete"))
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed, self.error = True, exc
        self._fail(httpx2.RemoteProtocolError("the server closed the connection before the reply was complete"))

    # httptools' calls
    def on_status(self, reason: bytes) -> None:
        self.reason += reason

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        names = {name.lower() for name, _ in self.headers}
        self.framed = b"content-length" in names or b"transfer-encoding" in names

    def on_body(self, chunk: bytes) -> None:
        self.body += chunk
        if len(self.body) > MAX_REPLY_BYTES:
            self._fail(httpx2.RemoteProtocolError(f"the reply is longer than {MAX_REPLY_BYTES:,} bytes"))

    def on_message_complete(self) -> None:
        status = self.parser.get_status_code()
        if 100 <= status < 200:  # an informational reply comes before the real one
            self._start()
            return
        self._done((status, self.reason, self.headers, bytes(self.body), self.parser.should_keep_alive()))

    # the request's side
    def _done(self, reply: Reply) -> None:
        if self._reply is not None and not self._reply.done():
            self._reply.set_result(reply)
        else:  # a reply nobody asked for: the connection is not to be trusted again
            self.close()

    def _fail(self, error: Exception) -> None:
        if self._reply is not None and not self._reply.done():
            self._reply.set_exception(error)
        self.close()

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    async def exchange(self, data: bytes) -> Reply:
        """(status, reason, headers, body, reusable) of the reply to the request `data`."""
        assert self.transport is not None
        if self.closed:
            raise httpx2.RemoteProtocolError("the server closed the connection")
        self.received = False
        self._start()
        self._reply = asyncio.get_running_loop().create_future()
        self.transport.write(data)
        try:
            return await self._reply
        finally:
            self._reply = None


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


class ReplyTooLong(httpx2.ReadError):
    """A reply's body decoded past its limit (an httpx2 read error: the openai client reports it as a connection
    error, and the engine retries it as one)."""


class DecodedLimit(httpx2.AsyncBaseTransport):
    """Wraps a transport so that no reply's body is held past a limit once decoded.

    httpx2 decodes gzip and deflate in pieces of at most 1 MiB, but joins every piece of a body it reads whole:
    a few kilobytes of gzip can hold gigabytes of zeros. Here the body is decoded (by httpx2's own decoders) as
    it is read, counted piece by piece, and cut off with :class:`ReplyTooLong` once it passes MAX_REPLY_BYTES
    (MAX_FILE_BYTES for a Batch API file's content, which is read line by line). The reply handed on carries
    the decoded bytes, so its Content-Encoding and Content-Length headers are dropped.
    """

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        raw = await self.inner.handle_async_request(request)
        limit = MAX_FILE_BYTES if request.url.path.endswith("/content") else MAX_REPLY_BYTES
        dropped = (b"content-encoding", b"content-length")
        headers = [(name, value) for name, value in raw.headers.raw if name.lower() not in dropped]
        return httpx2.Response(
            raw.status_code, headers=headers, stream=_Decoded(raw, limit), request=request, extensions=raw.extensions
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class _Decoded(httpx2.AsyncByteStream):
    def __init__(self, raw: httpx2.Response, limit: int) -> None:
        self.raw, self.limit = raw, limit

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for piece in self.raw.aiter_bytes():
            size += len(piece)
            if size > self.limit:
                await self.raw.aclose()
                encoding = self.raw.headers.get("content-encoding")
                decoded = f" once decoded ({encoding})" if encoding else ""
                raise ReplyTooLong(f"the reply is longer than {self.limit:,} bytes{decoded}")
            yield piece

    async def aclose(self) -> None:
        await self.raw.aclose()
