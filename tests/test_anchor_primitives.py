"""Two primitives of time+content question planning and checking, against values worked out by hand."""

from __future__ import annotations

import math

from gen.products.content.anchors import Weights
from gen.products.content.question_checks import copied_run


def test_copied_run_is_the_longest_run_of_consecutive_shared_words():
    # question "a b a b c", anchor "x a b c a b": "a b c" is the longest run in both ("b a" is not in the anchor)
    assert copied_run("a b a b c", "x a b c a b") == 3
    assert copied_run("A, b!", "b a") == 1  # word order counts, case and punctuation do not
    assert copied_run("nothing shared", "x y z") == 0


def test_similar_agrees_with_similarity_exactly_at_the_threshold():
    stems = [frozenset(s.split()) for s in ("tokyo trip sushi", "tokyo sushi ramen", "garden roses", "trip roses")]
    weights = Weights(stems)
    # by hand: idf = log(4/df); tokyo, sushi, trip, roses df 2 -> log 2; ramen, garden df 1 -> log 4 = 2 log 2
    assert math.isclose(weights.similarity(0, 1), 2 * (2 * math.log(2)) / (3 * math.log(2) + 4 * math.log(2)))
    at = weights.similarity(0, 1)
    assert 1 in weights.similar(stems[0], weights.masses[0], at)  # reaching the threshold exactly counts
    assert 1 not in weights.similar(stems[0], weights.masses[0], math.nextafter(at, 1.0))
    assert weights.similar(stems[0], weights.masses[0], 0.0) == [0, 1, 3]  # 2 shares no stem with 0
