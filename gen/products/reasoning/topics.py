"""Topic phrases: what the questions ask about, and which responses mention each one.

A topic phrase is two content words that stand next to each other in a response ("pottery class"). Texts are
compared as runs of the letters a-z, lower-cased, so "Pottery-class!" mentions "pottery class" and "pottery
classes" does not. A phrase is asked about only when every response that mentions it is a real one (never the
padding) and they lie in at most `max_topic_sessions` sessions: then "the last time we talked about it" has one
clear answer. The phrases kept are a seeded choice, spread over as many dates as the conversation offers.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from datetime import date
from itertools import pairwise

from gen.products import lexical
from gen.products.reasoning.options import TemporalReasoningOptions
from gen.timeline import Response, Timeline

LETTERS = re.compile(r"[a-z]+")


@dataclass(frozen=True)
class Topic:
    phrase: str
    mentions: tuple[int, ...]  # response indices, in order
    dates: tuple[date, ...]  # the distinct dates of the mentions, in order

    @property
    def last(self) -> date:
        return self.dates[-1]

    @property
    def one_day(self) -> bool:
        """Every mention on one date: the topic can be placed before or after another by its date alone."""
        return len(self.dates) == 1


def letter_runs(text: str) -> list[str]:
    return LETTERS.findall(text.lower())


def phrases_of(response: Response) -> set[str]:
    """Every pair of neighbouring letter runs of the response: the phrases it mentions."""
    runs = letter_runs(response.text)
    return {f"{a} {b}" for a, b in pairwise(runs)}


def candidate(phrase: str, text: str, whole_words: set[str], names: frozenset[str]) -> bool:
    """Whether a phrase a response mentions reads as a topic: two different content words, neither a speaker's
    name nor an adverb in -ly, each a whole word of the text (not half of "don't"), written in the text as they
    are in the phrase: lower case (not a name such as "Daniel") with one space between (not across a comma)."""
    first, second = phrase.split(" ")
    return (
        first != second
        and all(
            lexical.word_stem(word) is not None and word not in names and not word.endswith("ly")
            for word in (first, second)
        )
        and first in whole_words
        and second in whole_words
        and phrase in text
    )


def topics(timeline: Timeline, options: TemporalReasoningOptions, seed: int, product: str) -> list[Topic]:
    """The conversation's topics to ask about (see the module docstring), in phrase order."""
    names = lexical.name_words(timeline.conversation.speakers)
    mentioned: dict[str, list[Response]] = {}
    candidates: set[str] = set()
    for response in timeline.responses:
        said = phrases_of(response)
        for phrase in said:
            mentioned.setdefault(phrase, []).append(response)
        if not response.is_padding:
            whole = set(lexical.words(response.text))
            candidates.update(phrase for phrase in said if candidate(phrase, response.text, whole, names))
    fitting = []
    for phrase in sorted(candidates):
        responses = mentioned[phrase]
        if any(r.is_padding for r in responses):
            continue
        if len({r.session_index for r in responses}) > options.max_topic_sessions:
            continue
        dates = tuple(sorted({r.timestamp.date() for r in responses}))
        fitting.append(Topic(phrase, tuple(r.response_index for r in responses), dates))
    return choose(
        fitting, options.topics_per_conversation, random.Random(f"{seed}/{product}/{timeline.conversation_id}")
    )


def choose(fitting: list[Topic], wanted: int, rng: random.Random) -> list[Topic]:
    """A seeded choice of `wanted` topics: one per last date first (so the pairs have dates to compare), then
    the others in the shuffled order."""
    shuffled = list(fitting)
    rng.shuffle(shuffled)
    chosen: list[Topic] = []
    dates: set[date] = set()
    for topic in shuffled:
        if topic.last not in dates and len(chosen) < wanted:
            chosen.append(topic)
            dates.add(topic.last)
    rest = [topic for topic in shuffled if topic not in chosen]
    chosen += rest[: wanted - len(chosen)]
    return sorted(chosen, key=lambda topic: topic.phrase)
