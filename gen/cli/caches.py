"""`gen batches` (with `cancel` and `forget`) and `gen cache repair` (registered in gen/cli/main.py): the Batch
API batches an LLM cache sent, and repairing a damaged cache, each a thin layer over its function in
gen/api/tools.py."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.console import Console

from gen.cli.options import CACHE_DIR

err = Console(stderr=True, highlight=False, soft_wrap=True)


batches_app = typer.Typer(help="The Batch API batches an LLM cache knows.", invoke_without_command=True)


@batches_app.callback()
def batches(ctx: typer.Context, cache_dir: Path | None = CACHE_DIR) -> None:
    """List the batches sent from this cache: id, endpoint, step, status, requests done and failed, age.

    Example: gen batches --cache-dir ~/.cache/gen
    """
    if ctx.invoked_subcommand is not None:
        return
    import gen

    rows = gen.batches(cache_dir)
    if not rows:
        typer.echo("this cache has sent no batch")
        return
    typer.echo(f"{'batch':<34} {'endpoint':<12} {'step':<28} {'status':<11} {'done':>13} {'failed':>7} {'age':>7}")
    for row in rows:
        age = (time.time() - row.created) / 3600
        done = f"{row.completed:,}/{row.requests:,}"
        typer.echo(
            f"{row.id:<34} {row.endpoint:<12} {row.step:<28} {row.status:<11} {done:>13} {row.failed:>7,} {age:>6.1f}h"
        )


@batches_app.command("cancel")
def batches_cancel(
    batch_id: str = typer.Argument(..., help="A batch id from `gen batches`."), cache_dir: Path | None = CACHE_DIR
) -> None:
    """Ask the Batch API to cancel a batch this cache sent; its finished replies are collected by the next run.

    Example: gen batches cancel batch_abc123
    """
    import gen

    status = gen.cancel_batch(batch_id, cache_dir)
    err.print(f"batch {batch_id}: {status}")


@batches_app.command("forget")
def batches_forget(
    batch_id: str = typer.Argument(..., help="A batch id from `gen batches`."), cache_dir: Path | None = CACHE_DIR
) -> None:
    """Remove a batch from this cache: no run polls or collects it again, and its requests that have no reply in
    the cache are sent again by the next run. The endpoint is not told (cancel it first if it is still running).

    Example: gen batches forget batch_abc123
    """
    import gen

    forgotten = gen.forget_batch(batch_id, cache_dir)
    err.print(f"batch {batch_id} forgotten: the next run sends its requests that have no reply in the cache again")
    if forgotten.still_running:
        err.print(
            f"it was {forgotten.batch.status} when last polled: the endpoint may still run it, and gen can no longer "
            "cancel it"
        )


cache_app = typer.Typer(help="The LLM reply cache.", no_args_is_help=True)


@cache_app.command("repair")
def cache_repair(cache_dir: Path | None = CACHE_DIR) -> None:
    """Copy every readable reply of a damaged LLM cache into a new llm.sqlite; the damaged file is kept beside it.

    Example: gen cache repair --cache-dir ~/.cache/gen
    """
    import gen

    done = gen.repair_cache(cache_dir)
    lost_text = f"; {done.lost} damaged stretch(es) could not be read" if done.lost else ""
    err.print(f"kept {done.kept:,} replies in {done.cache}{lost_text}; the damaged file is {done.damaged_file}")
