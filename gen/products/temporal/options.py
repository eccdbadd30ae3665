"""The recipe options of the time-query products. Both share `WindowOptions`, so their base questions (and
group ids) match."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Field, field_validator

from gen.recipe import StrictModel

Test = Literal[
    "session",
    "session_span",
    "rel_session",
    "dates",
    "date_span",
    "month",
    "rel_day",
    "rel_month",
    "day_span",
    "last_day",
    "earlier_today",
]
TESTS: tuple[Test, ...] = get_args(Test)  # the one list of the 11 tests, in the order reports show them
NumeralStyle = Literal["digits", "words"]
NUMERAL_STYLES: tuple[NumeralStyle, ...] = get_args(NumeralStyle)
DEFAULT_VARIANTS_PER_GROUP = 3  # about what a published temporal benchmark has per base question (2-3)


class WindowOptions(StrictModel):
    """Options shared by both time-query products (their base questions must match)."""

    tests: list[Test] = Field(
        default_factory=lambda: list(TESTS), min_length=1, description="which of the 11 tests to build"
    )
    span_length: int = Field(default=3, ge=2, description="L: sessions per run for session_span and date_span")
    day_spans: list[int] = Field(
        default_factory=lambda: [3, 7],
        min_length=1,
        description="N for day_span: dates with 0 <= (today - date).days <= N",
    )
    numeral_styles: list[NumeralStyle] = Field(default_factory=lambda: list(NUMERAL_STYLES), min_length=1)
    max_variants_per_group: Annotated[int, Field(ge=1)] | Literal["all"] = Field(
        default=DEFAULT_VARIANTS_PER_GROUP,
        description="wordings kept per base question: a seeded sample of this many (default 3), or all",
    )

    @field_validator("max_variants_per_group", mode="before")
    @classmethod
    def number_or_all(cls, value: Any) -> Any:
        if value is None:  # older recipes wrote null for "every wording"
            return "all"
        if value == "all" or (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
            return value
        raise ValueError(f"{value!r} is neither a number of wordings (1 or more) nor all")

    @property
    def variant_limit(self) -> int | None:
        """At most this many wordings per base question; None keeps them all."""
        return None if self.max_variants_per_group == "all" else self.max_variants_per_group

    @field_validator("day_spans")
    @classmethod
    def positive_spans(cls, value: list[int]) -> list[int]:
        if any(n < 1 for n in value):
            raise ValueError("every day span must be at least 1")
        return list(dict.fromkeys(value))

    @field_validator("tests", "numeral_styles")
    @classmethod
    def no_repeats(cls, value: list) -> list:
        return list(dict.fromkeys(value))


class TimeQueriesOptions(WindowOptions):
    pass


class AmbiguousTimeQueriesOptions(WindowOptions):
    pairing: Literal["rotate", "all"] = Field(
        default="rotate",
        description="rotate: each dialogue variant once per base question, time phrases in turn; "
        "all: every dialogue variant with every time phrase",
    )
    frames: list[str] | None = Field(
        default=None,
        description="names of the dialogue frames to use (files under templates/ambiguous/frames/); default all",
    )
