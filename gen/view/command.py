"""`gen view RUN_FOLDER`: open a run folder in a local web app. The web libraries are the optional `view` extra,
imported only here, inside the command, so every other command starts without them."""

from __future__ import annotations

import errno
import importlib.util
import socket
import sys
from pathlib import Path

import typer

from gen.about import DISTRIBUTION
from gen.cli_options import number
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
            field="--host",
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
                field="--port",
                expected="another port, or --port 0 to take a free one",
            ) from None
        raise GenError(f"cannot listen on {host}:{port} ({exc.strerror})", field="--host") from None
    return sock


def view(
    run_folder: Path = typer.Argument(
        ..., metavar="RUN_FOLDER", help="A run folder (outputs/NAME, .NAME.stopped...) or a gen push export folder."
    ),
    port: int = number(8765, "--port", help="The port to listen on (0: any free port)."),
    host: str = typer.Option(
        "127.0.0.1", "--host", help="The address to listen on; the default lets only this machine in."
    ),
    compare: Path | None = typer.Option(
        None, "--compare", help="A second run folder, shown beside the first on the Compare page."
    ),
    verdicts: Path | None = typer.Option(
        None,
        "--verdicts",
        help="The verdicts file gen judge wrote for this run's TeaBag answers: each TeaBag question's page then "
        "shows its verdict and the answer judged.",
    ),
) -> None:
    """Look at a run in your browser: overview, records with filters, conversations on a time axis, questions
    with their relevant responses, rejects, and a comparison with a second run. Reads the folder, never writes
    into it. Needs the view extra: pip install 'gen-memory[view]'.

    Example: gen view outputs/quickstart
    """
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
        typer.echo(f"gen view: {folder.path} at {url} (Ctrl-C to stop)")
        sys.stdout.flush()
        config = uvicorn.Config(
            make_app(Viewer(folder, index, other, verdicts=judged)), log_level="warning", lifespan="off"
        )
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
        index.close()
