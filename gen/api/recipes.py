"""Loading a recipe for the API: every function that takes a recipe takes a path, a mapping or a Recipe and goes
through `bound` (gen/products/registry.py:load, the one loading path), so each command reads and binds its recipe
once and hands the bound products down."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gen.api.calls import api_call

if TYPE_CHECKING:
    from gen.products.registry import BoundRecipe
    from gen.recipe import Recipe


def bound(recipe: str | Path | Mapping[str, Any] | Recipe, source_dir: str | Path | None = None) -> BoundRecipe:
    from gen.products.registry import load

    return load(recipe, Path(source_dir) if source_dir is not None else None)


@api_call()
def load_recipe(recipe: str | Path | Mapping[str, Any], *, source_dir: str | Path | None = None) -> Recipe:
    """A recipe file (or a mapping with the same keys, its relative paths taken from the working folder), checked
    whole: its own keys, then every product's options, as `gen validate` does before reading any source."""
    return bound(recipe, source_dir).recipe
