"""A predictions file: JSON lines `{"question_id": "...", "retrieved": [response_index, ...]}`, best first.

Every line is checked against the dataset: the question must exist and every index must be a response of
that question's conversation. The first bad line is an error naming the file, the line and the field.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from gen.errors import GenError
from gen.eval.dataset import numbered_jsonl

EXPECTED_LINE = '{"question_id": "<a question_id of the dataset>", "retrieved": [<response_index>, ...]}'


@dataclass(frozen=True)
class Target:
    """What a prediction is checked against: its question's conversation and how many responses it has."""

    conversation_id: str
    responses: int


def read_predictions(path: Path, targets: Mapping[str, Target]) -> dict[str, list[int]]:
    """question_id → retrieved indices in rank order, for every line of the file."""
    path = Path(path)
    predictions: dict[str, list[int]] = {}
    first_line: dict[str, int] = {}
    for number, record in numbered_jsonl(path, f"a JSONL file of lines {EXPECTED_LINE}", strict=True):
        where = Where(path, number)
        question_id = record.get("question_id")
        if not isinstance(question_id, str):
            raise where.error("question_id is missing or not a string", "question_id", EXPECTED_LINE)
        target = targets.get(question_id)
        if target is None:
            raise where.error(f"unknown question id {question_id!r}: no question of the dataset has it", "question_id")
        if question_id in first_line:
            raise where.error(
                f"question {question_id} already has a prediction on line {first_line[question_id]}",
                "question_id",
                "one line per question",
            )
        predictions[question_id] = checked_indices(record.get("retrieved"), target, where)
        first_line[question_id] = number
    return predictions


@dataclass(frozen=True)
class Where:
    path: Path
    line: int

    def error(self, message: str, field: str, expected: str | None = None) -> GenError:
        return GenError(message, file=self.path, record=f"line {self.line}", field=field, expected=expected)


def checked_indices(retrieved: object, target: Target, where: Where) -> list[int]:
    if not isinstance(retrieved, list):
        raise where.error("retrieved is missing or not a list", "retrieved", "a list of response_index values")
    if not retrieved or (
        set(map(type, retrieved)) == {int} and 0 <= min(retrieved) <= max(retrieved) < target.responses
    ):
        return retrieved  # the usual case, checked in C; otherwise find the first bad entry to name it
    for position, index in enumerate(retrieved):
        if not isinstance(index, int) or isinstance(index, bool):
            raise where.error(f"{json.dumps(index)} is not a response index", f"retrieved[{position}]", "an integer")
        if not 0 <= index < target.responses:
            raise where.error(
                f"index {index} is outside conversation {target.conversation_id}",
                f"retrieved[{position}]",
                f"a response_index from 0 to {target.responses - 1}",
            )
    return retrieved
