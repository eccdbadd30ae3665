"""The citation rule of a written answer, the one place it is stated for the generator: the reply parser runs it,
so a reply that breaks it goes back to the model in the correction round with what to fix, and a reply that still
breaks it is rejected. The validator re-checks the written records by its own path (checking.py).

The rule: every claim cites at least one response, and only responses of the window; every response of the window
is either cited by some claim or listed in `left_out` with a reason (a greeting, a thanks, a line with nothing to
report); no response is both; there is at least one claim.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Annotated

from pydantic import BaseModel, BeforeValidator, Field


def _not_a_truth_value(value: object) -> object:
    # pydantic reads JSON true as 1 and false as 0 for an int: a reply citing `true` would be recorded as resting
    # on response 1, a citation the model never made; it goes to the correction round instead
    if isinstance(value, bool):
        raise ValueError("an index number is a whole number, not true or false")
    return value


Index = Annotated[int, BeforeValidator(_not_a_truth_value)]  # a response's (or a claim's) number in a reply


class Claim(BaseModel):
    text: str = Field(min_length=1, description="one short statement of what was said, naming who said it")
    cites: list[Index] = Field(min_length=1, description="the index numbers of the responses the claim rests on")


class LeftOut(BaseModel):
    index: Index = Field(description="the index number of a response no claim rests on")
    why: str = Field(min_length=1, description="why it has nothing to add, e.g. 'a greeting'")


class WindowAnswer(BaseModel):
    """The model's reply: the answer as claims, and the responses deliberately left out."""

    claims: list[Claim] = Field(min_length=1)
    left_out: list[LeftOut] = Field(default_factory=list)


def citation_problems(answer: WindowAnswer, window: Sequence[int]) -> list[str]:
    """What breaks the rule of the module docstring, worded for the model (empty: the answer keeps it)."""
    inside = set(window)
    problems = []
    for number, claim in enumerate(answer.claims, 1):
        if outside := sorted(set(claim.cites) - inside):
            problems.append(f"claim {number} cites {_listed(outside)}, which {_are(outside)} not shown")
        if not claim.text.strip():
            problems.append(f"claim {number} has no text")
    cited = {index for claim in answer.claims for index in claim.cites}
    left = [entry.index for entry in answer.left_out]
    if outside := sorted(set(left) - inside):
        problems.append(f"left_out lists {_listed(outside)}, which {_are(outside)} not shown")
    if both := sorted(cited & set(left)):
        problems.append(f"{_listed(both)} {_are(both)} both cited and left out")
    if blank := [entry.index for entry in answer.left_out if not entry.why.strip()]:
        problems.append(f"left_out gives no reason for {_listed(blank)}")
    if missing := sorted(inside - cited - set(left)):
        problems.append(f"{_listed(missing)} {_are(missing)} neither cited by a claim nor listed in left_out")
    return problems


def check_citations(window: Sequence[int]):
    """The rule as the parser's check: raises ValueError naming every problem (shown in the correction round)."""

    def rules(answer: WindowAnswer) -> None:
        if problems := citation_problems(answer, window):
            raise ValueError("; ".join(problems) + " (cite only the index numbers shown, and account for each of them)")

    return rules


def answer_text(claims: Iterable[str]) -> str:
    """The answer as one text: the claims in order, each ending a sentence."""
    return " ".join(_sentence(claim) for claim in claims)


def _sentence(text: str) -> str:
    text = " ".join(text.split())
    return text if text[-1:] in ".!?" else f"{text}."


def _listed(indices: Sequence[int]) -> str:
    return f"response {indices[0]}" if len(indices) == 1 else "responses " + ", ".join(map(str, indices))


def _are(indices: Sequence[int]) -> str:
    return "is" if len(indices) == 1 else "are"
