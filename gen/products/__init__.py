"""Products: each is one module registered here by its config name (SPEC §2).

A product module has:
  NAME         the config name it writes (`outputs/<name>/<NAME>/<split>.jsonl`)
  DESCRIPTION  one line for `gen products`
  Options      a pydantic model of its recipe options (unknown keys rejected)
  build(ctx, options) -> Iterator[dict]          the records
  validate(records, ctx, options) -> Checks      an independent check of those records
  features() -> datasets.Features                 the explicit schema of a record, for export
and optionally summary(records) -> dict          counts for run.json and the dataset card.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gen.model import Conversation
from gen.products import ambiguous_time_queries, conversations, log, time_queries
from gen.recipe import Recipe
from gen.timeline import Timeline

REGISTRY = {module.NAME: module for module in (
    log,
    conversations,
    time_queries,
    ambiguous_time_queries,
)}

ALWAYS_BUILT = ("conversations",)  # every dataset carries its conversations' metadata (now, current session)


@dataclass
class BuildContext:
    """What a product may use: the recipe, the selected conversations and their timelines, and shared services."""

    recipe: Recipe
    conversations: list[Conversation]  # every selected conversation, persona-only ones included
    timelines: list[Timeline]  # the conversations that have sessions, stamped
    services: dict[str, Any] = field(default_factory=dict)  # e.g. the LLM engine, created on first use

    @property
    def templates_dir(self) -> str | None:
        return str(self.recipe.templates_dir) if self.recipe.templates_dir else None
