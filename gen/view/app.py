"""The viewer's web app: Starlette routes that turn a page's data (gen/view/pages.py) into HTML through the
templates in templates/view/, and serve the stylesheet and icon from there too (no CDN, no network)."""

from __future__ import annotations

import mimetypes
import sys
import time
from collections.abc import Callable
from html import escape
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from gen.about import DISTRIBUTION
from gen.errors import shorten
from gen.templating import HtmlPages, builtin_templates_dir
from gen.view import pages, questions, rejects_compare, urls
from gen.view.tables import QueryError

STATIC_TYPES = {".css": "text/css", ".svg": "image/svg+xml", ".js": "text/javascript"}


def view_templates_dir() -> Path:
    return builtin_templates_dir() / "view"


PAGES = HtmlPages(
    view_templates_dir(),
    (
        ("url", lambda text: urls.part(str(text))),
        ("number", lambda value: "" if value is None else f"{value:,}"),
    ),
)


def render(name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    return HTMLResponse(PAGES.render(name, **context), status_code=status)


def error_page(viewer: pages.Viewer, status: int, message: str) -> HTMLResponse:
    """A 4xx answer: the error page with one sentence saying what is wrong with the address."""
    return render("error.html", {"folder": viewer.folder, "message": message, "status": status}, status)


def bug_page(viewer: pages.Viewer, request: Request, exc: BaseException) -> HTMLResponse:
    """Anything a page did not foresee is a bug of the viewer, not of the address: say so and what to report,
    never a traceback (the terminal running gen view gets one line naming it)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version(DISTRIBUTION)
    except PackageNotFoundError:
        release = "a checkout"
    what = f"{type(exc).__name__}: {shorten(str(exc), 200)}"
    print(f"gen view: bug on {request.url.path}: {what}", file=sys.stderr, flush=True)
    message = (
        f"This page failed inside gen view ({what}). This is a bug: please report it with this page's address "
        f"and your gen version ({release})."
    )
    try:
        return render("error.html", {"folder": viewer.folder, "message": message, "status": 500}, 500)
    except Exception:  # the template itself failed: still one sentence, in plain HTML
        return HTMLResponse(f"<p>{escape(message)}</p>", status_code=500)


MEMORY_WAIT_S = 15.0  # how long a page waits for DuckDB's memory while an index is being built


def built_when_memory_allows(
    build: Callable[[Request], tuple[str, dict[str, Any]]], request: Request
) -> tuple[str, dict[str, Any]]:
    """The page, built again (after a short pause) while DuckDB's memory cap is taken by an index being built:
    the word indexes are built under a small cap shared with the pages, and a page that finds it full only has
    to wait for the builder's next step, not fail."""
    import duckdb

    deadline = time.monotonic() + MEMORY_WAIT_S
    while True:
        try:
            return build(request)
        except duckdb.OutOfMemoryException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def make_app(viewer: pages.Viewer) -> Starlette:
    def page(build: Callable[[Request], tuple[str, dict[str, Any]]]) -> Callable[[Request], Response]:
        """Every page goes through here: 404 for what the run does not have, 400 for an address that asks
        something the run cannot answer, the bug page for anything else."""

        def handle(request: Request) -> Response:
            try:
                name, context = built_when_memory_allows(build, request)
                return render(name, context)
            except pages.NotFound as exc:
                return error_page(viewer, 404, str(exc))
            except QueryError as exc:
                return error_page(viewer, 400, str(exc))
            except Exception as exc:
                return bug_page(viewer, request, exc)

        return handle

    def overview(request: Request) -> tuple[str, dict[str, Any]]:
        return "overview.html", pages.overview(viewer)

    def records(request: Request) -> tuple[str, dict[str, Any]]:
        return "records.html", pages.records(viewer, request.path_params["config"], request.query_params)

    def record(request: Request) -> tuple[str, dict[str, Any]]:
        params = request.path_params
        return "record.html", questions.record_by_number(viewer, params["config"], params["number"])

    def question(request: Request) -> tuple[str, dict[str, Any]]:
        params = request.path_params
        wanted = urls.read_id(params["question_id"])
        return "record.html", questions.record_by_question(viewer, params["config"], wanted)

    def conversation(request: Request) -> tuple[str, dict[str, Any]]:
        wanted = urls.read_id(request.path_params["conversation_id"])
        return "conversation.html", questions.conversation(viewer, wanted)

    def rejects(request: Request) -> tuple[str, dict[str, Any]]:
        return "rejects.html", rejects_compare.rejects(viewer, request.query_params)

    def compare(request: Request) -> tuple[str, dict[str, Any]]:
        return "compare.html", rejects_compare.compare(viewer)

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        path = view_templates_dir() / "static" / name
        if "/" in name or name.startswith(".") or not path.is_file():
            return error_page(viewer, 404, f"the viewer has no file {name!r}")
        kind = STATIC_TYPES.get(path.suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
        return Response(path.read_bytes(), media_type=kind, headers={"Cache-Control": "max-age=3600"})

    def icon(request: Request) -> Response:
        return RedirectResponse("/static/icon.svg", status_code=301)

    async def http_error(request: Request, exc: Exception) -> Response:
        """Addresses no route answers (404), a method other than GET (405)."""
        status = exc.status_code if isinstance(exc, HTTPException) else 400
        message = HTTP_MESSAGES.get(status, "this address cannot be answered")
        return error_page(viewer, status, message)

    async def server_error(request: Request, exc: Exception) -> Response:
        return bug_page(viewer, request, exc)

    routes = [
        Route("/", page(overview)),
        Route("/records/{config}", page(records)),
        Route("/records/{config}/{number}", page(record)),
        Route("/questions/{config}/{question_id:path}", page(question)),
        Route("/conversations/{conversation_id:path}", page(conversation)),
        Route("/rejects", page(rejects)),
        Route("/compare", page(compare)),
        Route("/static/{name}", static),
        Route("/favicon.ico", icon),
    ]
    handlers = {HTTPException: http_error, Exception: server_error}
    return Starlette(routes=routes, exception_handlers=handlers)


HTTP_MESSAGES = {
    404: "the viewer has no page at this address",
    405: "the viewer only answers GET requests",
}
