"""time_content_questions' recipe options (besides `endpoint` and `max_reject_rate`, which every LLM product
has)."""

from __future__ import annotations

from pydantic import Field, field_validator

from gen.products.llm_options import LLMOptions
from gen.products.time_content.answer_rules import AnswerLimits


class TimeContentQuestionsOptions(LLMOptions):
    per_conversation: int = Field(20, ge=1, description="questions per conversation (fewer if it runs out of anchors)")
    reference_mix: float = Field(
        0.5, ge=0, le=1, description="share of questions referring to the date; the rest name the session number"
    )
    anchor_size: dict[int, float] = Field(
        default_factory=lambda: {1: 0.7, 2: 0.2, 3: 0.1},
        description="weights of anchor sizes (1-3 consecutive responses), apportioned exactly; a single "
        "number n means always n",
    )
    min_anchor_words: int = Field(8, ge=1, description="every anchor response has at least this many words")
    exclude_padding: bool = Field(True, description="never anchor a question in the padding session")
    topic_similarity: float = Field(
        0.2,
        gt=0,
        le=1,
        description="weighted Dice similarity that adjacent "
        "responses of a multi-response anchor (and recurring topics) must reach",
    )
    context_lines: int = Field(2, ge=0, le=10, description="neighbouring responses shown on each side")
    max_overlap: float = Field(
        0.5, gt=0, le=1, description="a question must repeat less than this share of the anchor's content words"
    )
    max_copied_words: int = Field(5, ge=1, description="longest run of consecutive anchor words a question may repeat")
    max_answer_words: int = Field(20, ge=1, le=200, description="longest gold answer, in words")
    min_answer_support: float = Field(
        0.5, gt=0, le=1, description="share of the answer's content words that must occur in the anchor"
    )
    verify: bool = Field(
        False, description="a second call checks that the anchor answers the question and supports the answer"
    )
    retries: int = Field(2, ge=0, le=20, description="regenerations (new sample index) after a failed check")

    @field_validator("anchor_size", mode="before")
    @classmethod
    def _sizes(cls, value):
        if isinstance(value, int) and not isinstance(value, bool):
            value = {value: 1.0}
        if not isinstance(value, dict):
            raise ValueError("give weights per size, e.g. {1: 0.7, 2: 0.2, 3: 0.1}, or one size 1, 2 or 3")
        return value

    @field_validator("anchor_size")
    @classmethod
    def _check_sizes(cls, value: dict[int, float]) -> dict[int, float]:
        if not value or any(size not in (1, 2, 3) for size in value):
            raise ValueError("anchor sizes are 1, 2 or 3 consecutive responses")
        if any(weight < 0 for weight in value.values()) or sum(value.values()) <= 0:
            raise ValueError("anchor size weights must be non-negative with a positive sum")
        return dict(sorted(value.items()))

    def answer_limits(self) -> AnswerLimits:
        return AnswerLimits(self.max_answer_words, self.min_answer_support)
