"""Topic phrases: what the questions ask about, and which responses mention each one.

A topic phrase is two content words that stand next to each other in a response and read as a thing talked about:
the second a noun (never an adverb), the first a noun or a verb in -ing that is never an adjective ("pottery class",
"collecting videos"; not "super important" or "big decision", whose first words say how, not what). Which parts of
speech a word can be comes from lemminflect's English lexicon; a word it does not know ("daycare") counts as a noun.
Texts are compared as runs of the letters a-z, lower-cased, so "Pottery-class!" mentions "pottery class" and
"pottery classes" does not. A phrase is asked about only when every response that mentions it is a real one (never
the padding) and they lie in at most `max_topic_sessions` sessions: then "the last time we talked about it" has one
clear answer. The phrases kept are a seeded choice, spread over as many dates as the conversation offers.
"""

from __future__ import annotations

import functools
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
    are in the phrase: lower case (not a name such as "Daniel") with one space between (not across a comma),
    opened by an article or a possessive ("the", "my"...), and a noun after a noun or an -ing verb."""
    first, second = phrase.split(" ")
    return (
        first != second
        and all(
            lexical.word_stem(word) is not None and word not in names and not word.endswith("ly")
            for word in (first, second)
        )
        and first in whole_words
        and second in whole_words
        and names_a_thing(first, second)
        and opened(phrase, text)
    )


# The words that open a noun phrase: a topic is "the pottery class", "my gaming team", not "pottery takes"
OPENERS = "the|a|an|my|our|your|his|her|their|this|that|these|those|some"


def opened(phrase: str, text: str) -> bool:
    """Whether the text holds the phrase, as written, right after one of OPENERS (in any case)."""
    return re.search(rf"(?<![\w'])(?i:{OPENERS}) {phrase}(?![a-z])", text) is not None


def names_a_thing(first: str, second: str) -> bool:
    """A noun that can be no adverb ("class", not "outside" or "better"; a word the lexicon does not know, such
    as "daycare", counts as a noun) after a noun or a verb in -ing that can never be an adjective
    ("pottery class", "collecting videos"; not "safe home", "cool designs" or "amazing news"). A first word the
    lexicon does not know ("kinda") is no noun: it is as often slang as a name."""
    head, modifier = parts_of_speech(second), parts_of_speech(first)
    noun_or_gerund = "NOUN" in modifier or (first.endswith("ing") and "VERB" in modifier)
    noun = not head or ("NOUN" in head and "ADV" not in head)
    return noun and noun_or_gerund and "ADJ" not in modifier


@functools.lru_cache(maxsize=1 << 16)
def parts_of_speech(word: str) -> frozenset[str]:
    """The parts of speech the lexicon gives a word (empty when it does not know it)."""
    from lemminflect import getAllLemmas  # its lexicon loads on first use

    return frozenset(getAllLemmas(word))


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
