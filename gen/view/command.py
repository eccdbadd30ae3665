"""Serving a run folder in a local web app (`gen view RUN_FOLDER`, through gen.view_folder). The web libraries are
the optional `view` extra, imported only here, inside `serve`, so every other command starts without them."""

from __future__ import annotations

import errno
import importlib.util
import socket
from collections.abc import Callable
from pathlib import Path

from gen.about import DISTRIBUTION
from gen.callers import named
from gen.errors import GenError

EXTRA_MODULES = ("starlette", "uvicorn", "duckdb")


def require_view_extra() -> None:
    missing = [name for name in EXTRA_MODULES if importlib.util.find_spec(name) is None]
    if missing:
        raise GenError(
            f"gen view needs {', '.join(missing)}, which is not installed",
            expected=f"pip install '{DISTRIBUTION}[view]' (or, in a checkout, pip install -e '.[view]')",
        )


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything is printed: a port in use is one message, not a traceback."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as exc:
        raise GenError(
            f"cannot resolve the host ({exc.strerror})",
            field=named("--host", "ViewOptions.host"),
            expected="127.0.0.1, ::1 or a name of this machine",
        ) from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise GenError(
                f"port {port} on {host} is in use by another program",
                field=named("--port", "ViewOptions.port"),
                expected=f"another port, or {named('--port 0', 'port=0')} to take a free one",
            ) from None
        host_setting = named("--host", "ViewOptions.host")
        raise GenError(f"cannot listen on {host}:{port} ({exc.strerror})", field=host_setting) from None
    return sock


def serve(
    run_folder: Path, port: int, host: str, compare: Path | None, verdicts: Path | None, say: Callable[[str], None]
) -> None:
    """Serve the viewer over `run_folder` (and `compare` beside it, and `verdicts` on the TeaBag pages) until
    Ctrl-C; `say` gets the one line naming the address. The work of gen.view_folder (gen/api/tools.py)."""
    require_view_extra()
    import uvicorn

    from gen.view.app import make_app
    from gen.view.folder import open_folder
    from gen.view.index import Index
    from gen.view.pages import Viewer
    from gen.view.verdicts import read_verdicts, require_teabag

    folder = open_folder(run_folder)
    other = open_folder(compare) if compare is not None else None
    judged = read_verdicts(verdicts) if verdicts is not None else None
    if judged is not None:
        require_teabag(judged, folder.configs)
    sock = bind(host, port)
    index = Index(folder)
    try:
        index.start()
        shown_host = f"[{host}]" if ":" in host else host
        url = f"http://{shown_host}:{sock.getsockname()[1]}/"
        say(f"gen view: {folder.path} at {url} (Ctrl-C to stop)")
        config = uvicorn.Config(
            make_app(Viewer(folder, index, other, verdicts=judged)), log_level="warning", lifespan="off"
        )
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        index.close()
