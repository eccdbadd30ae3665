"""The base questions of temporal_reasoning and their computed answers, from the chosen topics and the timeline.

    last_mention   When did we last talk about X?          the date of X's last mention
    days_ago       How many days ago did we talk about X?  today (the date of "now") minus that date, in days
    which_first    Which came first, X or Y?               the topic whose mentions all lie on an earlier date
    time_between   How long after X did Y come up?         the days from X's date to Y's

The pair tests take topics that were each talked about on one date only, on two different dates, so "first"
and "how long after" have one answer. The pairs are a seeded choice.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date
from itertools import combinations
from typing import Any

from gen.products.reasoning.options import PAIR_TESTS, TemporalReasoningOptions
from gen.products.reasoning.topics import Topic


@dataclass(frozen=True)
class Answer:
    kind: str  # "date", "days" or "choice"
    date: date | None = None
    days: int | None = None
    choice: str | None = None

    def value(self) -> dict[str, Any]:
        """The structured gold answer as the record carries it (one of the three set, by kind)."""
        return {
            "date": self.date.isoformat() if self.date else None,
            "days": self.days,
            "choice": self.choice,
        }


@dataclass(frozen=True)
class BaseQuestion:
    test: str
    topics: tuple[str, ...]  # as the question names them: for which_first in the seeded order it asks them
    answer: Answer
    evidence: tuple[int, ...]  # every mention of the topics, sorted


def base_questions(
    topics: list[Topic], today: date, options: TemporalReasoningOptions, rng: random.Random
) -> Iterator[BaseQuestion]:
    """The conversation's base questions, tests in the options' order."""
    pairs = chosen_pairs(topics, options.pairs_per_conversation, rng) if set(options.tests) & set(PAIR_TESTS) else []
    for test in options.tests:
        if test == "last_mention":
            for topic in topics:
                yield BaseQuestion(test, (topic.phrase,), Answer("date", date=topic.last), topic.mentions)
        elif test == "days_ago":
            for topic in topics:
                yield BaseQuestion(
                    test, (topic.phrase,), Answer("days", days=(today - topic.last).days), topic.mentions
                )
        elif test == "which_first":
            for (earlier, later), earlier_named_first in pairs:
                named = (earlier.phrase, later.phrase) if earlier_named_first else (later.phrase, earlier.phrase)
                yield BaseQuestion(test, named, Answer("choice", choice=earlier.phrase), evidence(earlier, later))
        else:  # time_between
            for (earlier, later), _ in pairs:
                days = (later.last - earlier.last).days
                yield BaseQuestion(
                    test, (earlier.phrase, later.phrase), Answer("days", days=days), evidence(earlier, later)
                )


def evidence(*topics: Topic) -> tuple[int, ...]:
    return tuple(sorted({index for topic in topics for index in topic.mentions}))


def chosen_pairs(topics: list[Topic], wanted: int, rng: random.Random) -> list[tuple[tuple[Topic, Topic], bool]]:
    """A seeded choice of pairs (earlier, later) of one-date topics on different dates, each with whether
    which_first names the earlier one first (a coin toss, so the answer is not always the first named)."""
    single = [topic for topic in topics if topic.one_day]
    fitting = [(a, b) if a.last < b.last else (b, a) for a, b in combinations(single, 2) if a.last != b.last]
    picked = sorted(rng.sample(range(len(fitting)), min(wanted, len(fitting))))
    return [(fitting[i], rng.random() < 0.5) for i in picked]
