"""Each question's verdict and the success rates, overall and per source.

A question is
- judged: the judge said Correct or Incorrect;
- without an answer (no line, or a blank answer): Incorrect, no call made — a system that says nothing has not
  caught the false premise;
- not judged: the judge gave no usable verdict (the engine's reason and raw reply are kept); it is left out of
  the rates rather than guessed, and listed.

success rate = Correct / (questions − not judged).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from gen.judging.asking import Ruling
from gen.teabag_judge.items import Question

JUDGED, NO_ANSWER, NOT_JUDGED = "judge", "no answer", "not judged"


@dataclass(frozen=True)
class Verdict:
    question_id: str
    source: str
    verdict: str | None  # "Correct", "Incorrect", or None when not judged
    by: str  # JUDGED, NO_ANSWER or NOT_JUDGED
    judge_reason: str | None = None  # the reason the judge gave with its verdict
    judge_reply: str | None = None  # the judge's raw reply
    failure: str | None = None  # why there is no verdict (not judged)
    cached: bool = False


@dataclass
class Tally:
    questions: int = 0
    no_answer: int = 0
    not_judged: int = 0
    correct: int = 0

    @property
    def scored(self) -> int:
        return self.questions - self.not_judged

    @property
    def success_rate(self) -> float | None:
        return self.correct / self.scored if self.scored else None

    def add(self, verdict: Verdict) -> None:
        self.questions += 1
        self.no_answer += verdict.by == NO_ANSWER
        self.not_judged += verdict.by == NOT_JUDGED
        self.correct += verdict.verdict == "Correct"


@dataclass
class Result:
    verdicts: list[Verdict]
    overall: Tally = field(default_factory=Tally)
    sources: dict[str, Tally] = field(default_factory=dict)  # by source name, sorted

    @classmethod
    def of(cls, verdicts: list[Verdict]) -> Result:
        result = cls(verdicts)
        for verdict in verdicts:
            result.overall.add(verdict)
            result.sources.setdefault(verdict.source, Tally()).add(verdict)
        result.sources = dict(sorted(result.sources.items()))
        return result


def has_answer(answers: Mapping[str, str], question_id: str) -> bool:
    return bool(answers.get(question_id, "").strip())


def verdicts(questions: Sequence[Question], answers: Mapping[str, str], rulings: Mapping[str, Ruling]) -> Result:
    """Every question's verdict, in dataset order; `rulings` holds the judge's for the answered ones."""
    return Result.of([verdict_of(q, rulings.get(q.question_id)) for q in questions])


def verdict_of(question: Question, ruling: Ruling | None) -> Verdict:
    qid, source = question.question_id, question.source
    if ruling is None:
        return Verdict(qid, source, "Incorrect", NO_ANSWER)
    by = JUDGED if ruling.verdict is not None else NOT_JUDGED
    return Verdict(qid, source, ruling.verdict, by, ruling.reason, ruling.reply, ruling.failure, ruling.cached)
