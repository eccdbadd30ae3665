"""`gen run`, `gen plan`, `gen validate` and `gen preview` (registered in gen/cli/main.py): building a dataset from
a recipe, each a thin layer over its function in gen/api/building.py."""

from __future__ import annotations

import logging
import math
from enum import StrEnum
from pathlib import Path

import typer

from gen.cli.options import (
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

log = logging.getLogger(__name__)

RECIPE = typer.Argument(..., metavar="RECIPE", help="The recipe YAML file.")
LIMIT = number(None, "--limit", help="Use at most N conversations per source (a quick trial).")


class ExecutorName(StrEnum):
    local = "local"
    ray = "ray"


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
    import gen

    settings = run_settings(offline, cache_dir, max_concurrency, requests_per_minute, tokens_per_minute)
    extra = {"batch_export": batch_export, "batch_import": import_files(batch_import)}
    settings = settings.model_copy(update={**extra, "request_processes": request_processes})
    options = gen.RunOptions(
        output_dir=output_dir,
        limit=limit,
        workers=workers,
        executor=executor.value,
        ray_address=ray_address,
        source_dir=source_dir,
        llm=settings,
    )
    final = gen.run(recipe, options)
    log.info("wrote %s", final)


def plan(recipe: Path = RECIPE, limit: int | None = LIMIT, cache_dir: Path | None = CACHE_DIR) -> None:
    """Show, per LLM step, the calls needed, those already cached, and projected tokens and cost. Calls nothing.

    "needed" is the first round; "at most" adds every regeneration, verify and correction round allowed.
    "batches" and "batch $": the batches the needed calls fill through the Batch API, and what they cost that way.

    Example: gen plan recipes/locomo-temporal.yaml
    """
    import gen

    table = gen.plan(recipe, gen.PlanOptions(limit=limit, cache_dir=cache_dir))
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
    import gen

    typer.echo(gen.preview(recipe, product, index, gen.PlanOptions(limit=limit, cache_dir=cache_dir)))


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
    import gen

    found = gen.validate(recipe, gen.ValidateOptions(source_dir=source_dir, cache_dir=cache_dir, probe=probe))
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
