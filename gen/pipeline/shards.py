"""The work of a run, conversation by conversation: sources read and products bound (`prepare`), then, for
a shard of conversations, every product of a stage built, validated, counted and encoded (`process_shard`).

What a shard returns is small and picklable, so executors (gen/pipeline/executors.py) can run shards in other
processes and the writer (gen/pipeline/runner.py) appends them in conversation order.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import time
from collections import Counter, defaultdict
from collections.abc import Generator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, overload

from gen import progress
from gen.conversation import Conversation
from gen.errors import GenError
from gen.jsonl import encode_lines
from gen.personal import source_is_personal
from gen.products.base import BuildContext, Records, Unit
from gen.products.checks import Checks
from gen.products.record_check import RecordCheck, check_conversation
from gen.products.registry import REGISTRY, Bound, bind, closure
from gen.recipe import BUNDLED, Recipe
from gen.redaction import Redactor
from gen.sources import read_source, select
from gen.sources.store import ConversationStore, SourcePool, Store, Stored, Summary
from gen.timeline import Timeline, build_timeline, donor_choice

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from gen.llm.engine import Engine


class Units(Sequence[Unit]):
    """A Prepared's units as its LLM products plan from them, built on access: each with the records of the
    products that need no LLM which they read (a product answering another's questions plans from them)."""

    def __init__(self, prepared: Prepared) -> None:
        self.prepared = prepared
        llm = [bound for bound in prepared.products if uses_llm(bound.name, prepared.products)]
        self.configs = config_map(prepared.products)
        self.needed = {
            config for bound in llm for name in bound.product.needs.products for config in self.configs[name]
        }
        # built for their records only: nothing of theirs is validated or counted here
        self.first = [replace(b, written=False) for b in prepared.products if not uses_llm(b.name, prepared.products)]

    def unit(self, position: int) -> Unit:
        unit = self.prepared.unit(position)
        if not self.needed:
            return unit
        made: dict[str, Sequence[dict]] = {}
        build_products(self.prepared.recipe, [unit], [made], self.first, self.configs)
        return Unit(
            unit.conversation, unit.timeline, {config: made[config] for config in self.needed if config in made}
        )

    def __len__(self) -> int:
        return len(self.prepared.conversations)

    @overload
    def __getitem__(self, index: int) -> Unit: ...
    @overload
    def __getitem__(self, index: slice) -> list[Unit]: ...
    def __getitem__(self, index: int | slice) -> Unit | list[Unit]:
        if isinstance(index, slice):
            return [self.unit(i) for i in range(len(self))[index]]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return self.unit(index % len(self))


@dataclass
class Prepared:
    """Sources loaded and selected, products bound: what `gen validate`, `gen run` and `gen plan` share. The
    conversations stay in their store on disk and are read one at a time (gen/sources/store.py)."""

    recipe: Recipe
    products: list[Bound]
    conversations: Stored  # the selected ones, in run order
    pools: list[SourcePool]  # per source: every conversation loaded (the padding donors)
    source_of: list[int]  # per selected conversation: its source's index in `pools`
    sources: list[dict] = field(default_factory=list)
    timings: dict[str, Any] = field(default_factory=dict)
    redaction: dict[str, Any] | None = None  # what the recipe's `redact:` replaced (run.json's `redaction`)

    @property
    def needs_timelines(self) -> bool:
        return any(bound.product.needs.timelines for bound in self.products)

    def timeline(self, position: int) -> Timeline:
        return self.timeline_of(self.conversations[position], position)

    def timeline_of(self, conversation: Conversation, position: int) -> Timeline:
        donors = self.pools[self.source_of[position]]
        return build_timeline(conversation, self.recipe.timeline, donors, self.recipe.seed)

    def units(self) -> Units:
        """Every selected conversation as a Unit for planning the LLM calls, each built when it is asked for (a
        product that plans no LLM call never asks, so `gen validate` and `gen plan` hold one conversation at a
        time, not the corpus)."""
        return Units(self)

    def unit(self, position: int) -> Unit:
        conversation = self.conversations[position]
        timeline = self.timeline_of(conversation, position) if self.needs_timelines else None
        return Unit(conversation, timeline)

    def reads(self, position: int) -> list[int]:
        """The store positions `unit(position)` reads: the conversation's own, then its padding donors'. Told
        from the summaries alone (no conversation is read)."""
        own = self.conversations.positions[position]
        padding = self.recipe.timeline.padding
        if not self.needs_timelines or padding.mode != "donor":
            return [own]
        pool = self.pools[self.source_of[position]]
        summary = self.conversations.store.summaries[own]
        chosen = donor_choice(
            summary.conversation_id, pool.donor_ids(), pool.session_words, padding.target_words, self.recipe.seed
        )
        return [own, *(pool.position(donor_id) for donor_id, _ in chosen)]

    def reading(self, store: Store) -> Prepared:
        """This Prepared with its conversations read from `store` (the same summaries): what goes to Ray once,
        the corpus staying in this process (a HeldConversations, or the driver's own file shared)."""
        return dataclasses.replace(
            self,
            conversations=Stored(store, self.conversations.positions),
            pools=[pool.reading(store) for pool in self.pools],
        )


# A run makes millions of short-lived dicts, lists and strings and almost no reference cycles: with the
# collector's default first threshold (700 allocations) it ran thousands of times per conversation and took a
# fifth of the time of building and reading them. While a run builds or reads it runs this many times less often.
GC_THRESHOLD = 100_000


@contextmanager
def fewer_collections() -> Iterator[None]:
    """The cyclic garbage collector's first threshold raised to GC_THRESHOLD for the block (cycles are still
    collected, only less often); the previous thresholds come back after it."""
    previous = gc.get_threshold()
    gc.set_threshold(max(GC_THRESHOLD, previous[0]), *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)


def prepare(recipe: Recipe, limit: int | None = None, products: list[Bound] | None = None) -> Prepared:
    """The recipe's sources read and selected, with its products: `products` when the caller has bound them (a
    command binds its recipe once: gen/products/registry.py:load), else bound here."""
    with fewer_collections():
        return prepare_sources(recipe, limit, bind(recipe) if products is None else products)


def prepare_sources(recipe: Recipe, limit: int | None, products: list[Bound]) -> Prepared:
    started = time.perf_counter()
    store = ConversationStore()
    chosen: list[Summary] = []
    pools: list[SourcePool] = []
    source_of: list[int] = []
    sources = []
    # applied as each conversation is read, before it is stored: every product and validator reads the store
    redactor = Redactor(recipe.redact) if recipe.redact is not None else None
    for index, spec in enumerate(recipe.sources):
        first = len(store)
        clocks: set[str] = set()
        with progress.task(f"reading {Path(spec.origin).name}", detail="conversations") as bar:
            for conversation in read_source(spec):
                store.add(redactor.conversation(conversation) if redactor is not None else conversation)
                clocks.add(conversation.clock)
                bar.advance()
        loaded = store.summaries[first:]
        selected = select(loaded, spec)[:limit] if limit is not None else select(loaded, spec)
        log.info("%s: %d of %d conversations from %s", spec.format, len(selected), len(loaded), spec.origin)
        sources.append(
            {
                "format": spec.format,
                "origin": spec.origin,
                "origin_name": Path(spec.origin).name,
                "bundled": spec.path is not None and spec.path.resolve().parent == BUNDLED.resolve(),
                "loaded": len(loaded),
                "selected": len(selected),
                "personal": source_is_personal(spec),
                "clock": " and ".join(sorted(clocks)) or None,  # observed or simulated (the card says which)
            }
        )
        pools.append(SourcePool(store, range(first, len(store))))
        chosen.extend(selected)
        source_of.extend([index] * len(selected))
    if not chosen:
        raise GenError(
            "the sources and selection leave no conversation",
            file=recipe.file,
            field="sources",
            expected="at least one conversation",
        )
    ids = Counter(c.conversation_id for c in chosen)
    if duplicates := sorted(i for i, n in ids.items() if n > 1):
        raise GenError(
            f"conversation ids appear in more than one source: {', '.join(duplicates[:5])}",
            file=recipe.file,
            field="sources",
        )
    if any(bound.product.needs.timelines for bound in products):  # they only see conversations with sessions
        source_of = [s for s, c in zip(source_of, chosen) if c.session_count]
        chosen = [c for c in chosen if c.session_count]
    prepared = Prepared(recipe, products, Stored(store, [c.position for c in chosen]), pools, source_of, sources)
    if redactor is not None:
        prepared.redaction = redactor.report()
        replaced = ", ".join(f"{kind} {count:,}" for kind, count in prepared.redaction["replaced"].items())
        log.info(
            "redact: replaced %s (%d of %d conversations changed)", replaced, redactor.changed, redactor.conversations
        )
    prepared.timings["prepare"] = time.perf_counter() - started
    return prepared


# --- the work of one shard of conversations -------------------------------------------------------------


@dataclass
class Spooled:
    """A shard's encoded lines left in a file by a worker process: config → (offset, length) in `path`, in the
    order of `ShardResult.lines`. The writer copies each range into its config's file within the kernel."""

    path: str
    spans: dict[str, tuple[int, int]]


@dataclass
class ShardResult:
    """What a shard sends back to the writer: the encoded lines of each config (one bytes object, cheap to
    send between processes; or, from a local worker, `spooled` in a file beside the run), and the running
    tallies."""

    lines: dict[str, bytes] = field(default_factory=dict)
    spooled: Spooled | None = None
    checks: dict[str, Checks] = field(default_factory=dict)
    counts: dict[str, Counter] = field(default_factory=dict)
    rejects: dict[str, list[dict]] = field(default_factory=dict)
    seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    built: Counter = field(default_factory=Counter)  # product → its conversations written here (for progress)


def process_shard(
    prepared: Prepared, positions: Sequence[int], products: Sequence[Bound], engine: Engine | None = None
) -> ShardResult:
    """Build, validate, count and encode every product for these conversations (one stage's products)."""
    with fewer_collections():
        return build_shard(prepared, positions, products, engine)


def build_shard(
    prepared: Prepared, positions: Sequence[int], products: Sequence[Bound], engine: Engine | None
) -> ShardResult:
    units = [prepared.unit(position) for position in positions]
    return build_products(prepared.recipe, units, [{} for _ in units], products, config_map(products), engine)


def config_map(products: Sequence[Bound]) -> dict[str, list[str]]:
    """Each product's config names, from the bound products themselves (a worker needs no registry)."""
    return {bound.name: [spec.name for spec in bound.product.configs] for bound in products}


def build_products(
    recipe: Recipe,
    units: Sequence[Unit],
    built: Sequence[dict[str, Sequence[dict]]],
    products: Sequence[Bound],
    configs: dict[str, list[str]],
    engine: Engine | None = None,
) -> ShardResult:
    """Build `products` for these units, then validate, count and encode those written. `built` holds per unit
    the records made before (config → records) that the products may need, and receives theirs; `configs` names
    the configs of every product, those needed included."""
    ctx = BuildContext(recipe, engine=engine)
    result = ShardResult()
    for bound in products:
        product, started = bound.product, time.perf_counter()
        inputs = [
            Unit(u.conversation, u.timeline, {c: b[c] for d in product.needs.products for c in configs[d]})
            for u, b in zip(units, built)
        ]
        outputs: list[Records] = list(product.build(inputs, ctx))
        result.seconds[f"{product.name}.build"] += time.perf_counter() - started
        for unit_built, records in zip(built, outputs):
            unit_built.update(records)
        if bound.written:
            tally(product.name, bound, inputs, outputs, ctx, result)
            result.built[product.name] += len(units)
    for reject in ctx.rejects:
        result.rejects.setdefault(reject.product, []).append(reject.to_dict())
    return result


def process_batch(
    prepared: Prepared, positions: Sequence[int], products: Sequence[Bound], engine: Engine
) -> Generator[ShardResult, None, None]:
    """A batch of the LLM stage: for each conversation, the products that need no LLM (one result each, as the
    stage without LLM gives them), keeping what the LLM products need; then the LLM products over the batch
    (one result). Each conversation is read, placed on the clock and built once, and what a batch holds is its
    conversations and the records the LLM products need, not every product's records."""
    first = [bound for bound in products if not uses_llm(bound.name, products)]
    then = [bound for bound in products if uses_llm(bound.name, products)]
    configs = config_map(products)
    needed = {config for bound in then for name in bound.product.needs.products for config in configs[name]}
    units: list[Unit] = []
    kept: list[dict[str, Sequence[dict]]] = []
    for position in positions:
        made: dict[str, Sequence[dict]] = {}
        with fewer_collections():
            unit = prepared.unit(position)
            result = build_products(prepared.recipe, [unit], [made], first, configs)
        yield result
        units.append(unit)
        kept.append({config: made[config] for config in needed if config in made})
    with fewer_collections():
        result = build_products(prepared.recipe, units, kept, then, configs, engine)
    yield result


def tally(
    name: str, bound: Bound, units: Sequence[Unit], outputs: Sequence[Records], ctx: BuildContext, result: ShardResult
) -> None:
    """Validate, count and encode one product's records of these conversations."""
    product, started = bound.product, time.perf_counter()
    checks = result.checks.setdefault(name, Checks())
    for unit, records in zip(units, outputs):
        product.validate(unit, records, checks, ctx)
    fits = {spec.name: RecordCheck(spec.features) for spec in product.configs}
    for unit, records in zip(units, outputs):  # every product's records, a plugin's too (gen/products/record_check.py)
        for config, check in fits.items():
            check_conversation(check, config, unit.conversation_id, records[config], checks)
    validated = time.perf_counter()
    for spec in product.configs:
        counts = result.counts.setdefault(spec.name, Counter())
        encoded: list[bytes] = []
        for records in outputs:
            rows = records[spec.name]
            counts.update(product.count(spec.name, rows))
            counts["records", ""] += len(rows)
            counts.update(provenance(rows))
            encoded.append(encode_lines(rows))
        result.lines[spec.name] = b"".join(encoded)
    result.seconds[f"{name}.validate"] += validated - started
    result.seconds[f"{name}.encode"] += time.perf_counter() - validated


def provenance(rows: Sequence[dict]) -> Counter:
    """The models and prompt ids the records name (`model`, `prompt_id`, `*_prompt_id`, `prompt_ids`). The
    records of a config share their fields, so the first record says which fields to read."""
    counts: Counter = Counter()
    if not rows:
        return counts
    fields = [key for key in rows[0] if key in ("model", "prompt_ids", "prompt_id") or key.endswith("_prompt_id")]
    for row in rows if fields else ():
        for key in fields:
            value = row.get(key)
            if key == "model" and isinstance(value, str):
                counts["model", value] += 1
            elif key == "prompt_ids" and isinstance(value, dict):
                counts.update(("prompt", f"{k}: {v}") for k, v in value.items())
            elif key == "prompt_id" and isinstance(value, str):
                counts["prompt", value] += 1
            elif key.endswith("_prompt_id") and isinstance(value, str):
                counts["prompt", f"{key.removesuffix('_prompt_id')}: {value}"] += 1
    return counts


def uses_llm(name: str, products: Sequence[Bound]) -> bool:
    """Whether the product, as the recipe configured it (its options may call for an LLM), or anything it needs
    calls an LLM."""
    configured = {b.name: b.product for b in products}

    def calls(product_name: str) -> bool:
        product = configured.get(product_name) or REGISTRY[product_name]
        return product.needs.llm or any(calls(need) for need in product.needs.products)

    return calls(name)


def stage_products(products: list[Bound], llm: bool) -> list[Bound]:
    """The products of one stage. The LLM stage also rebuilds (without writing) what its products need."""
    if not llm:
        return [b for b in products if not uses_llm(b.name, products)]
    needed = closure((b.name for b in products if uses_llm(b.name, products)), {b.name: b.product for b in products})
    return [Bound(b.product, written=b.written and uses_llm(b.name, products)) for b in products if b.name in needed]
