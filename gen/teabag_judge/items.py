"""What is judged: the `teabag` questions of a dataset and a system's answers to them.

The dataset is read with gen.eval's readers, so a run folder and an export folder (parquet, as published) both
work. The answers file is JSONL, one `{"question_id": ..., "answer": "..."}` per line; it is checked whole
before any call is made, and the first bad line is an error naming the file and the line.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from gen.errors import GenError
from gen.eval.dataset import Dataset, Located, numbered_jsonl, require

CONFIG = "teabag"
EXPECTED_LINE = '{"question_id": "<a question_id of the teabag config>", "answer": "<the system\'s answer>"}'


@dataclass(frozen=True)
class Question:
    """One counterfactual question: what the judge is shown besides the system's answer."""

    question_id: str
    source: str
    asker: str
    answerer: str
    question: str
    correct_answer: str
    contradicted_fact: str


def read_questions(dataset: Dataset) -> list[Question]:
    """The teabag config's questions in file order; a missing field or a repeated id names the record."""
    if CONFIG not in dataset.files:
        raise GenError(
            f"the dataset has no {CONFIG} config",
            file=dataset.folder,
            expected=f"a dataset built with the {CONFIG} product ({', '.join(dataset.files) or 'no configs'} found)",
        )
    questions: list[Question] = []
    first_place: dict[str, str] = {}
    for item in dataset.records(CONFIG):
        question = read_question(item)
        if question.question_id in first_place:
            raise GenError(
                f"question id {question.question_id} appears twice (first at {first_place[question.question_id]})",
                file=item.file,
                record=item.place,
                field="question_id",
                expected="unique question ids",
            )
        first_place[question.question_id] = item.place
        questions.append(question)
    if not questions:
        raise GenError(f"the {CONFIG} config holds no questions", file=dataset.folder)
    return questions


def read_question(item: Located) -> Question:
    text = {name: require(item, name, str) for name in Question.__dataclass_fields__}
    return Question(**text)


def read_answers(path: Path, known: set[str]) -> dict[str, str]:
    """question_id → answer for every line of the file, in file order."""
    path = Path(path)
    answers: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, line in numbered_jsonl(path, f"a JSONL file of lines {EXPECTED_LINE}", strict=True):
        question_id, answer = line.get("question_id"), line.get("answer")
        if not isinstance(question_id, str):
            raise line_error(path, number, "question_id is missing or not a string", "question_id", EXPECTED_LINE)
        if question_id not in known:
            raise line_error(
                path, number, f"unknown question id {question_id!r}: no {CONFIG} question has it", "question_id"
            )
        if question_id in first_line:
            raise line_error(
                path,
                number,
                f"question {question_id} already has an answer on line {first_line[question_id]}",
                "question_id",
                "one line per question",
            )
        if not isinstance(answer, str):
            raise line_error(path, number, "answer is missing or not a string", "answer", "the answer as a string")
        answers[question_id] = answer
        first_line[question_id] = number
    return answers


def line_error(path: Path, number: int, message: str, field: str, expected: str | None = None) -> GenError:
    return GenError(message, file=path, record=f"line {number}", field=field, expected=expected)
