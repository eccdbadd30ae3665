"""The recipe options of the time-query products. Both share `WindowOptions`, so their base questions (and
group ids) match."""

from __future__ import annotations

from typing import Annotated, Any, Literal, get_args

from pydantic import Field, ValidationInfo, field_validator

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
# The tests that can ask about a time when the two people did not talk (docs/time-queries.md, "Abstentions"): a
# calendar date, N days ago, last <weekday>, a month, N months ago. The session tests cannot (every session of the
# log has responses, and a session number beyond the last is after now); date_span is built from runs of sessions;
# day_span and earlier_today always end at now, so their window is the recent talk rather than a time chosen.
ABSTAINING_TESTS: tuple[Test, ...] = ("dates", "month", "rel_day", "rel_month", "last_day")
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


class AbstentionOptions(StrictModel):
    """Questions about times when nothing was said (an empty window, answered by abstaining)."""

    per_test: int = Field(
        ge=1,
        description="empty windows asked about per conversation and per test that can have one (dates, month, "
        "rel_day, rel_month, last_day): a seeded draw, fewer when the conversation has fewer",
    )


class TimeQueriesOptions(WindowOptions):
    abstentions: AbstentionOptions | None = Field(
        default=None,
        description="also ask about times inside the conversation's span when the two people did not talk "
        "(relevant set [], `abstention: true`); off by default",
    )

    @property
    def abstaining_tests(self) -> list[Test]:
        """The asked tests that get abstention questions, in the options' order (none with the option off)."""
        return [test for test in self.tests if test in ABSTAINING_TESTS] if self.abstentions else []

    @field_validator("abstentions")
    @classmethod
    def abstentions_have_a_test(cls, value: AbstentionOptions | None, info: ValidationInfo) -> AbstentionOptions | None:
        tests = info.data.get("tests")  # validated before (declared first); absent when it was refused
        if value is not None and tests is not None and not any(test in ABSTAINING_TESTS for test in tests):
            raise ValueError(f"abstentions need at least one of the tests {', '.join(ABSTAINING_TESTS)} in tests")
        return value


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
