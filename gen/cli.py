"""The `gen` command line. User errors (GenError) print one message and exit 2; --debug shows the traceback."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from gen.errors import GenError
from gen.export.cli import push

app = typer.Typer(add_completion=False, no_args_is_help=True, rich_markup_mode=None,
                  help="Build evaluation datasets for long-term-memory dialogue agents from multi-session corpora.")
err = Console(stderr=True, highlight=False, soft_wrap=True)
STATE = {"debug": False}


@app.callback()
def main_options(debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors.")) -> None:
    STATE["debug"] = debug


def say(message: str) -> None:
    err.print(message, markup=False)


@app.command()
def run(
    recipe: Path = typer.Argument(..., help="The recipe YAML file."),
    output_dir: Optional[Path] = typer.Option(None, "--output-dir", help="Write to DIR/<recipe name> (default: the recipe's output_dir, else ./outputs)."),
    limit: Optional[int] = typer.Option(None, "--limit", min=0, help="Use at most N conversations per source (a quick trial)."),
) -> None:
    """Build every product the recipe names, validate it, and write outputs/<name>/.

    Example: gen run recipes/quickstart.yaml --output-dir outputs
    """
    from gen.recipe import load_recipe
    from gen.runner import run as run_recipe

    loaded = load_recipe(recipe)
    final = run_recipe(loaded, output_dir=output_dir, limit=limit, say=say)
    say(f"wrote {final}")


@app.command()
def validate(recipe: Path = typer.Argument(..., help="The recipe YAML file.")) -> None:
    """Check the recipe, read its sources and build the timelines, without building or writing anything.

    Example: gen validate recipes/locomo-temporal.yaml
    """
    from gen.recipe import load_recipe
    from gen.runner import prepare

    loaded = load_recipe(recipe)
    prepared = prepare(loaded, say=say)
    responses = sum(len(t.responses) for t in prepared.timelines)
    say(f"recipe {loaded.name} is valid: {len(prepared.conversations)} conversations, {responses:,} responses "
        f"(padding included), products: {', '.join(entry.type for entry in loaded.products)}")


@app.command()
def products() -> None:
    """List the products a recipe can name under `products: - type: ...`.

    Example: gen products
    """
    from gen.products import REGISTRY

    width = max(len(name) for name in REGISTRY)
    for name, module in REGISTRY.items():
        typer.echo(f"{name.ljust(width)}  {module.DESCRIPTION}")


app.command()(push)  # `gen push`, defined with the Hub exporter in gen/export/cli.py


def main() -> None:
    try:
        app(standalone_mode=False)
    except GenError as exc:
        if STATE["debug"]:
            raise
        err.print(f"error: {exc}", markup=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("interrupted", markup=False)
        sys.exit(130)
    except Exception as exc:  # click's own usage errors
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Exit):
            sys.exit(exc.exit_code)
        if isinstance(exc, click.exceptions.Abort):
            sys.exit(1)
        raise
