"""One run: recipe → sources → conversations → timelines → products → validators → writer.

The work is done conversation by conversation (gen/pipeline/shards.py) and streamed to the run folder, so memory
follows the largest conversation rather than the corpus. For each conversation the products are built in
the order the registry gives (each after the products whose records it needs), each product's records are
validated there and then, counted, and appended to its config's file. Two stages (gen/pipeline/executors.py):

  local    products that need no LLM: one conversation per task, in this process or, with `workers > 1`,
           in a pool of processes whose results are written in conversation order (the same bytes);
  llm      products that call the LLM (and what they need, rebuilt but not written again): batches of
           conversations in this process, which holds the run's one engine (one cache, one set of limits);
           in a batch, each conversation's products that need no LLM first, then the LLM products together.

A run with LLM products whose other products would run in this process too (no pool, no Ray) has only the llm
stage, which writes them: each conversation is read, placed on the clock and built once.

Every per-conversation choice is seeded from (recipe seed, conversation id), so neither the number of
workers nor the batching changes a byte of output.
"""

from __future__ import annotations

import contextlib
import logging
import platform
import threading
from collections import Counter, defaultdict
from collections.abc import Generator, Iterator
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gen import progress, stopping
from gen.about import DISTRIBUTION
from gen.callers import named
from gen.errors import GenError, Stopped
from gen.export.card import render_card
from gen.jsonl import write_json
from gen.llm.config import RunSettings
from gen.logs import run_log
from gen.pipeline.executors import RayConnection, llm_results, local_results, ray_results
from gen.pipeline.options import RunOptions
from gen.pipeline.shards import Prepared, ShardResult, prepare, stage_products, uses_llm
from gen.pipeline.writer import RunFolder, ShardWriter, write_rejects
from gen.products.checks import Checks
from gen.products.registry import Bound, bind
from gen.provenance import portable_recipe, public_llm_report, public_origin
from gen.recipe import Recipe
from gen.write_guard import refuse_writing_into

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from gen.llm.engine import Engine

# run.json names gen itself "gen"; its distribution on the package index is DISTRIBUTION. The others are the
# libraries whose releases can change what a run writes (sqlglot rewrites the SQL labels, pyarrow writes the
# parquet, num2words spells numbers, jinja2 renders every wording, orjson and dateutil read and write records,
# phonenumbers finds the numbers `redact:` replaces)
PACKAGES = {"gen": DISTRIBUTION} | {
    name: name
    for name in (
        "datasets",
        "openai",
        "jinja2",
        "num2words",
        "pydantic",
        "huggingface-hub",
        "sqlglot",
        "pyarrow",
        "orjson",
        "python-dateutil",
        "phonenumbers",
        "lemminflect",  # which phrases temporal_reasoning asks about
        "nltk",  # gen eval --answers (its stemmer)
    )
}


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name, distribution in PACKAGES.items():
        try:
            versions[name] = metadata.version(distribution)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def output_folder(recipe: Recipe, output_dir: Path | None) -> Path:
    base = output_dir or recipe.output_dir or Path("outputs")
    return Path(base) / recipe.name


# --- the run --------------------------------------------------------------------------------------------


class Tallies:
    """Running totals over every shard: checks per product, counts per config, seconds per step."""

    def __init__(self, products: list[Bound]) -> None:
        self.checks = {b.name: Checks() for b in products if b.written}
        self.counts: dict[str, Counter] = {}
        self.seconds: defaultdict[str, float] = defaultdict(float)

    def add(self, result: ShardResult) -> None:
        for name, checks in result.checks.items():
            self.checks[name].merge(checks)
        for config, counts in result.counts.items():
            self.counts.setdefault(config, Counter()).update(counts)
        for step, seconds in result.seconds.items():
            self.seconds[step] += seconds


def run(recipe: Recipe, options: RunOptions | None = None, products: list[Bound] | None = None) -> Path:
    """Build, validate and write the run. `options` are the run's settings beside the recipe (RunOptions; its
    LLM settings never enter the data); `products` the recipe's bound products, when the caller bound them
    already (gen.run does: a recipe is bound once per command). Every message is also kept in the run's log
    file, beside the LLM cache (gen/logs.py)."""
    options = options or RunOptions()
    refuse_writing_into(run_outputs(recipe, options), recipe_inputs(recipe, options.llm), adds_to=adds_to())
    with run_log(log_path(recipe, options.llm)):
        return build_and_publish(recipe, options, bind(recipe) if products is None else products)


def build_and_publish(recipe: Recipe, options: RunOptions, products: list[Bound]) -> Path:
    ray: RayConnection | None = None
    engine: Engine | None = None
    try:
        if any(uses_llm(b.name, products) for b in products):  # made first: its request processes start meanwhile
            from gen.llm.engine import Engine  # only runs with LLM products load the engine

            engine = Engine(recipe.llm, options.llm, templates=recipe.templates)
        if options.executor == "ray":
            prepared, ray = prepare_beside_ray(recipe, options, products)
        else:
            prepared = prepare(recipe, options.limit, products)
        final = build_and_write(prepared, engine, options, ray)
    finally:
        if engine is not None:
            engine.close()
        if ray is not None:  # the Ray stage closes it when it ends; not if the run ends before
            ray.close()
    if recipe.export.hub is not None:  # `export: {hub: ...}`: publish the run just written
        from gen.export.hub import push_after_run

        push_after_run(final, recipe.export.hub, recipe.templates)
    return final


def prepare_beside_ray(recipe: Recipe, options: RunOptions, products: list[Bound]) -> tuple[Prepared, RayConnection]:
    """The sources loaded in a thread while Ray starts in this one (its driver must be the main thread): Ray's
    start, about 2 s, passes while they load instead of after. Should either fail, the error is raised here
    and Ray, if it started, is shut down."""
    loaded: dict[str, Any] = {}

    def load() -> None:
        try:
            loaded["prepared"] = prepare(recipe, options.limit, products)
        except BaseException as error:  # raised again below, in the run's thread
            loaded["error"] = error

    thread = threading.Thread(target=load, name="gen-prepare", daemon=True)  # not waited for if Ray fails
    thread.start()
    connection = RayConnection(options.workers, options.ray_address)
    try:
        while thread.is_alive():
            thread.join(0.1)  # in short waits, so that Ctrl-C is not held up
        if "error" in loaded:
            raise loaded["error"]
    except BaseException:
        connection.close()
        raise
    return loaded["prepared"], connection


def build_and_write(
    prepared: Prepared, engine: Engine | None, options: RunOptions, ray: RayConnection | None = None
) -> Path:
    """Run the stages and write the run folder: the stage that needs no LLM on `ray` when given, else in this
    process or a pool of `options.workers` processes."""
    recipe = prepared.recipe
    final = output_folder(recipe, options.output_dir)
    products = prepared.products
    tallies = Tallies(products)
    with RunFolder(final) as folder:
        shards = ShardWriter(folder.path, recipe.split)
        report: dict | None = None
        try:
            with product_bars(products, len(prepared.conversations)) as bars:
                for results in stages(prepared, products, engine, options.workers, ray, shards):
                    with contextlib.closing(results):  # on the way out: stop the workers before the folder is kept
                        for result in results:
                            with stopping.held():  # a shard is written and counted together, or not at all
                                shards.write(result)
                                tallies.add(result)
                            for name, conversations in result.built.items():
                                bars[name].advance(conversations)
            shards.close()
            with stopping.held(), progress.task("writing run.json, rejects.jsonl and README.md"):
                # a stop that comes now keeps the finished folder, report and all
                report = finish_folder(folder.path, prepared, tallies, engine, final)
        except (Exception, KeyboardInterrupt) as exc:
            shards.close()
            stop = keep_stopped(folder, prepared, tallies, engine, final, stop_of(exc), report)
            if isinstance(exc, (GenError, KeyboardInterrupt)):
                raise stop from None
            exc.add_note(stop.message)  # the CLI's one line for a defect says where the run was kept
            raise
        failed = [name for name, result in report["validation"].items() if not result["passed"]]
        if failed:
            log_failures(report["validation"])
            kept = folder.keep_at("failed")
            raise GenError(
                f"validation failed for {', '.join(failed)}; nothing was published. The records and "
                f"run.json are kept for inspection in {kept}",
                file=recipe.file,
                exit_code=1,
            )
    return final


@contextlib.contextmanager
def product_bars(products: list[Bound], conversations: int) -> Iterator[dict[str, progress.Bar]]:
    """A progress bar per product written, counting its conversations built, checked and written. The shards
    say what they built (ShardResult.built), wherever they ran: a worker process draws nothing itself."""
    with contextlib.ExitStack() as stack:
        yield {
            bound.name: stack.enter_context(progress.task(f"building {bound.name}", conversations, "conversations"))
            for bound in products
            if bound.written
        }


def rejected_lines(report: dict) -> list[str]:
    """One line per LLM product that lost items, read from run.json's one count of them (`llm.products`)."""
    products = (report.get("llm") or {}).get("products") or {}
    return [
        f"{product}: {fates['rejected']:,} of {fates['items']:,} items rejected (reasons and raw replies in "
        "rejects.jsonl)"
        for product, fates in products.items()
        if fates.get("rejected")
    ]


def finish_folder(folder: Path, prepared: Prepared, tallies: Tallies, engine: Engine | None, final: Path) -> dict:
    """Write run.json, rejects.jsonl, recipe.yaml and README.md once every shard is written, and log each
    config's count and validation; returns the report."""
    recipe = prepared.recipe
    report = run_report(prepared, prepared.products, tallies, engine, final)
    report["rejects"] = write_rejects(folder, prepared.products, engine)
    write_provenance(folder, final, recipe, report)
    card = render_card(report, recipe.templates, folder=folder, previous=final / "README.md", target=final)
    (folder / "README.md").write_text(card, encoding="utf-8")
    for name, info in report["configs"].items():
        passed = report["validation"][info["product"]]["passed"]
        log.info("%s: %s records, validation %s", name, f"{info['records']:,}", "passed" if passed else "FAILED")
        if missing := info.get("summary", {}).get("not_produced"):
            which = "that test" if len(missing) == 1 else "those tests"
            log.info("%s: no question for %s: nothing in these conversations fits %s", name, ", ".join(missing), which)
    for line in rejected_lines(report):  # last: a passed validation must not hide what was left out
        log.info("%s", line)
    return report


def log_failures(validation: dict[str, Any]) -> None:
    """Each failed check of each product with its first example, one line each, before the run's error (which
    names only the products: run.json holds every example)."""
    for product, result in validation.items():
        for name, check in result["checks"].items():
            if check["failed"]:
                example = (check.get("examples") or [""])[0]
                failed = f"{check['failed']:,} of {check['checked']:,}"
                log.error("%s: %s failed for %s%s", product, name, failed, f"; first: {example}" if example else "")


def keep_stopped(
    folder: RunFolder,
    prepared: Prepared,
    tallies: Tallies,
    engine: Engine | None,
    final: Path,
    stop: Stopped,
    finished: dict | None = None,
) -> Stopped:
    """Keep what a stopped run made (records, rejects, run.json with the reason) in `.<name>.stopped`; `stop`
    comes back with a message that says where and how to resume. `finished`: the report, when the run had
    written its folder before the stop (its rejects are in rejects.jsonl already). Stop signals that come
    meanwhile are dropped: the stop is already under way, and its report is written whole."""
    with stopping.ignored():
        kept = folder.keep_at("stopped")
        report = finished or run_report(prepared, prepared.products, tallies, engine, final)
        report["stopped"] = {"reason": str(stop), "exit_code": stop.exit_code}
        if finished is None:
            report["rejects"] = write_rejects(folder.path, prepared.products, engine, stop.rejects)
        write_provenance(folder.path, final, prepared.recipe, report)
    cached = " (completed LLM calls are cached, so none is made twice)" if engine is not None else ""
    resume = stop.resume or f"run the same command again{cached}"
    return Stopped(
        f"{stop}; kept the records so far, rejects.jsonl ({report['rejects']:,}) and run.json with the stop "
        f"reason in {kept} ({final} is unchanged); to resume, {resume}",
        exit_code=stop.exit_code,
    )


def stop_of(exc: BaseException) -> Stopped:
    """The stop to report for whatever ended the run early; an interrupt names its signal and exits with its
    code (gen/stopping.py)."""
    if isinstance(exc, Stopped):
        return exc
    if isinstance(exc, KeyboardInterrupt):
        signum = stopping.signal_of(exc)
        return Stopped(stopping.reason(signum), exit_code=stopping.exit_code(signum))
    if isinstance(exc, GenError):
        return Stopped(str(exc), exit_code=exc.exit_code)
    return Stopped(f"internal error: {type(exc).__name__}: {exc}")


def log_path(recipe: Recipe, settings: RunSettings) -> Path:
    return settings.cache_path().parent / "logs" / f"{recipe.name}.log"


def adds_to() -> tuple[str, ...]:
    """A folder the run adds request files to: it may hold the files it imports."""
    return (named("--batch-export", "RunSettings.batch_export"),)


def run_outputs(recipe: Recipe, options: RunOptions) -> dict[str, Path | None]:
    """Everything a run writes, named as the user sets it: the run folder (replaced whole), the LLM cache and
    the run's log (files in the cache folder), the batch request folder."""
    settings = options.llm
    cache = named("--cache-dir", "RunSettings.cache_dir")
    return {
        named("--output-dir", "RunOptions.output_dir"): output_folder(recipe, options.output_dir),
        cache: settings.cache_path(),
        f"{cache} (the run's log)": log_path(recipe, settings),
        named("--batch-export", "RunSettings.batch_export"): settings.batch_export,
    }


def recipe_inputs(recipe: Recipe, settings: RunSettings | None = None) -> dict[str, Path | None]:
    """Files and folders the run reads, named as the user sets them: a run never writes over or inside them."""
    inputs: dict[str, Path | None] = {named("RECIPE", "recipe"): recipe.file}
    inputs |= {f"sources[{i}].path": source.path for i, source in enumerate(recipe.sources)}
    inputs |= {"timeline.padding.path": recipe.timeline.padding.path, "templates_dir": recipe.templates_dir}
    imports = settings.batch_import if settings is not None else ()
    imported = named("--batch-import", "RunSettings.batch_import")
    inputs |= {f"{imported} file {i + 1}": path for i, path in enumerate(imports)}
    return inputs


def write_provenance(folder: Path, final: Path, recipe: Recipe, report: dict) -> None:
    """run.json and a recipe.yaml that rebuilds the run from anywhere (its paths point from `final`)."""
    (folder / "recipe.yaml").write_text(portable_recipe(recipe, final), encoding="utf-8")
    write_json(folder / "run.json", report)


def stages(
    prepared: Prepared,
    products: list[Bound],
    engine: Engine | None,
    workers: int | None,
    ray: RayConnection | None = None,
    writer: ShardWriter | None = None,
) -> Iterator[Generator[ShardResult, None, None]]:
    if engine is not None and ray is None and (workers is None or workers <= 1):
        # everything runs in this process: one stage, so each conversation is read, placed on the clock and
        # built once, where a second stage would build again what the LLM products need
        yield llm_results(prepared, products, engine)
        return
    local = stage_products(products, llm=False)
    if local:
        if ray is not None:  # Ray tasks for this stage only; the LLM stage below stays in this process
            yield ray_results(prepared, local, ray, writer.spool_folder() if writer else None)
        else:
            spool = writer.spool_folder() if writer is not None and workers is not None and workers > 1 else None
            yield local_results(prepared, local, workers, spool)
    if engine is not None:
        yield llm_results(prepared, stage_products(products, llm=True), engine)


def run_report(prepared: Prepared, products: list[Bound], tallies: Tallies, engine: Engine | None, final: Path) -> dict:
    """run.json; it names nothing of this machine (the recipe.yaml next to it has the paths)."""
    recipe = prepared.recipe
    report: dict[str, Any] = {
        "recipe": {
            "name": recipe.name,
            "file": recipe.file.name,
            "fingerprint": recipe.fingerprint,
            "seed": recipe.seed,
        },
        "packages": package_versions(),
        "split": recipe.split,
        "sources": [{**source, "origin": public_origin(source["origin"])} for source in prepared.sources],
        "configs": {},
        "validation": {},
        "timings_s": dict(prepared.timings),
    }
    if prepared.redaction is not None:  # the recipe's `redact:` settings (names counted) and what it replaced
        report["redaction"] = prepared.redaction
    for bound in products:
        if not bound.written:
            continue
        product = bound.product
        for spec in product.configs:
            counts = tallies.counts.get(spec.name, Counter())
            info: dict[str, Any] = {
                "records": counts["records", ""],
                "path": f"{spec.name}/{recipe.split}.jsonl",
                "description": spec.description,
                "product": product.name,
            }
            if spec.questions is not None:  # what scoring and the harness exports read of it
                info["questions"] = spec.questions.declared()
            if summary := product.summary(spec.name, counts):
                info["summary"] = summary
            models = sorted((k[1], n) for k, n in counts.items() if k[0] == "model")
            prompts = sorted((k[1], n) for k, n in counts.items() if k[0] == "prompt")
            if models or prompts:
                info["provenance"] = {"models": models, "prompts": prompts}
            report["configs"][spec.name] = info
        checks = tallies.checks[product.name]
        report["validation"][product.name] = {"passed": checks.passed, "checks": checks.report()}
        report["timings_s"][product.name] = {
            step: round(tallies.seconds[f"{product.name}.{step}"], 3) for step in ("build", "validate", "encode")
        }
    if engine is not None:  # calls made, cached, failed, tokens and cost per step
        report["llm"] = public_llm_report(engine.report())
    return report
