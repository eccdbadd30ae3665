"""gold_answers' recipe options (besides `endpoint` and `max_reject_rate`, which every LLM product has)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator

from gen.products.llm_options import LLMOptions

Answered = Literal["time_queries", "ambiguous_time_queries"]  # the question configs whose base questions it answers


class GoldAnswersOptions(LLMOptions):
    questions: list[Answered] = Field(
        default_factory=lambda: list[Answered](["time_queries"]),
        description="the question configs answered; both share their base questions, so a base question in both "
        "gets one answer",
    )
    verify: bool = Field(False, description="a second call checks that every claim is supported by what it cites")
    retries: int = Field(1, ge=0, le=20, description="new answers (next sample index) after the verifier disagrees")

    @field_validator("questions")
    @classmethod
    def _some(cls, value: list[str]) -> list[str]:
        if not value:
            raise ValueError("name at least one question config: time_queries, ambiguous_time_queries")
        return list(dict.fromkeys(value))
