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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date

from gen.products.lexical import name_words, text_stems
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
        self.postings = postings  # read with .get, which adds nothing
        idf = self.idf = {s: math.log(n / len(where)) for s, where in postings.items()}
        self.masses = [math.fsum(map(idf.__getitem__, stems)) for stems in self.stems]  # as mass() sums them

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


@dataclass(frozen=True)
class Slot:
    """One question to be written: its anchor, the reference kind, and what the scoring saw."""

    number: int  # 0-based position within the conversation
    anchor: Anchor
    kind: str  # "date" | "session"
    recurrence: int
    related: tuple[int, ...]  # same-speaker responses in the window on the same topic (the clash)


class Pool:
    """Every admissible anchor of one conversation, as parallel lists indexed by pool position (the order
    sizes, then starts). A conversation has about one candidate per response and a run plans many
    conversations, so candidates are positions rather than objects, and an :class:`Anchor` is made only for
    the chosen ones.

    A candidate's recurrence and clash (the similar responses of the same speaker outside and inside each
    window) are found on first use: a conversation's slots visit only a few of its (session, speaker) cells,
    so most candidates are never compared with anything, and scoring them would be wasted."""

    def __init__(
        self, timeline: Timeline, sizes: Iterable[int], min_words: int, exclude_padding: bool, topic_similarity: float
    ) -> None:
        self.timeline = timeline
        self.topic_similarity = topic_similarity
        responses = self.responses = timeline.responses
        drop = name_words(timeline.conversation.speakers)
        stems = [text_stems(r.text, drop) for r in responses]  # each text tokenised once, here
        self.weights = Weights(stems)
        word_counts = [len(r.text.split()) for r in responses]
        self._on_topic: list[bool] | None = None  # each response on the topic of the one before, once needed
        self.days = [r.timestamp.date() for r in responses]
        self.sessions = [r.session_index for r in responses]
        self.starts: list[int] = []
        self.sizes: list[int] = []
        self.speakers: list[str] = []
        self.stems: list[frozenset[str]] = []
        self.specificity: list[float] = []  # idf mass of the anchor's stems: how much specific content it has
        self.asks: list[bool] = []  # the main speaker's words end with a question: it asks rather than tells
        self.ceilings: list[float] = []  # the highest value each could have
        self.scored: dict[int, tuple[dict[str, int], dict[str, list[int]]]] = {}  # (recurrence, clash), once found
        usable = [c >= min_words and not (exclude_padding and r.is_padding) for r, c in zip(responses, word_counts)]
        for size in sorted(set(sizes)):
            if size == 1:
                self._add_single_responses(stems, usable)
            else:
                self._add_runs(size, stems, word_counts, usable)

    def _add_single_responses(self, stems: list[frozenset[str]], usable: list[bool]) -> None:
        masses = self.weights.masses
        for start, r in enumerate(self.responses):
            if usable[start] and stems[start]:
                self._add(start, 1, r.speaker, stems[start], masses[start], r.text)

    def _add_runs(self, size: int, stems: list[frozenset[str]], word_counts: list[int], usable: list[bool]) -> None:
        """Runs of `size` consecutive usable responses of one session and one day, each on the topic of the one
        before."""
        responses, weights, places = self.responses, self.weights, list(zip(self.sessions, self.days))
        if self._on_topic is None:
            self._on_topic = [weights.similarity(i, i + 1) >= self.topic_similarity for i in range(len(responses) - 1)]
        on_topic = self._on_topic
        for start in range(len(responses) - size + 1):
            end = start + size
            if not (all(usable[start:end]) and all(on_topic[start : end - 1])) or len(set(places[start:end])) > 1:
                continue
            joined = frozenset().union(*stems[start:end])
            if not joined:
                continue
            window = responses[start:end]
            speaker = main_speaker(window, word_counts[start:end])
            own = [r for r in window if r.speaker == speaker]
            self._add(start, size, speaker, joined, weights.mass(joined), own[-1].text)

    def _add(self, start: int, size: int, speaker: str, stems: frozenset[str], mass: float, last_words: str) -> None:
        asks = last_words.rstrip().endswith("?")
        self.starts.append(start)
        self.sizes.append(size)
        self.speakers.append(speaker)
        self.stems.append(stems)
        self.specificity.append(mass)
        self.asks.append(asks)
        self.ceilings.append(mass * (ASKING_FACTOR if asks else 1.0))

    def __len__(self) -> int:
        return len(self.starts)

    def anchor(self, c: int) -> Anchor:
        start = self.starts[c]
        responses = self.responses[start : start + self.sizes[c]]
        return Anchor(self.timeline.conversation_id, responses, self.speakers[c])

    def cell(self, c: int) -> tuple[int, str]:
        """The (session, speaker) the candidate's slot goes round."""
        return self.sessions[self.starts[c]], self.speakers[c]

    def value(self, c: int, kind: str) -> float:
        """specificity × (1 + min(recurrence, cap)) / (1 + cap) / (1 + clash), halved when it asks."""
        recurrence, clash = self.scores(c)
        recurs = (1 + min(recurrence[kind], RECURRENCE_CAP)) / (1 + RECURRENCE_CAP)
        return self.specificity[c] * recurs / (1 + len(clash[kind])) * (ASKING_FACTOR if self.asks[c] else 1.0)

    def scores(self, c: int) -> tuple[dict[str, int], dict[str, list[int]]]:
        """(recurrence, clash) per reference kind: the same speaker's responses on the same topic outside and
        inside the window."""
        found = self.scored.get(c)
        if found is None:
            found = self.scored[c] = windows(
                self.days[self.starts[c]], self.sessions[self.starts[c]], self.similar_responses(c)
            )
        return found

    def similar_responses(self, c: int) -> Similar:
        """(index, response) of the other responses of the candidate's speaker whose similarity with it
        reaches the threshold."""
        start, end, speaker = self.starts[c], self.starts[c] + self.sizes[c], self.speakers[c]
        found = self.weights.similar(self.stems[c], self.specificity[c], self.topic_similarity)
        responses = self.responses
        return [(i, responses[i]) for i in found if not start <= i < end and responses[i].speaker == speaker]


def windows(day: date, session: int, similar: Similar) -> tuple[dict[str, int], dict[str, list[int]]]:
    """(recurrence, clash) of an anchor on `day` in `session` per reference kind, from its similar same-speaker
    responses."""
    recurrence: dict[str, int] = {"date": 0, "session": 0}
    clash: dict[str, list[int]] = {"date": [], "session": []}
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
    pool = Pool(
        timeline, [s for s, w in size_weights.items() if w > 0] or [1], min_words, exclude_padding, topic_similarity
    )
    tiebreak = [rng.random() for _ in range(len(pool))]
    cells = cells_of(pool)
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

    blocked = bytearray(len(timeline.responses) + 1)  # taken responses and their neighbours
    slots: list[Slot] = []
    cursor = 0
    for number in range(count):
        kind, size = kinds[number], sizes[number]
        chosen = None
        for step in range(len(order)):
            cell = order[(cursor + step) % len(order)]
            chosen = best(pool, cells.get(cell, {}), size, kind, blocked, tiebreak)
            if chosen is not None:
                cursor = (cursor + step + 1) % len(order)
                break
        if chosen is None:
            break
        start, end = pool.starts[chosen], pool.starts[chosen] + pool.sizes[chosen]
        low = max(start - 1, 0)
        blocked[low : end + 1] = b"\x01" * (end + 1 - low)
        recurrence, clash = pool.scores(chosen)
        slots.append(Slot(len(slots), pool.anchor(chosen), kind, recurrence[kind], tuple(clash[kind])))
    return slots


def cells_of(pool: Pool) -> dict[tuple[int, str], dict[int, list[int]]]:
    """(session, speaker) -> size -> the candidates by falling ceiling (pool order among equals): the order in
    which :func:`best` tries them."""
    cells: dict[tuple[int, str], dict[int, list[int]]] = {}
    for c in range(len(pool)):
        cells.setdefault(pool.cell(c), {}).setdefault(pool.sizes[c], []).append(c)
    ceilings = pool.ceilings
    for by_size in cells.values():
        for candidates in by_size.values():
            candidates.sort(key=lambda c: -ceilings[c])  # stable: pool order among equal ceilings
    return cells


def best(
    pool: Pool, by_size: dict[int, list[int]], size: int, kind: str, blocked: bytearray, tiebreak: list[float]
) -> int | None:
    """The best free candidate of `size` (else the largest smaller size that has one)."""
    for wanted in range(size, 0, -1):
        starts = pool.starts
        free = [c for c in by_size.get(wanted, ()) if not any(blocked[starts[c] : starts[c] + wanted])]
        if free:
            return strongest(pool, free, kind, tiebreak)
    return None


def strongest(pool: Pool, free: list[int], kind: str, tiebreak: list[float]) -> int:
    """The candidate of `free` (given by falling ceiling, pool order among equals) with the highest (value
    rounded to 9 places, tiebreak), the first in pool order among equals. A value never exceeds its
    candidate's ceiling (every factor after specificity is at most 1, and float products and quotients are
    monotone), so the search stops at the first ceiling that rounds below the best value found: those left
    could not win, and are never scored."""
    chosen, chosen_key = free[0], (-1.0, 0.0, 0)
    for c in free:
        if round(pool.ceilings[c], 9) < chosen_key[0]:
            break
        key = (round(pool.value(c, kind), 9), tiebreak[c], -c)  # -c: among equals the first, as max() keeps
        if key > chosen_key:
            chosen, chosen_key = c, key
    return chosen
