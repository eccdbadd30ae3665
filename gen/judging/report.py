"""What `gen judge` prints (a table per source, as `gen eval` prints its tests) and the verdicts file it writes
(the same numbers and every question's verdict), written beside its target and renamed into place."""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gen.errors import GenError
from gen.judging.score import Result, Tally

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


def write_verdicts(output: Path, data: dict[str, Any]) -> None:
    """All or nothing: written beside the target and renamed into place."""
    if output.is_dir():
        raise GenError("the output is a folder", file=output, expected="a file name for the verdicts")
    partial = output.with_name(f".{output.name}.tmp-{os.getpid()}")
    try:
        partial.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        partial.replace(output)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise GenError(f"cannot write the verdicts ({exc.strerror})", file=output) from None
