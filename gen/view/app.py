"""The viewer's web app: Starlette routes that turn a page's data (gen/view/pages.py) into HTML through the
templates in templates/view/, and serve the stylesheet and icon from there too (no CDN, no network)."""

from __future__ import annotations

import mimetypes
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

import jinja2
from jinja2.sandbox import SandboxedEnvironment
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from gen.templating import builtin_templates_dir
from gen.view import pages, questions, rejects_compare
from gen.view.index import QueryError

STATIC_TYPES = {".css": "text/css", ".svg": "image/svg+xml", ".js": "text/javascript"}


def view_templates_dir() -> Path:
    return builtin_templates_dir() / "view"


@lru_cache(maxsize=1)
def environment() -> SandboxedEnvironment:
    """Sandboxed and strict like every template of gen, and escaping HTML (run data is shown, never trusted)."""
    env = SandboxedEnvironment(
        loader=jinja2.FileSystemLoader(str(view_templates_dir())),
        undefined=jinja2.StrictUndefined,
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["url"] = lambda text: quote(str(text), safe="")
    env.filters["number"] = lambda value: "" if value is None else f"{value:,}"
    env.filters["conversation_link"] = pages.conversation_link
    return env


def render(name: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    return HTMLResponse(environment().get_template(name).render(**context), status_code=status)


def make_app(viewer: pages.Viewer) -> Starlette:
    def page(build: Callable[[Request], tuple[str, dict[str, Any]]]) -> Callable[[Request], Response]:
        def handle(request: Request) -> Response:
            try:
                name, context = build(request)
            except pages.NotFound as exc:
                return render("error.html", {"folder": viewer.folder, "message": str(exc), "status": 404}, 404)
            except QueryError as exc:
                return render("error.html", {"folder": viewer.folder, "message": str(exc), "status": 400}, 400)
            return render(name, context)

        return handle

    def overview(request: Request) -> tuple[str, dict[str, Any]]:
        return "overview.html", pages.overview(viewer)

    def records(request: Request) -> tuple[str, dict[str, Any]]:
        return "records.html", pages.records(viewer, request.path_params["config"], request.query_params)

    def record(request: Request) -> tuple[str, dict[str, Any]]:
        row = int(request.path_params["row"]) - 1
        return "record.html", questions.record_by_row(viewer, request.path_params["config"], row)

    def question(request: Request) -> tuple[str, dict[str, Any]]:
        params = request.path_params
        return "record.html", questions.record_by_question(viewer, params["config"], params["question_id"])

    def conversation(request: Request) -> tuple[str, dict[str, Any]]:
        return "conversation.html", questions.conversation(viewer, request.path_params["conversation_id"])

    def rejects(request: Request) -> tuple[str, dict[str, Any]]:
        return "rejects.html", rejects_compare.rejects(viewer, request.query_params)

    def compare(request: Request) -> tuple[str, dict[str, Any]]:
        return "compare.html", rejects_compare.compare(viewer)

    def static(request: Request) -> Response:
        name = request.path_params["name"]
        path = view_templates_dir() / "static" / name
        if "/" in name or name.startswith(".") or not path.is_file():
            return Response("not found", status_code=404, media_type="text/plain")
        kind = STATIC_TYPES.get(path.suffix) or mimetypes.guess_type(name)[0] or "application/octet-stream"
        return Response(path.read_bytes(), media_type=kind, headers={"Cache-Control": "max-age=3600"})

    def icon(request: Request) -> Response:
        return RedirectResponse("/static/icon.svg", status_code=301)

    routes = [
        Route("/", page(overview)),
        Route("/records/{config}", page(records)),
        Route("/records/{config}/{row:int}", page(record)),
        Route("/questions/{config}/{question_id}", page(question)),
        Route("/conversations/{conversation_id:path}", page(conversation)),
        Route("/rejects", page(rejects)),
        Route("/compare", page(compare)),
        Route("/static/{name}", static),
        Route("/favicon.ico", icon),
    ]
    return Starlette(routes=routes)
