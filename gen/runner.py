"""One run: recipe → sources → conversations → timelines → products → validators → writer.

The work is done conversation by conversation and streamed to the run folder, so memory follows the
largest conversation rather than the corpus. For each conversation the products are built in the order the
registry gives (each after the products whose records it needs), each product's records are validated
there and then, counted, and appended to its config's file. Two stages:

  local    products that need no LLM: one conversation per task, in this process or, with `workers > 1`,
           in a pool of processes whose results are written in conversation order (the same bytes);
  llm      products that call the LLM (and what they need, rebuilt but not written again): batches of
           conversations in this process, which holds the run's one engine (one cache, one set of limits).

Every per-conversation choice is seeded from (recipe seed, conversation id), so neither the number of
workers nor the batching changes a byte of output.
"""

from __future__ import annotations

import multiprocessing
import platform
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from gen.card import render_card
from gen.errors import GenError
from gen.jsonl import encode_line, write_json
from gen.model import Conversation
from gen.products.base import BuildContext, Records, Unit
from gen.products.checks import Checks
from gen.products.registry import REGISTRY, Bound, bind
from gen.recipe import Recipe
from gen.sources import load_source, select
from gen.timeline import Timeline, build_timeline
from gen.writer import RunFolder

if TYPE_CHECKING:
    from gen.llm.config import RunSettings
    from gen.llm.engine import Engine

PACKAGES = ("gen", "datasets", "openai", "jinja2", "num2words", "pydantic", "huggingface-hub")
LLM_BATCH = 64  # conversations per batch in the LLM stage: one engine step covers all their items
Say = Callable[[str], None]


@dataclass
class Prepared:
    """Sources loaded and selected, products bound: what `gen validate`, `gen run` and `gen plan` share."""

    recipe: Recipe
    products: list[Bound]
    conversations: list[Conversation]
    pools: list[list[Conversation]]  # per source: every conversation loaded (the padding donors)
    source_of: list[int]  # per selected conversation: its source's index in `pools`
    sources: list[dict] = field(default_factory=list)
    timings: dict[str, Any] = field(default_factory=dict)

    @property
    def needs_timelines(self) -> bool:
        return any(bound.product.needs.timelines for bound in self.products)

    def timeline(self, position: int) -> Timeline:
        conversation = self.conversations[position]
        return build_timeline(
            conversation, self.recipe.timeline, self.pools[self.source_of[position]], self.recipe.seed
        )

    def unit(self, position: int) -> Unit:
        timeline = self.timeline(position) if self.needs_timelines else None
        return Unit(self.conversations[position], timeline)


def prepare(recipe: Recipe, limit: int | None = None, say: Say = lambda _: None) -> Prepared:
    started = time.perf_counter()
    products = bind(recipe)
    conversations: list[Conversation] = []
    pools: list[list[Conversation]] = []
    source_of: list[int] = []
    sources = []
    for index, spec in enumerate(recipe.sources):
        pool = load_source(spec)
        chosen = select(pool, spec)[:limit] if limit is not None else select(pool, spec)
        say(f"{spec.format}: {len(chosen)} of {len(pool)} conversations from {spec.origin}")
        sources.append(
            {
                "format": spec.format,
                "origin": spec.origin,
                "origin_name": Path(spec.origin).name,
                "loaded": len(pool),
                "selected": len(chosen),
            }
        )
        pools.append(pool)
        conversations.extend(chosen)
        source_of.extend([index] * len(chosen))
    if not conversations:
        raise GenError(
            "the sources and selection leave no conversation",
            file=recipe.file,
            field="sources",
            expected="at least one conversation",
        )
    ids = Counter(c.conversation_id for c in conversations)
    if duplicates := sorted(i for i, n in ids.items() if n > 1):
        raise GenError(
            f"conversation ids appear in more than one source: {', '.join(duplicates[:5])}",
            file=recipe.file,
            field="sources",
        )
    prepared = Prepared(recipe, products, conversations, pools, source_of, sources)
    if prepared.needs_timelines:  # products that need time only see conversations that have sessions
        keep = [i for i, c in enumerate(conversations) if c.sessions]
        prepared.conversations = [conversations[i] for i in keep]
        prepared.source_of = [source_of[i] for i in keep]
    prepared.timings["prepare"] = time.perf_counter() - started
    return prepared


def package_versions() -> dict[str, str]:
    versions = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def templates_dir_of(recipe: Recipe) -> str | None:
    return str(recipe.templates_dir) if recipe.templates_dir else None


def output_folder(recipe: Recipe, output_dir: Path | None) -> Path:
    base = output_dir or recipe.output_dir or Path("outputs")
    return Path(base) / recipe.name


# --- the work of one shard of conversations -------------------------------------------------------------


@dataclass
class ShardResult:
    """What a shard sends back to the writer: the encoded lines of each config (one string, cheap to send
    between processes), and the running tallies."""

    text: dict[str, str] = field(default_factory=dict)
    checks: dict[str, Checks] = field(default_factory=dict)
    counts: dict[str, Counter] = field(default_factory=dict)
    rejects: dict[str, list[dict]] = field(default_factory=dict)
    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))


def process_shard(
    prepared: Prepared, positions: Sequence[int], products: Sequence[Bound], engine: Engine | None = None
) -> ShardResult:
    """Build, validate, count and encode every product for these conversations (one stage's products)."""
    ctx = BuildContext(prepared.recipe, engine=engine)
    units = [prepared.unit(position) for position in positions]
    built: list[dict[str, Sequence[dict]]] = [{} for _ in units]  # per unit: config → records so far
    result = ShardResult()
    for bound in products:
        product, started = bound.product, time.perf_counter()
        inputs = [
            Unit(u.conversation, u.timeline, {c: b[c] for d in product.needs.products for c in config_names(d)})
            for u, b in zip(units, built)
        ]
        outputs: list[Records] = list(product.build(inputs, ctx))
        result.seconds[f"{product.name}.build"] += time.perf_counter() - started
        for unit_built, records in zip(built, outputs):
            unit_built.update(records)
        if bound.written:
            tally(product.name, bound, inputs, outputs, ctx, result)
    for reject in ctx.rejects:
        result.rejects.setdefault(reject.product, []).append(reject.to_dict())
    return result


def tally(
    name: str, bound: Bound, units: Sequence[Unit], outputs: Sequence[Records], ctx: BuildContext, result: ShardResult
) -> None:
    """Validate, count and encode one product's records of these conversations."""
    product, started = bound.product, time.perf_counter()
    checks = result.checks.setdefault(name, Checks())
    for unit, records in zip(units, outputs):
        product.validate(unit, records, checks, ctx)
    validated = time.perf_counter()
    for spec in product.configs:
        counts = result.counts.setdefault(spec.name, Counter())
        lines: list[str] = []
        for records in outputs:
            rows = records[spec.name]
            counts.update(product.count(spec.name, rows))
            counts["records", ""] += len(rows)
            counts.update(provenance(rows))
            lines.extend(encode_line(row) for row in rows)
        result.text[spec.name] = "".join(lines)
    result.seconds[f"{name}.validate"] += validated - started
    result.seconds[f"{name}.encode"] += time.perf_counter() - validated


def provenance(rows: Sequence[dict]) -> Counter:
    """The models and prompt ids the records name (`model`, `prompt_id`, `*_prompt_id`, `prompt_ids`)."""
    counts: Counter = Counter()
    for row in rows:
        if isinstance(row.get("model"), str):
            counts["model", row["model"]] += 1
        for key, value in row.items():
            if key == "prompt_ids" and isinstance(value, dict):
                counts.update(("prompt", f"{k}: {v}") for k, v in value.items())
            elif key == "prompt_id" and isinstance(value, str):
                counts["prompt", value] += 1
            elif key.endswith("_prompt_id") and isinstance(value, str):
                counts["prompt", f"{key.removesuffix('_prompt_id')}: {value}"] += 1
    return counts


def config_names(product: str) -> list[str]:
    return [spec.name for spec in REGISTRY[product].configs]


def uses_llm(name: str) -> bool:
    product = REGISTRY[name]
    return product.needs.llm or any(uses_llm(need) for need in product.needs.products)


# --- executors: the order of results is the order of conversations -------------------------------------

_WORKER_STATE: dict[str, Any] = {}  # set in the parent before the pool forks, read by the workers


def _process_in_worker(positions: Sequence[int]) -> ShardResult:
    return process_shard(_WORKER_STATE["prepared"], positions, _WORKER_STATE["products"])


def local_results(prepared: Prepared, products: list[Bound], workers: int) -> Iterator[ShardResult]:
    shards = [[position] for position in range(len(prepared.conversations))]
    if workers <= 1 or len(shards) <= 1:
        for shard in shards:
            yield process_shard(prepared, shard, products)
        return
    if "fork" not in multiprocessing.get_all_start_methods():
        raise GenError(
            "--workers needs the 'fork' start method, which this platform lacks",
            field="--workers",
            expected="--workers 1",
        )
    _WORKER_STATE.update(prepared=prepared, products=products)
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            yield from pool.imap(_process_in_worker, shards, chunksize=1)
    finally:
        _WORKER_STATE.clear()


def llm_results(prepared: Prepared, products: list[Bound], engine: Engine) -> Iterator[ShardResult]:
    count = len(prepared.conversations)
    for first in range(0, count, LLM_BATCH):
        yield process_shard(prepared, range(first, min(first + LLM_BATCH, count)), products, engine)


def stage_products(products: list[Bound], llm: bool) -> list[Bound]:
    """The products of one stage. The LLM stage also rebuilds (without writing) what its products need."""
    if not llm:
        return [b for b in products if not uses_llm(b.name)]
    needed: set[str] = set()
    pending = [b.name for b in products if uses_llm(b.name)]
    while pending:
        name = pending.pop()
        if name not in needed:
            needed.add(name)
            pending.extend(REGISTRY[name].needs.products)
    return [Bound(b.product, written=b.written and uses_llm(b.name)) for b in products if b.name in needed]


# --- the run --------------------------------------------------------------------------------------------


class Tallies:
    """Running totals over every shard: checks and counts per product/config, rejects per product."""

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


def run(
    recipe: Recipe,
    output_dir: Path | None = None,
    limit: int | None = None,
    say: Say = lambda _: None,
    llm_settings: RunSettings | None = None,
    workers: int = 1,
) -> Path:
    """Build, validate and write the run. `llm_settings` are run-only LLM overrides (never in the data)."""
    prepared = prepare(recipe, limit, say)
    engine = None
    if any(uses_llm(b.name) for b in prepared.products):
        from gen.llm.engine import Engine  # only runs with LLM products load the engine

        engine = Engine(recipe.llm, llm_settings, templates_dir=templates_dir_of(recipe))
    try:
        final = build_and_write(prepared, engine, output_dir, say, workers)
    finally:
        if engine is not None:
            engine.close()
    if recipe.export.hub is not None:  # `export: {hub: ...}`: publish the run just written
        from gen.export.hub import push_after_run

        push_after_run(final, recipe.export.hub, templates_dir_of(recipe), say)
    return final


def build_and_write(prepared: Prepared, engine: Engine | None, output_dir: Path | None, say: Say, workers: int) -> Path:
    recipe = prepared.recipe
    final = output_folder(recipe, output_dir)
    products = prepared.products
    tallies = Tallies(products)
    with RunFolder(final) as folder:
        files: dict[str, IO[str]] = {}
        reject_parts = folder.path / ".rejects"
        try:
            for results in stages(prepared, products, engine, workers):
                for result in results:
                    write_shard(folder.path, recipe.split, result, files, reject_parts)
                    tallies.add(result)
        finally:
            for handle in files.values():
                handle.close()
        report = run_report(prepared, products, tallies, engine)
        write_rejects(folder.path / "rejects.jsonl", reject_parts, products, engine)
        report["rejects"] = sum(1 for _ in (folder.path / "rejects.jsonl").open(encoding="utf-8"))
        (folder.path / "recipe.yaml").write_bytes(recipe.file.read_bytes())
        write_json(folder.path / "run.json", report)
        (folder.path / "README.md").write_text(
            render_card(report, templates_dir_of(recipe), folder=folder.path, previous=final / "README.md"),
            encoding="utf-8",
        )
        for name, info in report["configs"].items():
            passed = report["validation"][info["product"]]["passed"]
            say(f"{name}: {info['records']:,} records, validation {'passed' if passed else 'FAILED'}")
        failed = [name for name, result in report["validation"].items() if not result["passed"]]
        if failed:
            folder.keep_failed_at = final.parent / f".{final.name}.failed"
            raise GenError(
                f"validation failed for {', '.join(failed)}; nothing was published. The records and "
                f"run.json are kept for inspection in {folder.keep_failed_at}",
                file=recipe.file,
            )
    return final


def stages(
    prepared: Prepared, products: list[Bound], engine: Engine | None, workers: int
) -> Iterator[Iterator[ShardResult]]:
    local = stage_products(products, llm=False)
    if local:
        yield local_results(prepared, local, workers)
    if engine is not None:
        yield llm_results(prepared, stage_products(products, llm=True), engine)


def write_shard(folder: Path, split: str, result: ShardResult, files: dict[str, IO[str]], reject_parts: Path) -> None:
    for config, text in result.text.items():
        if config not in files:
            path = folder / config / f"{split}.jsonl"
            path.parent.mkdir(parents=True, exist_ok=True)
            files[config] = path.open("w", encoding="utf-8")
        files[config].write(text)
    for product, rejects in result.rejects.items():
        reject_parts.mkdir(exist_ok=True)
        with (reject_parts / f"{product}.jsonl").open("a", encoding="utf-8") as handle:
            handle.writelines(encode_line(reject) for reject in rejects)


def write_rejects(path: Path, parts: Path, products: list[Bound], engine: Engine | None) -> None:
    """rejects.jsonl: each product's rejects in build order, then the LLM engine's (failed calls)."""
    with path.open("w", encoding="utf-8") as out:
        for bound in products:
            part = parts / f"{bound.name}.jsonl"
            if part.exists():
                out.write(part.read_text(encoding="utf-8"))
        if engine is not None:
            out.writelines(encode_line(reject) for reject in engine.rejects)
    if parts.exists():
        for part in parts.iterdir():
            part.unlink()
        parts.rmdir()


def run_report(prepared: Prepared, products: list[Bound], tallies: Tallies, engine: Engine | None) -> dict:
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
        "sources": prepared.sources,
        "configs": {},
        "validation": {},
        "timings_s": dict(prepared.timings),
    }
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
        report["llm"] = engine.report()
    return report
