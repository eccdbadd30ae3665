"""TeaBag's recipe options (besides `endpoint` and `max_reject_rate`, which every LLM product has)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gen.products.llm_options import LLMOptions
from gen.recipe import StrictModel

STEPS = ("summary", "question", "session6", "verify")


class TurnRange(StrictModel):
    min: int = Field(10, ge=2, description="fewest turns of the new session")
    max: int = Field(15, ge=2, description="most turns of the new session")

    @model_validator(mode="after")
    def _ordered(self) -> TurnRange:
        if self.min > self.max:
            raise ValueError("min must not exceed max")
        return self


class MinQuality(StrictModel):
    """Floors on the new session's quality scores; a session below one is written again, then rejected."""

    coherence: float | None = Field(
        None, ge=-1.0, le=1.0, description="lowest mean similarity of consecutive turns (the record's coherence)"
    )
    distinct_token_ratio: float | None = Field(
        None, ge=0.0, le=1.0, description="lowest share of distinct words (the record's distinct_token_ratio)"
    )


class TeaBagOptions(LLMOptions):
    summary_endpoint: str | None = Field(None, description="the summaries step's endpoint (default: endpoint)")
    question_endpoint: str | None = Field(None, description="the questions step's endpoint (default: endpoint)")
    session6_endpoint: str | None = Field(None, description="the new session's endpoint (default: endpoint)")
    verify_endpoint: str | None = Field(None, description="the verify call's endpoint (default: endpoint)")
    episodes: int = Field(50, ge=1, description="episodes taken from each source file, in the source's order")
    sessions: int = Field(5, ge=1, le=5, description="sessions used as history; shorter conversations are skipped")
    session6_turns: TurnRange = Field(
        default_factory=lambda: TurnRange(min=10, max=15), description="turns of the new session, {min, max}"
    )
    verify: bool = Field(False, description="a second call confirms each presupposition contradicts the summaries")
    retries: int = Field(2, ge=0, le=20, description="regenerations (new sample index) after a failed check")
    coherence: Literal["auto", "embedding", "lexical"] = Field(
        "auto", description="how turn-to-turn coherence is scored; auto: embedding when its model is installed"
    )
    min_quality: MinQuality = Field(
        default_factory=lambda: MinQuality(coherence=None, distinct_token_ratio=None),
        description="floors on the new session's coherence and distinct_token_ratio: a session below one is "
        "written again (retries), then rejected with its scores",
    )
