"""The viewer's app in this process, fetched page by page through ASGI (no server, no browser): for tests of what a
page holds, which run in milliseconds a page."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

READY_TIMEOUT_S = 60  # guards a hung index; measures nothing


@dataclass
class Client:
    app: Any

    def get(self, url: str) -> tuple[int, str]:
        """(status, body) of a GET of `url` (a path with its query, percent-encoded as a link holds it)."""
        parts = urlsplit(url)
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": "GET",
            "scheme": "http",
            "path": unquote(parts.path),
            "raw_path": parts.path.encode(),
            "query_string": parts.query.encode(),
            "root_path": "",
            "headers": [(b"host", b"testserver")],
            "client": ("127.0.0.1", 1),
            "server": ("testserver", 80),
        }
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        asyncio.run(self.app(scope, receive, send))
        status = next(m["status"] for m in sent if m["type"] == "http.response.start")
        body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
        return status, body.decode("utf-8")


@contextmanager
def viewer_client(folder: Path, verdicts: Path | None = None) -> Iterator[Client]:
    """The app over `folder` (with `gen view --verdicts` when given), once every config is indexed."""
    from gen.view.app import make_app
    from gen.view.folder import open_folder
    from gen.view.index import Index
    from gen.view.pages import Viewer

    opened = open_folder(folder)
    index = Index(opened, threads=1)
    try:
        index.start()
        for name in index.states:
            assert index.wait(name, READY_TIMEOUT_S), (name, index.states[name])
        viewer = Viewer(opened, index)
        if verdicts is not None:
            from gen.view.verdicts import read_verdicts

            viewer.verdicts = read_verdicts(verdicts)
        yield Client(make_app(viewer))
    finally:
        index.close()
