"""`gen view` (registered in gen/cli/main.py): a run folder in a local web app, through gen.view_folder
(gen/api/tools.py; the web libraries are the view extra, imported only when the command runs)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from gen.cli.options import number


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
    import gen

    def say(line: str) -> None:
        typer.echo(line)
        sys.stdout.flush()

    gen.view_folder(run_folder, gen.ViewOptions(port=port, host=host, compare=compare, verdicts=verdicts), say=say)
