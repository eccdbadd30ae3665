"""The product registry: name → product class, found through the `gen.products` entry point group (gen/plugins.py),
where gen's own products are registered exactly as an outside package registers its.

Also what the runner, the card and the exporter need to know about products, computed from the classes:
which product writes a config, the order products are built in (needs first), and a recipe's products bound
to their validated options.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Iterator, Mapping, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from gen.errors import GenError
from gen.plugins import PRODUCTS, registered
from gen.products.base import ConfigSpec, Needs, Product, declared_features
from gen.products.schema import Schema
from gen.recipe import Recipe, load_recipe, recipe_from_data
from gen.validation import validate_model


def discover() -> dict[str, type[Product]]:
    """Every installed product, in entry point order (within one, in its tuple's order)."""
    return registered(
        PRODUCTS,
        "product",
        "a subclass of gen.products.base.Product, or a tuple of them",
        lambda item: isinstance(item, type) and issubclass(item, Product),
        lambda item: item.name,
    )


class Registry(MutableMapping[str, type[Product]]):
    """name → product class, read from the entry points at first use, so a process that only runs the products
    it was handed (a Ray worker unpickling its shard's) never imports the others and what they import."""

    def __init__(self) -> None:
        self._products: dict[str, type[Product]] | None = None

    def _loaded(self) -> dict[str, type[Product]]:
        if self._products is None:
            self._products = discover()
        return self._products

    def __getitem__(self, name: str) -> type[Product]:
        return self._loaded()[name]

    def __setitem__(self, name: str, product: type[Product]) -> None:
        self._loaded()[name] = product

    def __delitem__(self, name: str) -> None:
        del self._loaded()[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._loaded())

    def __len__(self) -> int:
        return len(self._loaded())


REGISTRY = Registry()

# Questions refer to `now` and `current_session`, which only the conversations config records.
WRITTEN_WITH_TIMELINES = ("conversations",)


def register(product: type[Product]) -> type[Product]:
    """Add a product class (plugins and tests); returns it, so it can be used as a decorator."""
    if product.name in REGISTRY and REGISTRY[product.name] is not product:
        raise ValueError(f"a product named {product.name!r} is already registered")
    REGISTRY[product.name] = product
    return product


def config_spec(config: str) -> tuple[type[Product], ConfigSpec] | None:
    """The product that writes `config`, and the config's spec."""
    for product in REGISTRY.values():
        for spec in product.configs:
            if spec.name == config:
                return product, spec
    return None


def run_features(config: str, info: Mapping[str, Any]) -> Schema | None:
    """The features of `config` as a run wrote it, from the product's declared schema and the config's run.json
    entry (base.declared_features); None when no product writes `config`."""
    found = config_spec(config)
    return declared_features(found[1].features, info.get("questions")) if found is not None else None


@dataclass(frozen=True)
class Bound:
    """A product of the run with its options; `written` is False for a product built only because another
    one needs its records."""

    product: Product
    written: bool

    @property
    def name(self) -> str:
        return self.product.name


def bind(recipe: Recipe) -> list[Bound]:
    """The recipe's products with validated options, plus what they need, in build order (each product after
    the products it needs, otherwise in registry order, so the order of a recipe's list changes nothing)."""
    chosen: dict[str, Product] = {}
    for index, entry in enumerate(recipe.products):
        where = f"products[{index}]"
        cls = lookup(entry.type, recipe, where)
        options = validate_model(cls.Options, entry.options(), recipe.file, prefix=("products", index))
        if entry.type in chosen:
            raise GenError(
                f"product {entry.type!r} is listed twice",
                file=recipe.file,
                field=f"{where}.type",
                expected="each product type once",
            )
        product = cls(options)
        check_endpoint_options(product, recipe, where)
        product.check_recipe(recipe, where)
        chosen[entry.type] = product
    wanted = set(chosen)
    if any(product.needs.timelines for product in chosen.values()):  # a product the recipe names asks about time
        wanted.update(WRITTEN_WITH_TIMELINES)
    needed = closure(wanted, chosen)
    order = [name for name in REGISTRY if name in needed]
    return [
        Bound(chosen.get(name) or REGISTRY[name](REGISTRY[name].Options()), written=name in wanted)
        for name in topological(order, chosen)
    ]


def check_endpoint_options(product: Product, recipe: Recipe, where: str) -> None:
    """Every option of an LLM product that names an endpoint (`endpoint`, `..._endpoint`) names one of the
    recipe's llm: section. Checked here for every product at load, so no product can leave it to the first call."""
    if not product.needs.llm:
        return
    for key, value in product.options.model_dump().items():
        if (key == "endpoint" or key.endswith("_endpoint")) and isinstance(value, str) and value not in recipe.llm:
            near = difflib.get_close_matches(value, recipe.llm, n=1)
            raise GenError(
                f"unknown LLM endpoint {value!r}" + (f"; did you mean {near[0]!r}?" if near else ""),
                file=recipe.file,
                field=f"{where}.{key}",
                expected=f"a name of the recipe's llm: section ({', '.join(sorted(recipe.llm)) or 'none defined'})",
            )


def lookup(name: str, recipe: Recipe, where: str) -> type[Product]:
    cls = REGISTRY.get(name)
    if cls is None:
        near = difflib.get_close_matches(name, REGISTRY, n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise GenError(
            f"unknown product type {name!r}{hint}",
            file=recipe.file,
            field=f"{where}.type",
            expected=f"one of {', '.join(REGISTRY)}",
        )
    return cls


def needs_of(name: str, configured: Mapping[str, Product]) -> Needs:
    """A product's needs as the recipe configured it (its options may add some), else its type's."""
    return (configured.get(name) or REGISTRY[name]).needs


def closure(names: Iterable[str], configured: Mapping[str, Product] | None = None) -> set[str]:
    """The named products and everything they need, directly or not."""
    pending = list(names)
    seen: set[str] = set()
    while pending:
        name = pending.pop()
        if name not in seen:
            seen.add(name)
            pending.extend(needs_of(name, configured or {}).products)
    return seen


def topological(names: Iterable[str], configured: Mapping[str, Product] | None = None) -> list[str]:
    """Needs before the products that need them; ties in the given order."""
    remaining = list(names)
    done: list[str] = []
    while remaining:
        ready = next((n for n in remaining if all(d in done for d in needs_of(n, configured or {}).products)), None)
        if ready is None:
            raise ValueError(f"products need each other in a circle: {', '.join(remaining)}")
        done.append(ready)
        remaining.remove(ready)
    return done


class BoundRecipe(NamedTuple):
    """A recipe and its products bound to their checked options: what one command loads, once, and hands on (a
    product may keep counts over its run, so each command binds its own and never a second time)."""

    recipe: Recipe
    products: list[Bound]


MAPPING_FILE = "(recipe given as a mapping)"


def load(recipe: str | Path | Mapping[str, Any] | Recipe, source_dir: Path | None = None) -> BoundRecipe:
    """The one way a recipe is loaded: a file, a mapping with a file's keys (relative paths from the working
    folder) or a Recipe already read, checked whole (its own keys, then every product's options) and bound."""
    if isinstance(recipe, Recipe):
        loaded = recipe
    elif isinstance(recipe, Mapping):
        loaded = recipe_from_data(dict(recipe), Path.cwd() / MAPPING_FILE, source_dir)
    else:
        loaded = load_recipe(recipe, source_dir)
    return BoundRecipe(loaded, bind(loaded))
