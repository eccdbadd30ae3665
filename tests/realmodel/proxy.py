"""A counting HTTP proxy on 127.0.0.1 for the real-model tests.

It sits between gen and the model server, forwards every request unchanged and keeps its own record of the
chat and completions requests it passed on: how many arrived, and what the server answered. The tests compare gen's
accounting (run.json) and gen's rejects with this record, so the numbers they check do not come from gen.
"""

from __future__ import annotations

import http.client
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

CHAT_PATH = "/v1/chat/completions"
COMPLETIONS_PATH = "/v1/completions"  # a scored text (quality labels' fluency)
HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "content-length", "host", "proxy-connection", "upgrade"}


@dataclass
class Exchange:
    """One chat request the proxy passed on, and what came back (status None: the server never answered)."""

    body: dict[str, Any]
    status: int | None = None
    content: str | None = None  # choices[0].message.content of a 200 reply
    finish_reason: str | None = None


@dataclass
class Record:
    exchanges: list[Exchange] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class CountingProxy:
    """``with CountingProxy("http://127.0.0.1:PORT/v1") as proxy:`` gen talks to ``proxy.base_url``."""

    def __init__(self, upstream_base_url: str, timeout_s: float = 600.0) -> None:
        parts = urlsplit(upstream_base_url)
        if parts.hostname is None or parts.port is None:
            raise ValueError(f"upstream must name a host and port: {upstream_base_url}")
        self.upstream = (parts.hostname, parts.port)
        self.timeout_s = timeout_s
        self.record = Record()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="counting-proxy", daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def count(self) -> int:
        """Chat requests received (and passed on to the server)."""
        with self.record.lock:
            return len(self.record.exchanges)

    @property
    def exchanges(self) -> list[Exchange]:
        with self.record.lock:
            return list(self.record.exchanges)

    def replies(self) -> list[str]:
        """The content of every chat reply the server sent back."""
        return [e.content for e in self.exchanges if e.content is not None]

    def __enter__(self) -> CountingProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as the openai client expects

            def do_GET(self) -> None:
                self._forward()

            def do_POST(self) -> None:
                self._forward()

            def log_message(self, format: str, *args: Any) -> None:  # quiet: pytest shows failures, not traffic
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                exchange = None
                if self.command == "POST" and self.path.split("?")[0] in (CHAT_PATH, COMPLETIONS_PATH):
                    exchange = Exchange(body=json.loads(body or b"{}"))
                    with proxy.record.lock:
                        proxy.record.exchanges.append(exchange)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
                upstream = http.client.HTTPConnection(*proxy.upstream, timeout=proxy.timeout_s)
                try:
                    upstream.request(self.command, self.path, body=body or None, headers=headers)
                    response = upstream.getresponse()
                    data = response.read()
                    status, reply_headers = response.status, response.getheaders()
                except OSError as exc:
                    data = json.dumps({"error": {"message": f"proxy: upstream failed: {exc}"}}).encode()
                    status, reply_headers = 502, [("Content-Type", "application/json")]
                finally:
                    upstream.close()
                if exchange is not None:
                    note_reply(exchange, status, data)
                try:
                    self.send_response(status)
                    for name, value in reply_headers:
                        if name.lower() not in HOP_BY_HOP:
                            self.send_header(name, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:  # the client gave up on this request (a stopped run cancels what is in flight)
                    self.close_connection = True

        return Handler


def note_reply(exchange: Exchange, status: int, data: bytes) -> None:
    exchange.status = status
    if status != 200:
        return
    try:
        choice = json.loads(data)["choices"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return
    exchange.content = (choice.get("message") or {}).get("content") if "message" in choice else choice.get("text")
    exchange.finish_reason = choice.get("finish_reason")
