"""The `gen` command line. User errors (GenError) print one message and exit with the error's code (2 for bad
input, 1 for a run that stopped early, 130/143/129 for one stopped by Ctrl-C/SIGTERM/SIGHUP); usage errors print
the usage line and exit 2; a defect prints one line naming the file that holds its traceback and exits 1; --debug
shows the traceback."""

from __future__ import annotations

import contextlib
import logging
import math
import signal
import sys
import warnings
from enum import StrEnum
from pathlib import Path
from typing import NoReturn, TextIO

import typer
from rich.console import Console

from gen import progress, stopping
from gen.about import DISTRIBUTION
from gen.cli_eval import baseline, evaluate
from gen.cli_options import (
    CACHE_DIR,
    MAX_CONCURRENCY,
    OFFLINE,
    REQUEST_PROCESSES,
    REQUESTS_PER_MINUTE,
    SOURCE_DIR,
    TOKENS_PER_MINUTE,
    import_files,
    number,
    run_settings,
)
from gen.cli_schema import schema
from gen.conversation import DataWarning
from gen.crash import summary, write_crash_log
from gen.errors import GenError, Stopped
from gen.export.harness.command import export, import_predictions
from gen.export.push import push
from gen.llm.batch_command import batches_app
from gen.logs import configure
from gen.teabag_judge.cli import judge
from gen.view.command import view

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


RECIPE = typer.Argument(..., metavar="RECIPE", help="The recipe YAML file.")
LIMIT = number(None, "--limit", help="Use at most N conversations per source (a quick trial).")


class ExecutorName(StrEnum):
    local = "local"
    ray = "ray"


@app.command()
def run(
    recipe: Path = RECIPE,
    output_dir: Path | None = typer.Option(
        None, "--output-dir", help="Write to DIR/<recipe name> (default: the recipe's output_dir, else ./outputs)."
    ),
    limit: int | None = LIMIT,
    source_dir: Path | None = SOURCE_DIR,
    offline: bool = OFFLINE,
    cache_dir: Path | None = CACHE_DIR,
    max_concurrency: int | None = MAX_CONCURRENCY,
    requests_per_minute: float | None = REQUESTS_PER_MINUTE,
    tokens_per_minute: float | None = TOKENS_PER_MINUTE,
    workers: int | None = number(
        None,
        "--workers",
        help="Processes for the products that need no LLM, one conversation per task (same output for any N; "
        "default 1; never more than there are conversations; with --executor ray: the local Ray instance's CPUs, "
        "default and at most the machine's).",
    ),
    executor: ExecutorName = typer.Option(
        ExecutorName.local,
        "--executor",
        help="Who runs the products that need no LLM: local (this process or a pool) or ray (Ray tasks; needs "
        "pip install 'gen-memory[ray]'). LLM products always run in this process (one cache, one set of limits).",
    ),
    ray_address: str | None = typer.Option(
        None,
        "--ray-address",
        help="With --executor ray: connect to this Ray cluster (auto, host:port, ray://host:10001) instead of "
        "starting a local instance.",
    ),
    batch_export: Path | None = typer.Option(
        None,
        "--batch-export",
        help="Write the LLM requests of the next round as batch files (OpenAI batch layout) into DIR and stop, "
        "instead of sending them.",
    ),
    batch_import: list[Path] = typer.Option(
        [],
        "--batch-import",
        help="Read a batch output file (or every .jsonl in a folder) into the cache first; repeat for several.",
    ),
    request_processes: int = REQUEST_PROCESSES,
) -> None:
    """Build every product the recipe names, validate it, and write outputs/<name>/.

    LLM settings given here change how fast calls go, never the data, so they enter no hash.

    Example: gen run recipes/quickstart.yaml --output-dir outputs
    """
    from gen.recipe import load_recipe
    from gen.pipeline.runner import run as run_recipe

    if ray_address is not None and executor is not ExecutorName.ray:
        raise GenError("--ray-address is only for --executor ray", field="--ray-address", expected="--executor ray")
    if executor is ExecutorName.ray:
        from gen.pipeline.executors import require_ray

        require_ray()  # before reading any source: say at once that Ray is missing
    settings = run_settings(offline, cache_dir, max_concurrency, requests_per_minute, tokens_per_minute)
    extra = {"batch_export": batch_export, "batch_import": import_files(batch_import)}
    settings = settings.model_copy(update={**extra, "request_processes": request_processes})
    loaded = load_recipe(recipe, source_dir)
    final = run_recipe(
        loaded,
        output_dir=output_dir,
        limit=limit,
        llm_settings=settings,
        workers=workers,
        executor=executor.value,
        ray_address=ray_address,
    )
    log.info("wrote %s", final)


@app.command()
def plan(recipe: Path = RECIPE, limit: int | None = LIMIT, cache_dir: Path | None = CACHE_DIR) -> None:
    """Show, per LLM step, the calls needed, those already cached, and projected tokens and cost. Calls nothing.

    "needed" is the first round; "at most" adds every regeneration, verify and correction round allowed.
    "batches" and "batch $": the batches the needed calls fill through the Batch API, and what they cost that way.

    Example: gen plan recipes/locomo-temporal.yaml
    """
    from gen.api import plan as plan_table

    table = plan_table(recipe, limit=limit, cache_dir=cache_dir)
    if table.empty:
        typer.echo("this recipe has no LLM steps")
        return
    typer.echo(
        f"{'step':<28} {'items':>7} {'needed':>8} {'cached':>8} {'at most':>8} {'input tok':>11} "
        f"{'output tok':>11} {'cost $':>9} {'batches':>7} {'batch $':>9}"
    )
    for row in table.itertuples():
        cost, batch_cost = (
            "?" if value is None or value != value else dollars(value) for value in (row.cost_usd, row.batch_cost_usd)
        )
        typer.echo(
            f"{row.step:<28} {row.items:>7,} {row.needed:>8,} {row.cached:>8,} {row.at_most:>8,} "
            f"{row.input_tokens:>11,} {row.output_tokens:>11,} {cost:>9} {row.batches:>7,} {batch_cost:>9}"
        )


def dollars(amount: float) -> str:
    """A cost with cents, and below a dollar with two significant digits, so a small cost never shows as 0.00:
    1234.5 → "1,234.50", 0.5 → "0.50", 0.0123 → "0.012", 0.00042 → "0.00042"."""
    if amount <= 0 or amount >= 1:
        return f"{amount:,.2f}"
    decimals = max(2, 1 - math.floor(math.log10(amount)))
    return f"{amount:.{decimals}f}"


@app.command()
def preview(
    recipe: Path = RECIPE,
    product: str = typer.Option(..., "--product", help="The product type whose prompt to show."),
    index: int = number(0, "--index", help="Which item (0-based, in output order)."),
    limit: int | None = LIMIT,
    cache_dir: Path | None = CACHE_DIR,
) -> None:
    """Print the rendered prompt of one item of an LLM product, exactly as the endpoint would receive it.

    Example: gen preview recipes/locomo-temporal.yaml --product time_content_questions --index 3
    """
    from gen.api import preview as prompt_of

    typer.echo(prompt_of(recipe, product, index, limit=limit, cache_dir=cache_dir))


@app.command()
def validate(
    recipe: Path = RECIPE,
    source_dir: Path | None = SOURCE_DIR,
    cache_dir: Path | None = CACHE_DIR,
    probe: bool = typer.Option(
        False,
        "--probe",
        help="Also send each endpoint with calls to make a few small requests: does it answer, and does it have "
        "the log-probabilities, echo or structured-output mode the products need? Nothing is cached.",
    ),
) -> None:
    """Check what `gen run` will need, writing nothing: the recipe, its sources, the timelines, every first-round
    LLM prompt, and the API-key variables of the endpoints with calls not yet cached.

    Example: gen validate recipes/locomo-temporal.yaml --probe
    """
    from gen.api import validate as check

    found = check(recipe, source_dir=source_dir, cache_dir=cache_dir, probe=probe)
    if found.responses is None:
        detail = "no product needs timelines, so none were built"
    else:
        detail = f"{found.responses:,} responses (padding included)"
    calls = "".join(f"; {step}: {needed:,} calls to make" for step, needed in found.calls_needed.items())
    log.info(
        f"recipe {found.recipe} is valid: {found.conversations} conversations, {detail}; products: "
        f"{', '.join(found.products)}{calls}"
    )
    if found.probes is not None:
        for line in [probed.line() for probed in found.probes] or ["no endpoint to probe: every call is cached"]:
            log.info(f"[probe] {line}")


@app.command()
def products() -> None:
    """List the products a recipe can name under `products: - type: ...`.

    Example: gen products
    """
    from gen.products.registry import REGISTRY

    width = max(len(name) for name in REGISTRY)
    for name, product in REGISTRY.items():
        typer.echo(f"{name.ljust(width)}  {product.description}")


cache_app = typer.Typer(help="The LLM reply cache.", no_args_is_help=True)
app.add_typer(cache_app, name="cache")


@cache_app.command("repair")
def cache_repair(cache_dir: Path | None = CACHE_DIR) -> None:
    """Copy every readable reply of a damaged LLM cache into a new llm.sqlite; the damaged file is kept beside it.

    Example: gen cache repair --cache-dir ~/.cache/gen
    """
    from gen.llm.cache import repair
    from gen.llm.config import RunSettings

    path = RunSettings(cache_dir=cache_dir).cache_path()
    if not path.is_file():
        raise GenError("there is no LLM cache here", file=path, expected="the --cache-dir of the damaged cache")
    kept, lost, aside = repair(path)
    lost_text = f"; {lost} damaged stretch(es) could not be read" if lost else ""
    err.print(f"kept {kept:,} replies in {path}{lost_text}; the damaged file is {aside}")


app.add_typer(batches_app, name="batches")  # `gen batches`, defined with the Batch API in gen/llm/batch_command.py
app.command()(push)  # `gen push`, defined with the Hub exporter in gen/export/push.py
app.command()(export)  # `gen export`, defined with the harness exports in gen/export/harness/command.py
app.command("import-predictions")(import_predictions)  # a harness's results back into gen's predictions
app.command("eval")(evaluate)  # `gen eval` and `gen baseline`, the scoring commands in gen/cli_eval.py
app.command()(baseline)
app.command()(judge)  # `gen judge`, defined with the TeaBag judge in gen/teabag_judge/cli.py
app.command()(view)  # `gen view`, the local web viewer in gen/view/ (the view extra)
app.command()(schema)  # `gen schema`, the recipe's JSON Schema and options reference (gen/cli_schema.py)


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


def entry() -> None:
    """The `gen` program (and `python -m gen`)."""
    main(process=True)


def run_command() -> NoReturn:
    STATE["debug"] = False  # set again by the callback, once the options before the command are read
    configure(0)  # likewise
    progress.enable()  # likewise
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
