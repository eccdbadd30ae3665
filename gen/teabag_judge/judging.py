"""Asking the judging endpoint about every answered teabag question (the work of `gen judge`, whose API function
is gen.judge in gen/api/scoring.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gen.llm.config import RunSettings
    from gen.teabag_judge.endpoint import Judge
    from gen.teabag_judge.items import Question
    from gen.teabag_judge.score import Result


def run_judge(
    questions: Sequence[Question], answers: Mapping[str, str], judge_endpoint: Judge, settings: RunSettings
) -> tuple[Result, dict[str, Any]]:
    """The verdicts, and what to say about the judge: endpoint, model, prompt and the calls it took."""
    from gen.llm.engine import Engine
    from gen.teabag_judge.ask import PROMPT, STEP, ask_judge
    from gen.teabag_judge.score import has_answer, verdicts
    from gen.templating import template_id

    name, config = judge_endpoint.name, judge_endpoint.config
    asked = [q for q in questions if has_answer(answers, q.question_id)]
    with Engine({name: config}, settings) as engine:
        outcomes = ask_judge(engine, asked, answers, name, config.max_reject_rate) if asked else {}
        report = engine.report()
    step = report["steps"].get(STEP, {})
    about = {
        "endpoint": name,
        "model": config.model,
        "fingerprint": report["endpoints"][name]["fingerprint"],
        "prompt": PROMPT,
        "prompt_id": template_id(PROMPT),
        **{key: step.get(key, 0) for key in ("calls_made", "calls_cached", "input_tokens", "output_tokens")},
        "cost_usd": step.get("cost_usd"),
    }
    return verdicts(questions, answers, outcomes), about
