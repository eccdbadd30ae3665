"""The viewer's app served in this process: a GET through the real Starlette app (routing, error pages and all)
without a socket, so tests can ask for thousands of addresses in seconds."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlsplit

INDEX_TIMEOUT_S = 120  # guards a hung index build; measures nothing


class Client:
    def __init__(self, app) -> None:
        self.app = app

    def get(self, url: str) -> tuple[int, str]:
        """Status and body of GET `url` (a path with its query string), the path percent-decoded as uvicorn
        does before routing."""
        parts = urlsplit(url)
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": unquote(parts.path),
            "raw_path": parts.path.encode("ascii"),
            "root_path": "",
            "query_string": parts.query.encode("ascii"),
            "headers": [(b"host", b"testserver")],
            "client": ("127.0.0.1", 1),
            "server": ("testserver", 80),
        }
        sent: list[dict] = []

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            sent.append(message)

        async def call() -> None:
            try:
                await self.app(scope, receive, send)
            except Exception:  # Starlette re-raises after its error page is sent; the page is what we judge
                if not sent:
                    raise

        asyncio.run(call())
        status = next(m["status"] for m in sent if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return status, body.decode("utf-8")


@contextmanager
def viewer_client(folder: Path, verdicts: Path | None = None, **index_options) -> Iterator[Client]:
    """The app over `folder` (with `gen view --verdicts` when given), its index built to the end before the first
    request."""
    from gen.view.app import make_app
    from gen.view.folder import open_folder
    from gen.view.index import Index
    from gen.view.pages import Viewer

    opened = open_folder(folder)
    index = Index(opened, **index_options)
    try:
        index.start()
        deadline = time.monotonic() + INDEX_TIMEOUT_S
        for name in index.states:
            assert index.wait(name, max(0.0, deadline - time.monotonic())), index.states[name]
        for name in index.folder.configs:  # and each word index whole (a search before is partial, and says so)
            while index.finder(name)[1] is not None and time.monotonic() < deadline:
                time.sleep(0.01)
        viewer = Viewer(opened, index)
        if verdicts is not None:
            from gen.view.verdicts import read_verdicts

            viewer.verdicts = read_verdicts(verdicts)
        yield Client(make_app(viewer))
    finally:
        index.close()
