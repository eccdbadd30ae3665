"""What `gen judge` prints (a table per source, as `gen eval` prints its tests) and the verdicts file it writes
(the same numbers and every question's verdict)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

from gen.teabag_judge.score import Result, Tally

RULES = (
    "questions without an answer are scored Incorrect without asking the judge; questions the judge gave no "
    "usable verdict for are left out of the success rate and listed"
)


def format_result(result: Result, answers: Path, dataset: Path) -> str:
    total = result.overall
    head = (
        f"{answers} on {dataset}: {total.questions:,} questions, {total.no_answer:,} without an answer (scored "
        f"Incorrect), {total.not_judged:,} not judged (left out of the rate)"
    )
    width = max([len(name) for name in result.sources] + [len("all"), len("source")])
    lines = [head, f"{'source':<{width}}  {'questions':>9}  {'scored':>6}  {'correct':>7}  {'success':>7}"]
    rows = [*result.sources.items(), ("all", total)]
    lines += [row(name, tally, width) for name, tally in rows]
    not_judged = [v for v in result.verdicts if v.failure is not None]
    if not_judged:
        lines.append("not judged: " + "; ".join(f"{v.question_id} ({v.failure})" for v in not_judged))
    return "\n".join(lines)


def row(name: str, tally: Tally, width: int) -> str:
    rate = "-" if tally.success_rate is None else f"{tally.success_rate:.3f}"
    return f"{name:<{width}}  {tally.questions:>9,}  {tally.scored:>6,}  {tally.correct:>7,}  {rate:>7}"


def tally_json(tally: Tally) -> dict[str, Any]:
    return {
        "questions": tally.questions,
        "no_answer": tally.no_answer,
        "not_judged": tally.not_judged,
        "scored": tally.scored,
        "correct": tally.correct,
        "success_rate": tally.success_rate,
    }


def result_json(result: Result, *, dataset: Path, answers: Path, judge: dict[str, Any]) -> dict[str, Any]:
    return {
        "dataset": str(dataset),
        "answers": str(answers),
        "judge": judge,
        "rules": RULES,
        "overall": tally_json(result.overall),
        "sources": {name: tally_json(tally) for name, tally in result.sources.items()},
        "items": [asdict(verdict) for verdict in result.verdicts],
    }
