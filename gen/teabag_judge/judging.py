"""Asking the judging endpoint about every answered teabag question (the work of `gen judge`, whose API function
is gen.judge in gen/api/scoring.py), through gen.judging."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gen.judging.endpoint import Judge
    from gen.llm.config import RunSettings
    from gen.teabag_judge.items import Question
    from gen.teabag_judge.score import Result


def run_judge(
    questions: Sequence[Question], answers: Mapping[str, str], judge_endpoint: Judge, settings: RunSettings
) -> tuple[Result, dict[str, Any]]:
    """The verdicts, and what to say about the judge: endpoint, model, prompt and the calls it took."""
    from gen.judging.asking import ask
    from gen.teabag_judge.ask import RUBRIC, judge_cases
    from gen.teabag_judge.score import has_answer, verdicts

    asked = [q for q in questions if has_answer(answers, q.question_id)]
    judgement = ask(RUBRIC, judge_cases(asked, answers), judge_endpoint, settings)
    return verdicts(questions, answers, judgement.rulings), judgement.about
