"""Two primitives of time+content question planning and checking, against values worked out by hand."""

from __future__ import annotations

import math

from gen.products.time_content.anchors import Weights
from gen.products.time_content.question_rules import copied_run


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


def test_strongest_finds_what_scoring_every_candidate_finds_and_skips_those_that_cannot_win(tmp_path):
    import random

    from gen.products.time_content import anchors
    from tests.test_time_content_questions import context, make_recipe

    harness = context(make_recipe(tmp_path), tmp_path)
    try:
        timeline = harness.units[0].stamped
    finally:
        harness.ctx.llm().close()
    pool = anchors.Pool(timeline, [1, 2, 3], 8, True, 0.2)
    rng = random.Random(7)
    tiebreak = [rng.random() for _ in range(len(pool))]
    for kind in ("date", "session"):
        for _ in range(20):  # random subsets of the pool, given as best() gives them: by falling ceiling
            free = sorted(rng.sample(range(len(pool)), rng.randint(1, min(12, len(pool)))))
            ordered = sorted(free, key=lambda c: -pool.ceilings[c])
            expected = max(free, key=lambda c: (round(pool.value(c, kind), 9), tiebreak[c]))  # scores them all
            assert anchors.strongest(pool, ordered, kind, tiebreak) == expected
            assert all(pool.value(c, kind) <= pool.ceilings[c] for c in free)
    # a candidate whose ceiling is below a value already found is never scored
    strong, low = next(
        (a, b)
        for a in range(len(pool))
        for b in range(len(pool))
        if round(pool.ceilings[b], 9) < round(pool.value(a, "date"), 9)
    )
    fresh = anchors.Pool(timeline, [1, 2, 3], 8, True, 0.2)
    assert anchors.strongest(fresh, [strong, low], "date", [0.1] * len(fresh)) == strong
    assert low not in fresh.scored
