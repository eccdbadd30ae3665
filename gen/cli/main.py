"""The `gen` command line. User errors (GenError) print one message and exit with the error's code (2 for bad
input, 1 for a run that stopped early, 130/143/129 for one stopped by Ctrl-C/SIGTERM/SIGHUP); usage errors print
the usage line and exit 2; a defect prints one line naming the file that holds its traceback and exits 1; --debug
shows the traceback."""

from __future__ import annotations

import contextlib
import logging
import signal
import sys
import warnings
from typing import NoReturn, TextIO

import typer
from rich.console import Console

from gen import callers, progress, stopping
from gen.about import DISTRIBUTION
from gen.cli import building, caches, catalog, publishing, scoring, view
from gen.conversation import DataWarning
from gen.crash import summary, write_crash_log
from gen.errors import GenError, Stopped
from gen.logs import configure, unconfigure

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["--help", "-h"]},  # every command and group inherits it
    help="Build evaluation datasets for long-term-memory dialogue agents from multi-session corpora.",
)
err = Console(stderr=True, highlight=False, soft_wrap=True)
log = logging.getLogger(__name__)
STATE = {"debug": False}


def show_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"gen {version(DISTRIBUTION)}")
        raise typer.Exit()


@app.callback()
def main_options(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
    verbose: bool = typer.Option(False, "--verbose", "-v", help="Also show debug messages (retries, choices made)."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Show only warnings and errors (and no progress display)."),
    version: bool = typer.Option(
        False, "--version", callback=show_version, is_eager=True, help="Print gen's version and exit."
    ),
) -> None:
    if verbose and quiet:
        raise GenError("--verbose and --quiet contradict each other", field="--quiet", expected="one of them")
    STATE["debug"] = debug
    configure(1 if verbose else -1 if quiet else 0)
    progress.enable(not quiet)


# every command, a thin layer over one function of the Python API (gen/api/); tests/test_one_door.py holds each
# to its function
app.command()(building.run)
app.command()(building.plan)
app.command()(building.preview)
app.command()(building.validate)
app.command()(catalog.products)
app.add_typer(caches.cache_app, name="cache")
app.add_typer(caches.batches_app, name="batches")
app.command()(publishing.push)
app.command()(publishing.export)
app.command("import-predictions")(publishing.import_predictions)  # a harness's results back into gen's predictions
app.command("eval")(scoring.evaluate)
app.command()(scoring.baseline)
app.command()(scoring.judge)
app.command()(view.view)  # the local web viewer (the view extra)
app.command()(catalog.schema)


def main(process: bool = False) -> None:
    """Run the command line; every way out of it ends here with one message and an exit code. SIGTERM and SIGHUP
    stop a command as Ctrl-C does (gen/stopping.py); a defect prints one line and leaves its traceback in a
    file (gen/crash.py). `process`: this process ends with the command (the `gen` program), so the signal
    handlers before are not put back (a program that calls main() gets them back)."""
    with stopping.installed(restore=not process):  # first: a stop from now on takes the path Ctrl-C takes
        try:
            run_command()
        finally:
            progress.disable()  # the next command in this process (a test, a program) starts silent
            unconfigure()  # and logs as a library does
            callers.command_line(False)  # and an API call after it names its own fields again


def entry() -> None:
    """The `gen` program (and `python -m gen`)."""
    main(process=True)


def run_command() -> NoReturn:
    STATE["debug"] = False  # set again by the callback, once the options before the command are read
    configure(0)  # likewise
    progress.enable()  # likewise
    callers.command_line()  # errors name this command's options, not the API's fields (gen/callers.py)
    try:
        refuse_empty_arguments(sys.argv[1:])
        with warnings.catch_warnings():
            warnings.simplefilter("always", DataWarning)
            warnings.showwarning = show_warning
            code = app(standalone_mode=False, prog_name="gen")
    except GenError as exc:
        if STATE["debug"]:
            raise
        say(f"{'stopped' if isinstance(exc, Stopped) else 'error'}: {exc}")
        sys.exit(exc.exit_code)
    except KeyboardInterrupt as exc:  # a stop outside a run (a run reports its own stop as Stopped)
        interrupted(stopping.signal_of(exc))
    except USAGE_ERRORS as exc:
        if STATE["debug"]:
            raise
        show_usage_error(exc)
    except typer.Abort:
        say("aborted")
        sys.exit(1)
    except Exception as exc:  # a defect: not the user's to fix, so one line and the traceback in a file
        if STATE["debug"]:
            raise
        defect(exc)
    if code == 130:  # typer turns an interrupt inside a command into exit code 130, whichever signal it was
        interrupted(stopping.signal_of())
    sys.exit(code if isinstance(code, int) else 0)


def refuse_empty_arguments(arguments: list[str]) -> None:
    """An empty argument is refused, naming it: given to a path it would read as the current folder ("" is "."
    to pathlib), so a command would act on something the user never named."""
    for position, value in enumerate(arguments):
        option, equals, given = value.partition("=") if value.startswith("--") else ("", "", value)
        if given == "" and (equals or not option):
            before = arguments[position - 1] if position else ""
            where = option or (before if before.startswith("-") else f"argument {position + 1}")
            raise GenError("'' is empty", field=where, expected="a value")


def say(line: str) -> None:
    """One line on stderr, the command's last: a progress display still shown is closed first, so the line is not
    drawn over. A terminal that hung up (SIGHUP) cannot take it, and that must not become a traceback."""
    progress.disable()
    with contextlib.suppress(OSError, ValueError):
        err.print(line, markup=False)


def defect(exc: Exception) -> NoReturn:
    """One line for an exception that is a bug, naming the file that holds its traceback; exit 1."""
    path = write_crash_log(exc)
    where = f"its traceback is in {path}" if path is not None else "its traceback could not be written to a file"
    notes = "".join(f"; {note}" for note in getattr(exc, "__notes__", ()))
    say(
        f"error: a bug in gen (or in a plugin it loaded) stopped this command: {summary(exc)}; {where}. Please "
        f"report it with that file (gen --debug ... shows the traceback here instead){notes}"
    )
    sys.exit(1)


def show_usage_error(exc: Exception) -> None:
    """The usage line, a pointer to --help and the error (as click shows them), then exit 2."""
    show = getattr(exc, "show", None)
    if callable(show):
        show()
    else:
        err.print(f"Error: {exc}", markup=False)
    sys.exit(getattr(exc, "exit_code", 2))


def interrupted(signum: int) -> NoReturn:
    """The message and exit code of a command stopped by Ctrl-C, SIGTERM or SIGHUP (128 + its number)."""
    said = "interrupted" if signum == signal.SIGINT else stopping.reason(signum)
    say(f"{said}; nothing was written")
    sys.exit(stopping.exit_code(signum))


def show_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """Data warnings (input accepted, but maybe not what was meant) as one line each; others as Python shows
    them."""
    if issubclass(category, DataWarning):  # through sys.stderr: above a progress display, when one is shown
        with contextlib.suppress(OSError, ValueError):
            print(f"warning: {message}", file=sys.stderr, flush=True)
    else:
        PYTHON_SHOW_WARNING(message, category, filename, lineno, file, line)


def usage_error_types() -> tuple[type[Exception], ...]:
    """The parser's usage errors (they have `show` and `exit_code`): typer vendors click as typer._click from
    0.2x on, whose errors derive from typer.TyperException; older typer raises click's own."""
    if hasattr(typer, "TyperException"):
        return (typer.TyperException,)
    import click

    return (click.ClickException,)


USAGE_ERRORS = usage_error_types()
PYTHON_SHOW_WARNING = warnings.showwarning
