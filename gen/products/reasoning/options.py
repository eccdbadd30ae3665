"""The recipe options of temporal_reasoning."""

from __future__ import annotations

from typing import Literal, get_args

from pydantic import Field, field_validator

from gen.recipe import StrictModel

Test = Literal["last_mention", "days_ago", "which_first", "time_between"]
TESTS: tuple[Test, ...] = get_args(Test)  # the one list of the tests, in the order reports show them
PAIR_TESTS: tuple[Test, ...] = ("which_first", "time_between")


class TemporalReasoningOptions(StrictModel):
    tests: list[Test] = Field(default_factory=lambda: list(TESTS), min_length=1, description="which tests to build")
    topics_per_conversation: int = Field(
        default=6, ge=1, description="topic phrases asked about per conversation (a seeded choice among those that fit)"
    )
    pairs_per_conversation: int = Field(
        default=4, ge=1, description="pairs of topics asked about by which_first and time_between, per conversation"
    )
    max_topic_sessions: int = Field(
        default=1,
        ge=1,
        description="a topic phrase is asked about only if it occurs in at most this many sessions, so its last "
        "mention is clear",
    )
    max_variants_per_group: int = Field(default=2, ge=1, description="wordings kept per base question (seeded)")

    @field_validator("tests")
    @classmethod
    def no_repeats(cls, value: list) -> list:
        return list(dict.fromkeys(value))
