"""Build and validate one product in memory, for tests: the product contract used directly, without the
runner or a run folder. Needed products are built first (without validation), as the runner does.

    harness = Harness.from_recipe(load_recipe(path))     # sources read and selected, timelines built
    harness = Harness.from_timelines(ann_bob())          # or hand-built timelines (tests/fixtures)
    rows = harness.build("time_queries")                  # records of the product's first config
    checks = harness.validate("time_queries", rows)       # the product's validator over those records
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

from gen.pipeline.shards import Prepared, prepare
from gen.products.base import BuildContext, Product, Records, Unit
from gen.products.checks import Checks
from gen.products.registry import REGISTRY
from gen.recipe import Recipe
from gen.timeline import Timeline
from gen.validation import validate_model


class Harness:
    def __init__(self, recipe: Recipe, units: list[Unit], engine=None) -> None:
        self.ctx = BuildContext(recipe, engine=engine)
        self.units = units
        self.recipe_options = {entry.type: entry.options() for entry in recipe.products}

    @classmethod
    def from_recipe(cls, recipe: Recipe, engine=None, limit: int | None = None) -> Harness:
        prepared: Prepared = prepare(recipe, limit)
        return cls(recipe, [prepared.unit(i) for i in range(len(prepared.conversations))], engine)

    @classmethod
    def from_timelines(cls, *timelines: Timeline, templates_dir=None, seed: int = 0) -> Harness:
        recipe = Recipe(
            name="hand",
            seed=seed,
            sources=[{"format": "locomo", "path": "hand.json"}],
            products=[{"type": "log"}],
            templates_dir=templates_dir,
        )
        return cls(recipe, [Unit(t.conversation, t) for t in timelines])

    @property
    def timelines(self):
        return [unit.timeline for unit in self.units]

    @property
    def rejects(self) -> list[dict]:
        return [reject.to_dict() for reject in self.ctx.rejects]

    def product(self, name: str, options=None) -> Product:
        cls = REGISTRY[name]
        if options is None:
            options = validate_model(cls.Options, self.recipe_options.get(name, {}), self.ctx.recipe.file, ())
        product = cls(options)
        product.check_recipe(self.ctx.recipe, f"products ({name})")
        return product

    def inputs(self, product: Product) -> list[Unit]:
        """The units with the records of every product `product` needs (built with the recipe's options)."""
        records: list[dict[str, Sequence[dict]]] = [{} for _ in self.units]
        for need in product.needs.products:
            upstream = self.product(need)
            for unit_records, built in zip(records, upstream.build(self.inputs(upstream), self.ctx)):
                unit_records.update(built)
        return [Unit(u.conversation, u.timeline, r) for u, r in zip(self.units, records)]

    def build_all(self, name: str, options=None) -> list[Records]:
        product = self.product(name, options)
        return list(product.build(self.inputs(product), self.ctx))

    def build(self, name: str, options=None, config: str | None = None) -> list[dict]:
        product = self.product(name, options)
        config = config or product.configs[0].name
        return [row for records in self.build_all(name, options) for row in records[config]]

    def validate(self, name: str, rows: list[dict], options=None, config: str | None = None) -> Checks:
        """Validate `rows` (any conversation's, in any order) as the product's records, conversation by
        conversation; rows of a conversation that is not in the run count against it as a failed check."""
        product = self.product(name, options)
        config = config or product.configs[0].name
        by_conversation: dict[str, list[dict]] = defaultdict(list)
        for row in rows:
            by_conversation[row["conversation_id"]].append(row)
        checks = Checks()
        units = self.inputs(product)
        known = {unit.conversation_id for unit in units}
        for conversation_id in by_conversation:
            checks.check("conversation exists", conversation_id in known, conversation_id)
        for unit in units:
            records = product.empty_records()
            records[config] = by_conversation.get(unit.conversation_id, [])
            product.validate(unit, records, checks, self.ctx)
        return checks

    def summary(self, name: str, rows: list[dict], config: str | None = None) -> dict:
        """The product's run.json summary of these rows, counted conversation by conversation as the runner does."""
        product = self.product(name)
        config = config or product.configs[0].name
        by_conversation: dict[str, list[dict]] = defaultdict(list)
        for row in rows:
            by_conversation[row["conversation_id"]].append(row)
        counts: Counter = Counter()
        for group in by_conversation.values():
            counts.update(product.count(config, group))
        return product.summary(config, counts)
