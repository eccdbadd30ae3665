"""`gen view --verdicts FILE`: the verdicts `gen judge` wrote for the run's TeaBag answers, shown on each TeaBag
question's page beside the question, with the system's answer when the answers file the verdicts name is still
there. Read once at start, so a file that is not a verdicts file is one message before the viewer listens."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen import reading
from gen.callers import named
from gen.errors import GenError

EXPECTED = "the verdicts file gen judge writes (ANSWERS.verdicts.json, or the one --output named)"
TEABAG = "teabag"


@dataclass
class Verdicts:
    path: Path
    judge: dict[str, Any]  # the judge's endpoint, model and prompt, as gen judge wrote them
    items: dict[str, dict[str, Any]]  # question_id → its verdict, judge reason and reply
    answers: dict[str, str] = field(default_factory=dict)  # question_id → the system's answer
    answers_note: str | None = None  # why the answers are not shown


def read_verdicts(path: Path) -> Verdicts:
    data = reading.read_json(path, EXPECTED)
    if not isinstance(data, dict) or not isinstance(data.get("items"), list):
        raise GenError("this file has no `items` list of verdicts", file=path, expected=EXPECTED)
    items: dict[str, dict[str, Any]] = {}
    for number, item in enumerate(data["items"]):
        if not isinstance(item, dict) or not isinstance(item.get("question_id"), str):
            raise GenError(
                "this verdict names no question",
                file=path,
                record=f"items[{number}]",
                field="question_id",
                expected=EXPECTED,
            )
        items[item["question_id"]] = item
    judge = data["judge"] if isinstance(data.get("judge"), dict) else {}
    verdicts = Verdicts(path, judge, items)
    named = data.get("answers")
    if not isinstance(named, str) or not named:
        verdicts.answers_note = "the verdicts file names no answers file"
    elif not Path(named).is_file():
        verdicts.answers_note = f"the answers file the verdicts name is not there any more ({named})"
    else:
        from gen.teabag_judge.items import read_answers

        verdicts.answers = read_answers(Path(named), set(items))
    return verdicts


def require_teabag(verdicts: Verdicts, configs: dict[str, Any]) -> None:
    """Verdicts are shown on TeaBag questions' pages: a run without them has nowhere to show any."""
    if TEABAG not in configs:
        raise GenError(
            f"the run has no {TEABAG} config, so no question to show these verdicts on",
            file=verdicts.path,
            field=named("--verdicts", "ViewOptions.verdicts"),
            expected="the verdicts of a run built with the teabag product",
        )
