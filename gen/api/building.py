"""Building a dataset from a recipe: run it, plan its LLM calls, validate it, preview one prompt (`gen run`,
`gen plan`, `gen validate`, `gen preview`). Each takes a recipe as a path, a mapping or a Recipe and binds it once
(gen/api/recipes.py)."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

from gen import progress
from gen.api.calls import CallOptions, api_call
from gen.api.recipes import bound
from gen.callers import named
from gen.errors import GenError
from gen.pipeline.options import RunOptions

if TYPE_CHECKING:
    import pandas as pd

    from gen.llm.engine import Engine
    from gen.llm.probes.features import EndpointProbe
    from gen.llm.task import Task
    from gen.pipeline.shards import Prepared
    from gen.recipe import Recipe


class PlanOptions(CallOptions):
    """What `plan` and `preview` read: the first `limit` conversations (None: all), and the LLM cache in
    `cache_dir` (default: $GEN_CACHE_DIR, else ~/.cache/gen); `progress`: this call's displays."""

    limit: int | None = Field(default=None, ge=0, le=1_000_000_000)
    cache_dir: Path | None = None


class ValidateOptions(CallOptions):
    """What `validate` reads and does: `source_dir`, where inputs the recipe names by file name alone are looked
    for first; `cache_dir`, the LLM cache; `probe`, also send each endpoint with calls to make a few small
    requests; `progress`: this call's displays."""

    source_dir: Path | None = None
    cache_dir: Path | None = None
    probe: bool = False


@api_call(RunOptions)
def run(recipe: str | Path | Mapping[str, Any] | Recipe, options: RunOptions | None = None) -> Path:
    """Build every product of the recipe, validate it and write the run folder (`gen run`); returns its path.
    `options` (gen.RunOptions): where the run goes, how much it reads, who does the work, how its LLM calls go."""
    from gen.pipeline.runner import run as run_pipeline

    chosen = options if options is not None else RunOptions()
    if chosen.executor == "ray":
        from gen.pipeline.executors import require_ray

        require_ray()  # before reading any source: say at once that Ray is missing
    loaded = bound(recipe, chosen.source_dir)
    return run_pipeline(loaded.recipe, chosen, loaded.products)


@api_call(PlanOptions)
def plan(recipe: str | Path | Mapping[str, Any] | Recipe, options: PlanOptions | None = None) -> pd.DataFrame:
    """Per LLM step: items, calls needed (first round), cached, at most (every retry), projected tokens and
    cost online, and the Batch API batches those calls fill and their cost that way (`gen plan`). No call is
    made and no key is needed."""
    import pandas as pd

    chosen = options if options is not None else PlanOptions()
    rows = []
    with planning(recipe, chosen.limit, chosen.cache_dir) as (steps, engine):
        for name, tasks, most in steps:
            step = engine.plan(name, tasks)
            rows.append(
                {
                    "step": name,
                    "items": step.items,
                    "needed": step.calls_needed,
                    "cached": step.calls_cached,
                    "at_most": most,
                    "input_tokens": step.projected_input_tokens,
                    "output_tokens": step.projected_output_tokens,
                    "cost_usd": step.projected_cost_usd,
                    "batches": step.batches,
                    "batch_cost_usd": step.projected_batch_cost_usd,
                }
            )
    return pd.DataFrame(rows, columns=list(PLAN_COLUMNS))


@dataclass
class Validation:
    """What `gen validate` found: the recipe reads, its sources parse, its first-round prompts render, and the
    API keys the calls still needed will use are set (a call already cached needs no key)."""

    recipe: str
    conversations: int
    responses: int | None  # None: no product needs timelines, so none were built
    products: list[str]  # "name", or "name (needed, not written)"
    calls_needed: dict[str, int] = field(default_factory=dict)  # per LLM step: first-round calls not cached
    probes: list[EndpointProbe] | None = None  # with probe=True: per endpoint with calls to make, what it showed


@api_call(ValidateOptions)
def validate(recipe: str | Path | Mapping[str, Any] | Recipe, options: ValidateOptions | None = None) -> Validation:
    """Check everything `gen run` needs before the long work starts, and write nothing (`gen validate`): the
    recipe and every product's options, the sources, the timelines, every first-round LLM prompt rendered from
    its template, and the environment variable of each endpoint that still has calls to make. Raises GenError
    naming the first problem (all the unset variables at once). Without a cache yet, none is created: every
    call counts as needed.

    `options.probe`: also send each endpoint with calls to make a few small real requests (short timeout, nothing
    cached): does it answer, and does it have what its steps' calls need (log-probabilities, /completions with
    echo, the structured-output mode; gen/llm/features.py)? One GenError lists every endpoint that fails."""
    from gen.llm.probes.features import endpoint_needs
    from gen.pipeline.shards import prepare

    chosen = options if options is not None else ValidateOptions()
    recipe_bound = bound(recipe, chosen.source_dir)
    loaded = recipe_bound.recipe
    prepared = prepare(loaded, products=recipe_bound.products)
    count = len(prepared.conversations)
    responses = None
    if prepared.needs_timelines:
        responses = 0
        with progress.task("placing conversations on the clock", count, "conversations") as bar:
            for position in range(count):
                responses += len(prepared.timeline(position).responses)
                bar.advance()
    found = Validation(
        recipe=loaded.name,
        conversations=count,
        responses=responses,
        products=[b.name + ("" if b.written else " (needed, not written)") for b in prepared.products],
    )
    with planning(None, cache_dir=chosen.cache_dir, prepared=prepared) as (steps, engine):
        calling: set[str] = set()
        for name, tasks, _ in steps:
            found.calls_needed[name] = engine.plan(name, tasks).calls_needed
            if found.calls_needed[name]:
                calling |= {task.endpoint for task in tasks}
        refuse_unset_keys(loaded, calling)
        if chosen.probe:
            found.probes = engine.probe(endpoint_needs((n, t) for n, t, _ in steps if found.calls_needed[n]))
    if found.probes:
        refuse_failed_probes(loaded, found.probes)
    return found


def refuse_failed_probes(recipe: Recipe, probes: list[EndpointProbe]) -> None:
    """One error listing every probed endpoint that does not answer or lacks a feature its steps need (each
    one's whole reasons are logged first: the error's message is kept short)."""
    import logging

    failed = [probe for probe in probes if not probe.ok]
    for probe in failed:
        logging.getLogger(__name__).warning("[probe] %s", probe.line())
    if failed:
        raise GenError(
            f"{len(failed)} of {len(probes)} endpoints cannot serve this run: "
            + "; ".join(probe.summary() for probe in failed),
            file=recipe.file,
            field="llm",
            expected="each endpoint answering, with what its steps' calls need",
        )


def refuse_unset_keys(recipe: Recipe, endpoints: set[str]) -> None:
    """One error naming every endpoint among `endpoints` whose API-key variable is unset."""
    import os

    unset = sorted(
        (name, config.api_key_env)
        for name, config in recipe.llm.items()
        if name in endpoints and config.api_key_env and not os.environ.get(config.api_key_env)
    )
    if unset:
        listed = ", ".join(f"{variable} (endpoint {name})" for name, variable in unset)
        raise GenError(
            f"the run will call the model but these environment variables are not set: {listed}",
            file=recipe.file,
            field="llm",
            expected="each API key in its variable, or api_key_env: null for a server that takes no key",
        )


@contextmanager
def planning(
    recipe: str | Path | Mapping[str, Any] | Recipe | None,
    limit: int | None = None,
    cache_dir: str | Path | None = None,
    prepared: Prepared | None = None,
) -> Iterator[tuple[list[tuple[str, list[Task], int]], Engine]]:
    """The recipe's LLM steps as (step, first-round tasks, most calls), and a planning engine (no network, no
    key), for plan, preview and validate (which gives the sources it has already read as `prepared`). They only
    read the cache: one that does not exist yet is not created (an empty one in a temporary folder stands in)."""
    from gen.llm.config import RunSettings
    from gen.llm.engine import Engine
    from gen.pipeline.shards import prepare
    from gen.products.base import BuildContext

    if prepared is None:
        assert recipe is not None, "planning needs a recipe or what was prepared from one"
        recipe_bound = bound(recipe)
        prepared = prepare(recipe_bound.recipe, limit, recipe_bound.products)
    loaded = prepared.recipe
    units = prepared.units()
    ctx = BuildContext(loaded)
    with progress.task("rendering the LLM prompts"):
        steps = [step for bound in prepared.products if bound.written for step in bound.product.llm_tasks(units, ctx)]
    with contextlib.ExitStack() as stack:
        settings = RunSettings(cache_dir=Path(cache_dir) if cache_dir else None)
        if not settings.cache_path().exists():
            scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="gen-plan-"))
            settings = RunSettings(cache_dir=Path(scratch))
        yield steps, stack.enter_context(Engine(loaded.llm, settings, plan_only=True, templates=loaded.templates))


@api_call(PlanOptions)
def preview(
    recipe: str | Path | Mapping[str, Any] | Recipe, product: str, index: int = 0, options: PlanOptions | None = None
) -> str:
    """The prompt item `index` (0 is the first) of the LLM product `product` would send, exactly as the endpoint
    would receive it, with its cache status (`gen preview`)."""
    chosen = options if options is not None else PlanOptions()
    if isinstance(index, bool) or not isinstance(index, int) or index < 0:  # -1 would quietly be the last item
        raise GenError(f"no item {index!r}", field=named("--index", "preview(index=...)"), expected="0 or more")
    with planning(recipe, chosen.limit, chosen.cache_dir) as (steps, engine):
        tasks = {name: step_tasks for name, step_tasks, _ in steps}.get(product)
        if tasks is None:
            raise GenError(
                f"no LLM product {product!r} in this recipe",
                file=recipe if isinstance(recipe, (str, Path)) else None,
                field=named("--product", "preview(product=...)"),
                expected=", ".join(name for name, _, _ in steps) or "a recipe with an LLM product",
            )
        if index >= len(tasks):
            where = named("--index", "preview(index=...)")
            raise GenError(f"index {index} is past the last item ({len(tasks) - 1})", field=where)
        return engine.preview([tasks[index]])


PLAN_COLUMNS = (
    "step",
    "items",
    "needed",
    "cached",
    "at_most",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "batches",
    "batch_cost_usd",
)
