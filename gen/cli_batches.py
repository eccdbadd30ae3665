"""The `gen batches` commands (registered in gen/cli.py): the Batch API batches an LLM cache sent, cancelling one
and forgetting one. What they do and say is gen/llm/batch/commands.py; here only arguments and printing (typer
stays out of gen/llm). Heavy imports happen inside the functions."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from gen.cli_options import CACHE_DIR

err = Console(stderr=True, highlight=False, soft_wrap=True)


batches_app = typer.Typer(help="The Batch API batches an LLM cache knows.", invoke_without_command=True)


@batches_app.callback()
def batches(ctx: typer.Context, cache_dir: Path | None = CACHE_DIR) -> None:
    """List the batches sent from this cache: id, endpoint, step, status, requests done and failed, age.

    Example: gen batches --cache-dir ~/.cache/gen
    """
    if ctx.invoked_subcommand is not None:
        return
    from gen.llm.batch.commands import batch_table, known_batches

    rows = known_batches(cache_dir)
    if not rows:
        typer.echo("this cache has sent no batch")
        return
    for line in batch_table(rows):
        typer.echo(line)


@batches_app.command("cancel")
def batches_cancel(
    batch_id: str = typer.Argument(..., help="A batch id from `gen batches`."), cache_dir: Path | None = CACHE_DIR
) -> None:
    """Ask the Batch API to cancel a batch this cache sent; its finished replies are collected by the next run.

    Example: gen batches cancel batch_abc123
    """
    from gen.llm.batch.commands import cancel_batch

    status = cancel_batch(cache_dir, batch_id)
    err.print(f"batch {batch_id}: {status}")


@batches_app.command("forget")
def batches_forget(
    batch_id: str = typer.Argument(..., help="A batch id from `gen batches`."), cache_dir: Path | None = CACHE_DIR
) -> None:
    """Remove a batch from this cache: no run polls or collects it again, and its requests that have no reply in
    the cache are sent again by the next run. The endpoint is not told (cancel it first if it is still running).

    Example: gen batches forget batch_abc123
    """
    from gen.llm.batch.commands import forget_batch, forget_warning

    row = forget_batch(cache_dir, batch_id)
    err.print(f"batch {batch_id} forgotten: the next run sends its requests that have no reply in the cache again")
    warning = forget_warning(row)
    if warning is not None:
        err.print(warning)
