"""What every product that calls an LLM shares: the options naming its endpoint and its reject limit, and the step
policy built from them (the registry has already checked, at load, that every endpoint option names an endpoint
of the recipe)."""

from __future__ import annotations

from pydantic import Field

from gen.llm.step import StepPolicy
from gen.recipe import Recipe, StrictModel


class LLMOptions(StrictModel):
    endpoint: str = Field("main", description="the name of an endpoint in the recipe's llm: section")
    max_reject_rate: float | None = Field(
        None,
        ge=0,
        le=1,
        description="stop the run when more than this share of a step's items is rejected; default: the "
        "endpoint's max_reject_rate (0.2 unless set)",
    )

    def step_policy(self, product: str, recipe: Recipe, retries: int) -> StepPolicy:
        """`retries` regenerations, and the product's own max_reject_rate, else its endpoint's (the stop message
        names where to change it)."""
        if self.max_reject_rate is not None:
            return StepPolicy(retries, self.max_reject_rate, f"max_reject_rate in the {product} product entry")
        where = f"max_reject_rate (in the {product} product entry, or for every step on llm endpoint '{self.endpoint}')"
        return StepPolicy(retries, recipe.llm[self.endpoint].max_reject_rate, where)
