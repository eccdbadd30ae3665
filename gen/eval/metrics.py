"""Recall and F2 of retrieved response indices against the relevant ones, then means per test, over tests and
over questions.

Pure functions over plain values: no file, no dataset. F2 weighs recall four times as much as precision
(F-beta with beta = 2), because an answer built from a few extra responses is usually still right and one
missing the responses it needs is not.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class QuestionScore:
    recall: float
    f2: float


@dataclass(frozen=True)
class GroupScore:
    questions: int
    recall: float
    f2: float
    all_found: float  # share of questions whose every relevant index was retrieved (LongMemEval's recall_all)
    any_found: float  # share with at least one retrieved (LongMemEval's recall_any)


def question_score(relevant: Collection[int], retrieved: Sequence[int], k: int | None = None) -> QuestionScore:
    """Recall and F2 of one ranking. Only the first k indices count when k is given; a repeated index counts
    once; an empty retrieval (or one with no relevant index) scores 0 for both."""
    ranking = retrieved[:k] if k is not None else retrieved
    chosen = set(ranking)
    gold = set(relevant)
    hits = len(gold & chosen)
    if hits == 0:
        return QuestionScore(0.0, 0.0)
    precision = hits / len(chosen)
    recall = hits / len(gold)
    return QuestionScore(recall, 5 * precision * recall / (4 * precision + recall))


def means_per_test(scored: Iterable[tuple[str, QuestionScore]]) -> dict[str, GroupScore]:
    """Mean recall and F2 (and the shares of questions with all or any relevant index found) over the questions
    of each test, tests in order of first appearance."""
    sums: dict[str, list[float]] = {}
    for test, score in scored:
        total = sums.setdefault(test, [0, 0.0, 0.0, 0, 0])
        total[0] += 1
        total[1] += score.recall
        total[2] += score.f2
        total[3] += score.recall == 1.0
        total[4] += score.recall > 0.0
    return {
        test: GroupScore(int(n), recall / n, f2 / n, every / n, some / n)
        for test, (n, recall, f2, every, some) in sums.items()
    }


def pooled(tests: Mapping[str, GroupScore]) -> GroupScore:
    """The mean over every question, whatever its test: what a harness that scores one file of questions (LoCoMo,
    LongMemEval, BEIR on one folder) reports. A large test weighs more than a small one."""
    count = sum(t.questions for t in tests.values())
    if not count:
        return GroupScore(0, 0.0, 0.0, 0.0, 0.0)

    def weighted(field: str) -> float:
        return sum(getattr(t, field) * t.questions for t in tests.values()) / count

    return GroupScore(count, *(weighted(field) for field in ("recall", "f2", "all_found", "any_found")))


def mean_over_tests(tests: Mapping[str, GroupScore]) -> QuestionScore:
    """The unweighted mean of the per-test means: every test counts the same, whatever its size."""
    if not tests:
        return QuestionScore(0.0, 0.0)
    count = len(tests)
    return QuestionScore(sum(t.recall for t in tests.values()) / count, sum(t.f2 for t in tests.values()) / count)
