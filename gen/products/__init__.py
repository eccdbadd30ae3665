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
from gen.products import ambiguous_time_queries, conversations, log, time_content_questions, time_queries
from gen.recipe import Recipe
from gen.timeline import Timeline

REGISTRY = {module.NAME: module for module in (
    log,
    conversations,
    time_queries,
    ambiguous_time_queries,
    time_content_questions,
)}

ALWAYS_BUILT = ("conversations",)  # every dataset carries its conversations' metadata (now, current session)


@dataclass
class BuildContext:
    """What a product may use: the recipe, the selected conversations and their timelines, and shared services."""

    recipe: Recipe
    conversations: list[Conversation]  # every selected conversation, persona-only ones included
    timelines: list[Timeline]  # the conversations that have sessions, stamped
    services: dict[str, Any] = field(default_factory=dict)  # "llm_settings", and the engine once created
    rejects: list[dict] = field(default_factory=list)  # items a product gave up on, written to rejects.jsonl

    @property
    def templates_dir(self) -> str | None:
        return str(self.recipe.templates_dir) if self.recipe.templates_dir else None

    def llm(self):
        """The run's one LLM engine (shared limits, cache and accounting), created on first use."""
        if "llm" not in self.services:
            from gen.llm.config import RunSettings
            from gen.llm.engine import Engine

            self.services["llm"] = Engine(self.recipe.llm, self.services.get("llm_settings") or RunSettings())
        return self.services["llm"]

    def reject(self, product: str, item_id: str, reason: str, raw_text: str | None = None, **details) -> None:
        self.rejects.append({"product": product, "item_id": item_id, "reason": reason, "raw_text": raw_text,
                             **details})
