"""gen from Python: the same code paths as the command line, which is a thin layer over them.

    import gen

    recipe = gen.load_recipe("recipes/quickstart.yaml")      # or a dict, checked the same way
    folder = gen.run_recipe(recipe, output_dir="outputs")
    gen.summary(folder)                                        # a DataFrame: one row per config
    dataset = gen.load(folder)                                 # a DatasetDict: one Dataset per config
    gen.export_harness(folder, "beir", "exports/quickstart-beir")
    gen.evaluate(folder, "predictions.jsonl")                  # a DataFrame: scores per config and test

(`gen.run` and `gen.export` are packages of gen, hence `run_recipe` and `export_harness`.) Every function
raises `gen.errors.GenError` with the file, record and field of a problem, as the command line prints it.
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gen import progress, reading
from gen.errors import GenError

if TYPE_CHECKING:
    import pandas as pd
    from datasets import DatasetDict

    from gen.llm.engine import Engine
    from gen.llm.features import EndpointProbe
    from gen.llm.task import Task
    from gen.recipe import Recipe
    from gen.pipeline.shards import Prepared


def load_recipe(recipe: str | Path | Mapping[str, Any], *, source_dir: str | Path | None = None) -> Recipe:
    """A recipe file (or a mapping with the same keys, its relative paths taken from the working folder), checked
    whole: its own keys, then every product's options, as `gen validate` does before reading any source."""
    from gen.products.registry import bind
    from gen.recipe import load_recipe as read_file
    from gen.recipe import recipe_from_data

    folder = Path(source_dir) if source_dir is not None else None
    if isinstance(recipe, Mapping):
        loaded = recipe_from_data(dict(recipe), Path.cwd() / "(recipe given as a mapping)", folder)
    else:
        loaded = read_file(recipe, folder)
    bind(loaded)
    return loaded


def as_recipe(recipe: Any) -> Recipe:
    from gen.recipe import Recipe

    return recipe if isinstance(recipe, Recipe) else load_recipe(recipe)


def run_recipe(
    recipe: str | Path | Mapping[str, Any] | Recipe,
    output_dir: str | Path | None = None,
    *,
    limit: int | None = None,
    offline: bool = False,
    cache_dir: str | Path | None = None,
    workers: int = 1,
) -> Path:
    """Build every product of the recipe, validate it and write the run folder (`gen run`); returns its path."""
    from gen.llm.config import RunSettings
    from gen.pipeline.runner import run

    settings = RunSettings(offline=offline, cache_dir=Path(cache_dir) if cache_dir else None)
    out = Path(output_dir) if output_dir is not None else None
    return run(as_recipe(recipe), output_dir=out, limit=limit, llm_settings=settings, workers=workers)


def plan(
    recipe: str | Path | Mapping[str, Any] | Recipe, *, limit: int | None = None, cache_dir: str | Path | None = None
) -> pd.DataFrame:
    """Per LLM step: items, calls needed (first round), cached, at most (every retry), projected tokens and
    cost online, and the Batch API batches those calls fill and their cost that way (`gen plan`). No call is
    made and no key is needed."""
    import pandas as pd

    rows = []
    with planning(recipe, limit, cache_dir) as (steps, engine):
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


def validate(
    recipe: str | Path | Mapping[str, Any] | Recipe,
    *,
    source_dir: str | Path | None = None,
    cache_dir: str | Path | None = None,
    probe: bool = False,
) -> Validation:
    """Check everything `gen run` needs before the long work starts, and write nothing (`gen validate`): the
    recipe and every product's options, the sources, the timelines, every first-round LLM prompt rendered from
    its template, and the environment variable of each endpoint that still has calls to make. Raises GenError
    naming the first problem (all the unset variables at once). Without a cache yet, none is created: every
    call counts as needed.

    `probe`: also send each endpoint with calls to make a few small real requests (short timeout, nothing
    cached): does it answer, and does it have what its steps' calls need (log-probabilities, /completions with
    echo, the structured-output mode; gen/llm/features.py)? One GenError lists every endpoint that fails."""
    from gen.llm.features import endpoint_needs
    from gen.pipeline.shards import prepare

    loaded = recipe if not isinstance(recipe, (str, Path, Mapping)) else load_recipe(recipe, source_dir=source_dir)
    prepared = prepare(loaded)
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
    with planning(loaded, cache_dir=cache_dir, prepared=prepared) as (steps, engine):
        calling: set[str] = set()
        for name, tasks, _ in steps:
            found.calls_needed[name] = engine.plan(name, tasks).calls_needed
            if found.calls_needed[name]:
                calling |= {task.endpoint for task in tasks}
        refuse_unset_keys(loaded, calling)
        if probe:
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
    recipe: str | Path | Mapping[str, Any] | Recipe,
    limit: int | None = None,
    cache_dir: str | Path | None = None,
    prepared: Prepared | None = None,
) -> Iterator[tuple[list[tuple[str, list[Task], int]], Engine]]:
    """The recipe's LLM steps as (step, first-round tasks, most calls), and a planning engine (no network, no
    key), for plan, preview and validate (which gives the sources it has already read as `prepared`). They only
    read the cache: one that does not exist yet is not created (an empty one in a temporary folder stands in)."""
    from gen.llm.config import RunSettings
    from gen.llm.engine import Engine
    from gen.products.base import BuildContext
    from gen.pipeline.shards import prepare

    loaded = as_recipe(recipe)
    prepared = prepare(loaded, limit) if prepared is None else prepared
    units = prepared.units()
    ctx = BuildContext(loaded)
    with progress.task("rendering the LLM prompts"):
        steps = [step for bound in prepared.products if bound.written for step in bound.product.llm_tasks(units, ctx)]
    with contextlib.ExitStack() as stack:
        settings = RunSettings(cache_dir=Path(cache_dir) if cache_dir else None)
        if not settings.cache_path().exists():
            scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="gen-plan-"))
            settings = RunSettings(cache_dir=Path(scratch))
        yield steps, stack.enter_context(Engine(loaded.llm, settings, plan_only=True, templates_dir=loaded.templates))


def preview(
    recipe: str | Path | Mapping[str, Any] | Recipe,
    product: str,
    index: int = 0,
    *,
    limit: int | None = None,
    cache_dir: str | Path | None = None,
) -> str:
    """The prompt item `index` of the LLM product `product` would send, exactly as the endpoint would receive it,
    with its cache status (`gen preview`)."""
    with planning(recipe, limit, cache_dir) as (steps, engine):
        tasks = {name: step_tasks for name, step_tasks, _ in steps}.get(product)
        if tasks is None:
            raise GenError(
                f"no LLM product {product!r} in this recipe",
                file=recipe if isinstance(recipe, (str, Path)) else None,
                field="--product",
                expected=", ".join(name for name, _, _ in steps) or "a recipe with an LLM product",
            )
        if index >= len(tasks):
            raise GenError(f"index {index} is past the last item ({len(tasks) - 1})", field="--index")
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


def summary(run_folder: str | Path) -> pd.DataFrame:
    """One row per config of a run folder: its product, records, whether its product's validation passed, and
    the config's description (from run.json)."""
    import pandas as pd

    report = read_report(Path(run_folder))
    validation = report.get("validation", {})
    rows = [
        {
            "config": name,
            "product": info.get("product"),
            "records": info.get("records"),
            "validation_passed": (validation.get(info.get("product"), {}) or {}).get("passed"),
            "questions": "questions" in info,
            "description": info.get("description", ""),
        }
        for name, info in report["configs"].items()
    ]
    return pd.DataFrame(rows)


def read_report(folder: Path) -> dict:
    path = folder / "run.json"
    try:
        report = reading.read_json(path, "run.json written by gen run")
        report["configs"].items()
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as exc:
        raise GenError(
            f"not a run folder ({type(exc).__name__})", file=path, expected="run.json written by gen run"
        ) from None
    return report


def load(run_folder: str | Path) -> DatasetDict:
    """A finished run folder (or an export folder) as a `datasets.DatasetDict`, one Dataset per config, each with
    the features its product declares: what `datasets.load_dataset(folder, config)` gives, for every config."""
    from datasets import DatasetDict, load_dataset

    from gen.eval.dataset import finished_report

    folder = Path(run_folder)
    report = finished_report(folder, "loaded")
    split = report.get("split", "test")
    return DatasetDict({name: load_dataset(str(folder), name, split=split) for name in report["configs"]})


def export_harness(dataset: str | Path, format: str, output: str | Path, *, config: str | None = None) -> Path:
    """Write a dataset's questions in a harness's layout (`gen export`): locomo, longmemeval, beir, or an
    installed plugin's format."""
    from gen.export.harness.exporter import export as write_export

    write_export(Path(dataset), format, Path(output), config)
    return Path(output)


def evaluate(
    dataset: str | Path,
    predictions: str | Path,
    *,
    k: int | None = None,
    questions_from: str | Path | None = None,
) -> pd.DataFrame:
    """Scores of a predictions file (`gen eval`): one row per config and test, then per config its mean over
    tests and its pooled mean over questions."""
    from gen.eval.report import scores_table
    from gen.eval.score import evaluate as score

    subset = Path(questions_from) if questions_from is not None else None
    return scores_table(score(Path(dataset), Path(predictions), k, subset))
