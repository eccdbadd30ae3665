"""The rest of gen's work, each as a function: look at a run in the browser (`gen view`), the Batch API batches a
cache sent (`gen batches`, `cancel`, `forget`), repairing a damaged cache (`gen cache repair`), the recipe's JSON
Schema and options reference (`gen schema`) and the installed products (`gen products`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from gen.api.calls import CallOptions, api_call
from gen.callers import named
from gen.errors import GenError

if TYPE_CHECKING:
    from gen.llm.batch.ledger import BatchRow


class ViewOptions(CallOptions):
    """Where `view_folder` listens (`port`, 0 for any free one; `host`, by default only this machine), a second
    run to `compare` with, the `verdicts` file gen judge wrote for the run's TeaBag answers, and `progress`: this
    call's displays (the viewer's indexing of the run)."""

    port: int = Field(default=8765, ge=0, le=65535)
    host: str = "127.0.0.1"
    compare: Path | None = None
    verdicts: Path | None = None


@api_call(ViewOptions)
def view_folder(run_folder: str | Path, options: ViewOptions | None = None, say: Callable[[str], None] = print) -> None:
    """Serve a run folder (or a `gen push` export folder) in a local web app until Ctrl-C (`gen view`; needs the
    view extra). It reads the folder and never writes into it. `say` gets the line naming the address."""
    from gen.view.command import require_view_extra, serve

    chosen = options if options is not None else ViewOptions()
    require_view_extra()
    serve(Path(run_folder), chosen.port, chosen.host, chosen.compare, chosen.verdicts, say)


@api_call()
def batches(cache_dir: str | Path | None = None) -> list[BatchRow]:
    """The Batch API batches sent from this cache (`gen batches`): id, endpoint, step, status, counts, age."""
    from gen.llm.batch.commands import known_batches

    return known_batches(folder_of(cache_dir))


@api_call()
def cancel_batch(batch_id: str, cache_dir: str | Path | None = None) -> str:
    """Ask the Batch API to cancel a batch this cache sent (`gen batches cancel`); returns its status."""
    from gen.llm.batch.commands import cancel_batch as cancel

    return cancel(folder_of(cache_dir), batch_id)


@dataclass(frozen=True)
class Forgotten:
    """A batch forget_batch removed, as last polled; `still_running`: the endpoint may still run it (it was not
    finished when last polled), and gen can no longer cancel it."""

    batch: BatchRow
    still_running: bool


@api_call()
def forget_batch(batch_id: str, cache_dir: str | Path | None = None) -> Forgotten:
    """Remove a batch from this cache (`gen batches forget`): the next run sends again its requests that have no
    reply cached. The endpoint is not told."""
    from gen.llm.batch.commands import forget_batch as forget
    from gen.llm.batch.ledger import ABANDONED, TERMINAL

    row = forget(folder_of(cache_dir), batch_id)
    return Forgotten(row, row.status not in TERMINAL | {ABANDONED})


@dataclass(frozen=True)
class Repaired:
    """What repair_cache did: replies kept in the new cache file, damaged stretches lost, where the old file is."""

    cache: Path
    kept: int
    lost: int
    damaged_file: Path


@api_call()
def repair_cache(cache_dir: str | Path | None = None) -> Repaired:
    """Copy every readable reply of a damaged LLM cache into a new llm.sqlite, keeping the damaged file beside it
    (`gen cache repair`)."""
    from gen.llm.cache import repair
    from gen.llm.config import RunSettings

    path = RunSettings(cache_dir=folder_of(cache_dir)).cache_path()
    if not path.is_file():
        where = named("--cache-dir", "repair_cache(cache_dir=...)")
        raise GenError("there is no LLM cache here", file=path, expected=f"the {where} of the damaged cache")
    kept, lost, aside = repair(path)
    return Repaired(path, kept, lost, aside)


@api_call()
def schema(*, markdown: bool = False, builtin: bool = False, output: str | Path | None = None) -> str:
    """The recipe's JSON Schema, or with `markdown` its options reference (`gen schema`): every installed product
    and source format, or with `builtin` only gen's own. With `output`, the file is replaced whole too."""
    from gen.jsonl import replace_file
    from gen.recipe_schema import options_reference, products, recipe_schema, schema_text, source_formats

    made = recipe_schema(products(builtin_only=builtin), source_formats(builtin_only=builtin))
    text = options_reference(made) if markdown else schema_text(made)
    if output is not None:
        replace_file(Path(output), text.encode("utf-8"), "options reference" if markdown else "recipe schema")
    return text


@api_call()
def list_products() -> dict[str, str]:
    """Every product a recipe can name under `products: - type: ...`, with its description (`gen products`)."""
    from gen.products.registry import REGISTRY

    return {name: product.description for name, product in REGISTRY.items()}


def folder_of(cache_dir: str | Path | None) -> Path | None:
    return Path(cache_dir) if cache_dir is not None else None
