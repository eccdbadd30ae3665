"""Anchor selection for time+content questions (docs/time-content-questions.md): the responses a question will
be about, fixed before any LLM call.

An anchor is one response, or 2-3 consecutive responses of one session on one calendar date that share a
topic. The anchor's speaker is the one who says most of it (words; ties go to the earlier response).

Lexical measures (no embeddings, so selection is fast and exactly reproducible):

* content stems of a text: lower-cased words minus stop words (function words, chat fillers, verbs of saying,
  time words, small numbers), the two speakers' names, words starting with a digit and words shorter than
  three letters, with a light plural strip (``dogs`` -> ``dog``, ``stories`` -> ``story``);
* weights: the inverse document frequency of each stem over the conversation's responses, log(N / df), so
  words said all the time ("awesome", "glad") count little and words of one topic count a lot;
* topic similarity of two stem sets: the weighted Dice coefficient 2 w(A∩B) / (w(A) + w(B)). Consecutive
  responses form one anchor only when every adjacent pair reaches ``topic_similarity`` (default 0.2).

A reference *window* is what the time reference selects: the anchor's session (``session`` questions) or
its calendar date (``date`` questions). Each candidate gets, for its window:

* ``specificity`` — the weight of its stems, w(A): how much particular content there is to ask about;
* ``recurrence`` — responses by the same speaker *outside* the window whose similarity with the anchor
  reaches ``topic_similarity``: the topic comes back at other times, so the question needs its time
  reference (the paper's "many responses about video games, only one on that date by that speaker");
* ``clash`` — responses by the same speaker *inside* the window (outside the anchor) that are that similar:
  they might answer the question too (they are shown to the model as things the question must not match).

``value = specificity × (1 + min(recurrence, 2)) / 3 / (1 + clash)``, halved when the speaker's last words in
the anchor are a question (it asks rather than tells); within a cell the highest value wins, ties broken by
the seeded generator.

Spread: slots go round-robin over the real sessions, alternating the two speakers, starting at a seeded
session; each slot takes the best unused candidate of its (session, speaker) cell, falling back to smaller
anchor sizes, then to the next cells. Anchors never overlap or touch (one response apart at least).
Anchor sizes and reference kinds are apportioned exactly (largest remainder) and shuffled by seed.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import date

from gen.products.time_content.lexical import name_words, stems_without
from gen.timeline import Response, Timeline

RECURRENCE_CAP = 2
ASKING_FACTOR = 0.5
# A float sum of positive weights is within (count × 2^-53) of the exact sum, relative: for any plausible
# count far inside this margin on the similarity, so sums outside it are decided by the plain float sum.
ROUNDING_MARGIN = 1e-9


class Weights:
    """Inverse document frequency of content stems over one conversation's responses: log(N / df).
    Stems said all the time ("awesome", "glad") weigh little; stems of one topic weigh a lot.
    Keeps each response's stems, weight and an index stem -> responses, so that similarities with one
    anchor are computed only against the responses sharing a stem with it."""

    def __init__(self, stem_sets: Sequence[frozenset[str]]):
        self.stems = list(stem_sets)
        postings: dict[str, list[int]] = defaultdict(list)
        for index, stems in enumerate(self.stems):
            for s in stems:
                postings[s].append(index)
        n = max(len(self.stems), 1)
        self.postings = dict(postings)
        self.idf = {s: math.log(n / len(where)) for s, where in postings.items()}
        self.masses = [self.mass(stems) for stems in self.stems]

    def mass(self, stems: Iterable[str]) -> float:
        """Exactly rounded (math.fsum), so the value does not depend on set iteration order."""
        idf = self.idf
        return math.fsum([idf.get(s, 0.0) for s in stems])

    def similarity(self, a: int, b: int) -> float:
        """Weighted Dice coefficient of responses a and b: 2 w(A∩B) / (w(A) + w(B)), 0 when either side weighs
        nothing."""
        total = self.masses[a] + self.masses[b]
        return 2 * self.mass(self.stems[a] & self.stems[b]) / total if total > 0 else 0.0

    def similar(self, stems: frozenset[str], mass: float, threshold: float) -> list[int]:
        """The responses whose similarity with `stems` (of weight `mass`) reaches `threshold` (same values as
        :meth:`similarity`). Shared weights are summed in plain floats, which differ from the exactly rounded
        sum by far less than ROUNDING_MARGIN; only a pair that close to the threshold is summed exactly."""
        idf, postings, masses = self.idf, self.postings, self.masses  # locals: this loop is the hot one
        rough: dict[int, float] = defaultdict(float)
        for s in stems:
            weight = idf.get(s, 0.0)
            for index in postings.get(s, ()):
                rough[index] += weight
        out = []
        for index, shared in rough.items():
            total = mass + masses[index]
            if total <= 0 or 2 * shared < (threshold - ROUNDING_MARGIN) * total:
                continue
            if 2 * shared >= (threshold + ROUNDING_MARGIN) * total or self.reaches(stems, index, total, threshold):
                out.append(index)
        return sorted(out)

    def reaches(self, stems: frozenset[str], index: int, total: float, threshold: float) -> bool:
        """The exact test for a pair near the threshold: 2 w(A∩B) / (w(A) + w(B)) >= threshold."""
        return 2 * self.mass(stems & self.stems[index]) / total >= threshold


@dataclass(frozen=True)
class Anchor:
    conversation_id: str
    responses: tuple[Response, ...]
    speaker: str
    stems: frozenset[str]

    @property
    def indices(self) -> list[int]:
        return [r.response_index for r in self.responses]

    @property
    def session_index(self) -> int:
        return self.responses[0].session_index

    @property
    def date(self) -> date:
        return self.responses[0].timestamp.date()

    @property
    def size(self) -> int:
        return len(self.responses)

    @property
    def text(self) -> str:
        return anchor_text(self.responses)


def anchor_text(responses: Sequence[Response]) -> str:
    """The anchor's text as written to the record: one line per response, "Speaker: text"."""
    return "\n".join(f"{r.speaker}: {r.text}" for r in responses)


def main_speaker(responses: Sequence[Response], word_counts: Sequence[int] | None = None) -> str:
    """Who says most of the responses (in words; ties go to the earlier response). `word_counts`, when
    given, holds each response's word count (counted once per conversation by the caller)."""
    counts = word_counts if word_counts is not None else [len(r.text.split()) for r in responses]
    totals: dict[str, int] = {}
    for r, count in zip(responses, counts, strict=True):
        totals[r.speaker] = totals.get(r.speaker, 0) + count
    best = max(totals.values())
    return next(r.speaker for r in responses if totals[r.speaker] == best)


Similar = list[tuple[int, Response]]  # (index, response) of the same speaker's responses on one topic


class Candidate:
    """An admissible anchor. Its recurrence and clash (the similar responses of the same speaker outside and
    inside each window) are found on first use: a conversation's slots visit only a few of its (session,
    speaker) cells, so most candidates are never compared with anything, and scoring them would be wasted."""

    def __init__(self, anchor: Anchor, specificity: float, asks: bool, similar: Callable[[], Similar]) -> None:
        self.anchor = anchor
        self.specificity = specificity  # idf mass of the anchor's stems: how much specific content it has
        self.asks = asks  # the main speaker's words end with a question: the anchor asks rather than tells
        self._similar = similar  # -> (index, response) of the same speaker's responses on the same topic
        self._scored: tuple[dict[str, int], dict[str, list[int]]] | None = None
        self._values: dict[str, float] = {}
        self.ceiling = specificity * (ASKING_FACTOR if asks else 1.0)  # the highest value it could have

    @property
    def recurrence(self) -> dict[str, int]:
        """kind -> same-speaker responses outside the window on the same topic."""
        return self._scores()[0]

    @property
    def clash(self) -> dict[str, list[int]]:
        """kind -> same-speaker responses inside the window (outside the anchor) on the same topic."""
        return self._scores()[1]

    def value(self, kind: str) -> float:
        """specificity × (1 + min(recurrence, cap)) / (1 + cap) / (1 + clash), halved when it asks."""
        found = self._values.get(kind)
        if found is None:
            recurs = (1 + min(self.recurrence[kind], RECURRENCE_CAP)) / (1 + RECURRENCE_CAP)
            found = self.specificity * recurs / (1 + len(self.clash[kind])) * (ASKING_FACTOR if self.asks else 1.0)
            self._values[kind] = found
        return found

    def _scores(self) -> tuple[dict[str, int], dict[str, list[int]]]:
        if self._scored is None:
            self._scored = windows(self.anchor, self._similar())
        return self._scored


@dataclass(frozen=True)
class Slot:
    """One question to be written: its anchor, the reference kind, and what the scoring saw."""

    number: int  # 0-based position within the conversation
    anchor: Anchor
    kind: str  # "date" | "session"
    recurrence: int
    related: tuple[int, ...]  # same-speaker responses in the window on the same topic (the clash)


def candidates(
    timeline: Timeline, sizes: Iterable[int], min_words: int, exclude_padding: bool, topic_similarity: float
) -> list[Candidate]:
    """Every admissible anchor of the given sizes, scored for both reference kinds."""
    drop = name_words(timeline.conversation.speakers)
    responses = timeline.responses
    stems = [stems_without(r.text, drop) for r in responses]  # each text tokenised once, here
    weights = Weights(stems)
    word_counts = [len(r.text.split()) for r in responses]
    usable = [count >= min_words and not (exclude_padding and r.is_padding) for r, count in zip(responses, word_counts)]
    on_topic = [weights.similarity(i, i + 1) >= topic_similarity for i in range(len(responses) - 1)]
    places = [(r.session_index, r.timestamp.date()) for r in responses]  # an anchor keeps to one of each
    out = []
    for size in sorted(set(sizes)):
        for start in range(len(responses) - size + 1):
            end = start + size
            if not (all(usable[start:end]) and all(on_topic[start : end - 1])):  # each follows on from the last
                continue
            if size > 1 and len(set(places[start:end])) > 1:
                continue
            window = responses[start:end]
            joined = stems[start] if size == 1 else frozenset().union(*stems[start:end])
            if not joined:
                continue
            speaker = window[0].speaker if size == 1 else main_speaker(window, word_counts[start:end])
            anchor = Anchor(timeline.conversation_id, tuple(window), speaker, joined)
            mass = weights.masses[start] if size == 1 else weights.mass(joined)
            out.append(score(anchor, mass, responses, weights, topic_similarity))
    return out


def score(
    anchor: Anchor, mass: float, responses: Sequence[Response], weights: Weights, topic_similarity: float
) -> Candidate:
    """The anchor (whose stems weigh `mass`), to be scored for both reference kinds when first asked."""
    own = [r for r in anchor.responses if r.speaker == anchor.speaker]
    asks = own[-1].text.rstrip().endswith("?")
    return Candidate(anchor, mass, asks, lambda: similar_responses(anchor, responses, weights, mass, topic_similarity))


def similar_responses(
    anchor: Anchor, responses: Sequence[Response], weights: Weights, mass: float, topic_similarity: float
) -> Similar:
    """(index, response) of the other responses of the anchor's speaker whose similarity with the anchor
    reaches the threshold."""
    inside = set(anchor.indices)
    found = ((i, responses[i]) for i in weights.similar(anchor.stems, mass, topic_similarity) if i not in inside)
    return [(i, r) for i, r in found if r.speaker == anchor.speaker]


def windows(anchor: Anchor, similar: Similar) -> tuple[dict[str, int], dict[str, list[int]]]:
    """(recurrence, clash) of an anchor per reference kind, from its similar same-speaker responses."""
    recurrence: dict[str, int] = {"date": 0, "session": 0}
    clash: dict[str, list[int]] = {"date": [], "session": []}
    day, session = anchor.date, anchor.session_index
    for index, r in similar:
        same = {"date": r.timestamp.date() == day, "session": r.session_index == session}
        for kind, in_window in same.items():
            if in_window:
                clash[kind].append(index)
            else:
                recurrence[kind] += 1
    return recurrence, clash


def apportion(weights: dict, total: int) -> list:
    """`total` items split by weight exactly (largest remainder; ties to the earlier key)."""
    keys = [k for k, w in weights.items() if w > 0]
    mass = sum(weights[k] for k in keys)
    if not keys or total <= 0:
        return []
    shares = {k: total * weights[k] / mass for k in keys}
    counts = {k: int(shares[k]) for k in keys}
    rest = total - sum(counts.values())
    for k in sorted(keys, key=lambda k: -(shares[k] - counts[k]))[:rest]:
        counts[k] += 1
    return [k for k in keys for _ in range(counts[k])]


def select(
    timeline: Timeline,
    *,
    count: int,
    size_weights: dict[int, float],
    date_share: float,
    min_words: int,
    exclude_padding: bool,
    topic_similarity: float,
    rng: random.Random,
) -> list[Slot]:
    """Up to `count` slots for one conversation (fewer when it runs out of admissible anchors)."""
    pool = candidates(
        timeline, [s for s, w in size_weights.items() if w > 0] or [1], min_words, exclude_padding, topic_similarity
    )
    tiebreak = {id(c): rng.random() for c in pool}
    cells: dict[tuple[int, str], list[Candidate]] = {}
    for c in pool:
        cells.setdefault((c.anchor.session_index, c.anchor.speaker), []).append(c)
    sessions = sorted({key[0] for key in cells})
    speakers = list(timeline.conversation.speakers)
    if not sessions:
        return []
    sizes = apportion(size_weights, count)
    rng.shuffle(sizes)
    kinds = apportion({"date": date_share, "session": 1 - date_share}, count)
    rng.shuffle(kinds)
    offset = rng.randrange(len(sessions))
    order = []  # round-robin over (session, speaker): each round visits every session, speakers alternate
    for round_ in range(2):
        for position in range(len(sessions)):
            s = sessions[(offset + position) % len(sessions)]
            order.append((s, speakers[(position + round_) % 2]))

    taken: set[int] = set()
    slots: list[Slot] = []
    cursor = 0
    for number in range(count):
        kind, size = kinds[number], sizes[number]
        chosen = None
        for step in range(len(order)):
            cell = order[(cursor + step) % len(order)]
            chosen = best(cells.get(cell, []), size, kind, taken, tiebreak)
            if chosen:
                cursor = (cursor + step + 1) % len(order)
                break
        if chosen is None:
            break
        taken.update(chosen.anchor.indices)
        slots.append(Slot(len(slots), chosen.anchor, kind, chosen.recurrence[kind], tuple(chosen.clash[kind])))
    return slots


def best(pool: list[Candidate], size: int, kind: str, taken: set[int], tiebreak: dict) -> Candidate | None:
    """The best free candidate of `size` (else the largest smaller size that has one)."""
    for wanted in range(size, 0, -1):
        free = [
            c
            for c in pool
            if c.anchor.size == wanted
            and not any(i in taken or i - 1 in taken or i + 1 in taken for i in c.anchor.indices)
        ]
        if free:
            return strongest(free, kind, tiebreak)
    return None


def strongest(free: list[Candidate], kind: str, tiebreak: dict) -> Candidate:
    """The first of `free` with the highest (value rounded to 9 places, tiebreak). A value never exceeds its
    candidate's ceiling (every factor after specificity is at most 1, and float products and quotients are
    monotone), so candidates are tried by falling ceiling and the search stops at the first ceiling that
    rounds below the best value found: those left could not win, and are never scored."""
    order = sorted(range(len(free)), key=lambda i: -free[i].ceiling)
    chosen, chosen_key = free[order[0]], (-1.0, 0.0, 0)
    for i in order:
        c = free[i]
        if round(c.ceiling, 9) < chosen_key[0]:
            break
        key = (round(c.value(kind), 9), tiebreak[id(c)], -i)  # -i: among equals the first, as max() keeps
        if key > chosen_key:
            chosen, chosen_key = c, key
    return chosen
