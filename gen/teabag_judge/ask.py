"""The TeaBag judge's rubric: the prompt (templates/prompts/teabag_judge.j2), the reply it must give, and one case
per answered question. The calls themselves go through gen.judging (the engine's cache, correction round and
reject limit, as for every judge of gen)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from gen.judging.asking import Case, Rubric, VerdictReply
from gen.teabag_judge.items import Question

PROMPT = "prompts/teabag_judge.j2"
STEP = "teabag_judge"


class Reply(VerdictReply):
    """What the judge must answer: a short reason first (it says why before it decides), then the verdict."""

    verdict: Literal["Correct", "Incorrect"]


RUBRIC = Rubric(STEP, PROMPT, Reply)


def judge_case(question: Question, answer: str) -> Case:
    values = {
        "asker": question.asker,
        "answerer": question.answerer,
        "question": question.question,
        "correct_answer": question.correct_answer,
        "contradicted_fact": question.contradicted_fact,
        "answer": answer,
    }
    return Case(question.question_id, values)


def judge_cases(questions: Sequence[Question], answers: Mapping[str, str]) -> list[Case]:
    """One case per question given here (all of them answered)."""
    return [judge_case(q, answers[q.question_id]) for q in questions]
