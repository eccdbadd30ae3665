"""Content words of a text, shared by the question products (the time+content anchors and checks, the topic
phrases of temporal_reasoning): lower-cased word tokens minus stop words (function words, chat fillers, verbs of
saying, time words, small numbers), words starting with a digit and words shorter than three letters, with a
light plural strip (``dogs`` -> ``dog``, ``stories`` -> ``story``). No model and no dictionary, so both are fast
and exactly reproducible."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache

TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

# Function words, chat fillers, verbs of saying and time words: none of them tells what a response is about.
STOP_WORDS = frozenset(
    """
a about above after again against ago all almost also always am an and any anyway are aren't around as at
away back be because been before being below between both but by can can't cannot could couldn't did didn't
do does doesn't doing don't done down during each either else enough even ever every few for from further get
gets getting go goes going gone good got gotta great had hadn't has hasn't have haven't having he he'd he'll
he's her here here's hers herself hey hi him himself his how how's however i i'd i'll i'm i've if in into is
isn't it it'd it'll it's its itself just keep kind know let let's like little lot lots made make makes many may
maybe me might mine more most much must my myself need never new next no nor not nothing now of off oh ok okay
on once one only or other others our ours ourselves out over own pretty quite rather re really right said same
say saying says see seem seems she she'd she'll she's should shouldn't since so some something sometimes soon
still such sure take talk talked talking tell thank thanks than that that's the their theirs them themselves
then there there's these they they'd they'll they're they've thing things think this those though through
thought to told too totally try trying under until up upon us very want wanted was wasn't way we we'd we'll
we're we've well were weren't what what's whatever when where where's whether which while who who's whole whom
why will with won't would wouldn't wow yeah yes yet you you'd you'll you're you've your yours yourself
yourselves mention mentioned mentions ask asked asks share shared sharing discuss discussed anything everything
anyone everyone someone somebody definitely absolutely went along turn turns turned
""".split()  # noqa: SIM905 - a word list reads and edits best as plain text
) | frozenset(
    """
today tonight yesterday tomorrow morning afternoon evening night day days week weeks weekend month months year
years last ago earlier later time times monday tuesday wednesday thursday friday saturday sunday january february
march april june july august september october november december hour hours minute minutes second seconds
zero two three four five six seven eight nine ten eleven twelve twenty thirty forty fifty hundred thousand half
first third fourth fifth come comes coming came happen happened happens look looks looking looked want wants
""".split()  # noqa: SIM905 - as above
)


def stem(word: str) -> str:
    if word.endswith("'s"):
        word = word[:-2]
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    return word


def words(text: str) -> list[str]:
    """Lower-cased word tokens (apostrophes kept inside words)."""
    return TOKEN.findall(text.lower().replace("\u2019", "'"))


def word_stem(word: str) -> str | None:
    """The stem a lower-case word contributes, or None for stop words, numbers and words under three letters."""
    if word in STOP_WORDS or word[0].isdigit() or len(word) < 3:
        return None
    return stem(word)


class StemTable(dict):
    """word -> word_stem(word), filled on first sight (and emptied when it holds MAX_WORDS): a corpus has far
    fewer distinct words than words, and a lookup by `map` costs less than a call per word."""

    MAX_WORDS = 1 << 17

    def __missing__(self, word: str) -> str | None:
        if len(self) >= self.MAX_WORDS:
            self.clear()
        found = self[word] = word_stem(word)
        return found


STEMS = StemTable()


@lru_cache(maxsize=4096)
def stems_without(text: str, drop: frozenset[str]) -> frozenset[str]:
    """Content-word stems of a text, leaving out `drop` (lower-case words, matched before or after stemming).
    Cached for the checks, which see an anchor's text again for each of its questions."""
    return text_stems(text, drop)


def text_stems(text: str, drop: frozenset[str]) -> frozenset[str]:
    """:func:`stems_without`, not cached: for texts seen once (each response, when its conversation's anchors
    are chosen)."""
    return word_stems(words(text), drop)


def word_stems(tokens: Iterable[str], drop: frozenset[str]) -> frozenset[str]:
    """:func:`stems_without` of a text already split by :func:`words`."""
    kept = set(tokens)  # each distinct word once
    kept -= drop
    stems = set(map(STEMS.__getitem__, kept))
    stems -= drop
    stems.discard(None)
    return frozenset(stems)


def content_stems(text: str, drop: Iterable[str] = ()) -> frozenset[str]:
    """Content-word stems of a text; `drop` holds extra words to ignore (names, time words)."""
    return stems_without(text, frozenset(w.lower() for w in drop))


def name_words(names: Iterable[str]) -> frozenset[str]:
    return frozenset(w for name in names for w in words(name)) | frozenset(
        stem(w) for name in names for w in words(name)
    )
