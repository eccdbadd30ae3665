"""The judge of `gen eval --answers`: does a system's answer convey a gold answer that a model wrote?

Exact match and token F1 suit a computed answer ("1 May 2023"); a written one ("Ruth said she had finished the
first draft of her thesis.") can be conveyed in other words, so a model says yes or no. Its instructions
(templates/prompts/answer_judge.j2) follow the criteria of LongMemEval's judge (src/evaluation/evaluate_qa.py),
written in gen's words: yes when the answer holds the gold answer, in other words or as the steps that lead to
it; no when it gives only part of it. An abstention question (the gold answer says the conversations do not hold
what is asked) is judged by the abstention rule instead: yes when the answer says it cannot tell.

The questions and answers come checked from gen.eval (gen/eval/answers.py `read_sheet`); each answered question
with a written gold answer is one case of gen.judging's `ask`; the verdicts go back to gen.eval to be counted, and
into the verdicts file written here (every question of a judged config, in dataset order).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from gen.eval.answers import AnswersResult, Asked, Sheet, Verdict, tally_json
from gen.judging.asking import Case, Judgement, Rubric, Ruling, VerdictReply

if TYPE_CHECKING:
    from gen.judging.endpoint import Judge
    from gen.llm.config import RunSettings

PROMPT = "prompts/answer_judge.j2"
STEP = "answer_judge"
JUDGED, NO_ANSWER, NOT_JUDGED = "judge", "no answer", "not judged"
RULES = (
    "each answer to a question whose gold answer a model wrote is judged yes or no; a question without an answer "
    "(no line, or only spaces) is no without asking the judge; a question the judge gave no usable verdict for is "
    "left out of the rate and listed; rate = yes / (questions - not judged)"
)


class Reply(VerdictReply):
    """The judge's reply: a short reason first (it says why before it decides), then yes or no."""

    verdict: Literal["yes", "no"]


RUBRIC = Rubric(STEP, PROMPT, Reply)


def judge_case(asked: Asked) -> Case:
    values = {
        "question": asked.question,
        "dialogue": asked.dialogue,
        "gold_answer": asked.gold,
        "answer": asked.answer,
        "abstention": asked.abstention,
    }
    return Case(asked.question_id, values)


def judge_sheet(sheet: Sheet, judge: Judge, settings: RunSettings) -> tuple[dict[str, Verdict], Judgement]:
    """Every answered question with a written gold answer judged: its verdict for gen.eval, and the judgement."""
    from gen.judging.asking import ask

    judgement = ask(RUBRIC, [judge_case(asked) for asked in sheet.to_judge()], judge, settings)
    verdicts = {qid: verdict_of(ruling) for qid, ruling in judgement.rulings.items()}
    return verdicts, judgement


def verdict_of(ruling: Ruling) -> Verdict:
    return Verdict(None if ruling.verdict is None else ruling.verdict == "yes", ruling.failure)


def verdicts_json(sheet: Sheet, result: AnswersResult, judgement: Judgement) -> dict[str, Any]:
    """The verdicts file: who judged, the rules, the tallies per config and test, and every judged config's
    questions in dataset order with the judge's verdict, reason and raw reply (or why there is none)."""
    configs = {
        config.config: {
            "tests": {test: tally_json(tally) for test, tally in (config.judged_tests or {}).items()},
            "pooled": tally_json(config.judged_pooled) if config.judged_pooled is not None else None,
        }
        for config in result.results
        if config.written
    }
    items = [
        item_json(asked, judgement.rulings.get(asked.question_id))
        for config in sheet.configs.values()
        if config.written
        for asked in config.asked
    ]
    return {
        "dataset": str(sheet.dataset),
        "answers": str(sheet.answers),
        "judge": judgement.about,
        "rules": RULES,
        "configs": configs,
        "items": items,
    }


def item_json(asked: Asked, ruling: Ruling | None) -> dict[str, Any]:
    """One question's line; every answered question was asked, so only an unanswered one has no ruling."""
    base = {
        "question_id": asked.question_id,
        "config": asked.config,
        "test": asked.test,
        "abstention": asked.abstention,
    }
    if ruling is None:
        nothing = {"judge_reason": None, "judge_reply": None, "failure": None, "cached": False}
        return {**base, "verdict": "no", "by": NO_ANSWER, **nothing}
    return {
        **base,
        "verdict": ruling.verdict,
        "by": JUDGED if ruling.verdict is not None else NOT_JUDGED,
        "judge_reason": ruling.reason,
        "judge_reply": ruling.reply,
        "failure": ruling.failure,
        "cached": ruling.cached,
    }
