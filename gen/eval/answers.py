"""`gen eval --answers`: score a system's written answers against the gold answers of a dataset.

The answers file is JSON lines `{"question_id": "...", "answer": "..."}`, one per question at most; every line is
checked against the dataset (the question must exist and have a gold answer). Each question of a config with
gold answers gets the exact match and token F1 of answer_metrics (LoCoMo's rules); a question without a line
scores 0 for both. Scores are averaged per test and pooled over the config's questions.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen.errors import GenError
from gen.eval.answer_metrics import exact_match, token_f1
from gen.eval.dataset import (
    Dataset,
    GoldAnswers,
    Question,
    finished_report,
    numbered_jsonl,
    open_dataset,
)
from gen.eval.score import only_exported

EXPECTED_LINE = '{"question_id": "<a question_id of the dataset>", "answer": "<the system\'s answer>"}'
NO_ANSWERS = "a dataset with a config of questions with gold answers (temporal_reasoning, or gold_answers)"


@dataclass(frozen=True)
class AnswerScore:
    questions: int
    exact_match: float
    f1: float


@dataclass
class ConfigAnswers:
    config: str
    group_field: str
    questions: int
    answered: int
    tests: dict[str, AnswerScore]
    pooled: AnswerScore


@dataclass
class AnswersResult:
    dataset: Path
    answers: Path
    results: list[ConfigAnswers] = field(default_factory=list)
    subset: Path | None = None


@dataclass(frozen=True)
class Gold:
    config: str
    test: str
    answer: str


def evaluate_answers(dataset_path: Path, answers_path: Path, subset: Path | None = None) -> AnswersResult:
    finished_report(Path(dataset_path), "scored")
    dataset = open_dataset(dataset_path)
    questions = answered_configs(dataset)
    if subset is not None:
        kept = only_exported({config: [q for q, _ in items] for config, items in questions.items()}, subset)
        ids = {config: {q.question_id for q in items} for config, items in kept.items()}
        questions = {
            config: [p for p in items if p[0].question_id in ids[config]]
            for config, items in questions.items()
            if config in ids
        }
    gold = {q.question_id: Gold(config, q.group, answer) for config, items in questions.items() for q, answer in items}
    written = read_answers(Path(answers_path), gold)
    result = AnswersResult(Path(dataset_path), Path(answers_path), subset=subset)
    for config, items in questions.items():
        scored = [(q.group, gold[q.question_id].answer, written.get(q.question_id)) for q, _ in items]
        result.results.append(score_config(config, dataset.declared[config]["group_field"], scored))
    return result


def answered_configs(dataset: Dataset) -> dict[str, list[tuple[Question, str]]]:
    """The question configs with gold answers in this dataset, each with its questions that have one (a time
    query whose base question's answer was rejected has none, and is not scored)."""
    answered = {}
    for name in dataset.question_configs:
        gold = GoldAnswers(dataset, name)
        if gold.declared:
            found = [(q, gold.of(q.item, q.question_id)) for q in dataset.questions(name)]
            answered[name] = [(q, answer) for q, answer in found if answer is not None]
    if not answered:
        raise GenError("the dataset has no question config with gold answers", file=dataset.folder, expected=NO_ANSWERS)
    return answered


def read_answers(path: Path, gold: dict[str, Gold]) -> dict[str, str]:
    """question_id → the system's answer, for every line of the file (the first bad line is one error naming the
    file, the line and the field)."""
    answers: dict[str, str] = {}
    first_line: dict[str, int] = {}
    for number, record in numbered_jsonl(path, f"a JSONL file of lines {EXPECTED_LINE}", strict=True):
        place = f"line {number}"
        question_id = record.get("question_id")
        if not isinstance(question_id, str):
            raise GenError("question_id is missing or not a string", file=path, record=place, field="question_id")
        if question_id not in gold:
            raise GenError(
                f"unknown question id {question_id!r}: no question with a gold answer has it",
                file=path,
                record=place,
                field="question_id",
            )
        if question_id in first_line:
            raise GenError(
                f"question {question_id} already has an answer on line {first_line[question_id]}",
                file=path,
                record=place,
                field="question_id",
                expected="one line per question",
            )
        answer = record.get("answer")
        if not isinstance(answer, str):
            raise GenError(
                "answer is missing or not a string", file=path, record=place, field="answer", expected=EXPECTED_LINE
            )
        answers[question_id] = answer
        first_line[question_id] = number
    return answers


def score_config(config: str, group_field: str, scored: list[tuple[str, str, str | None]]) -> ConfigAnswers:
    """Each (test, gold, written or None) scored, then averaged per test and over all of them."""
    per_test: defaultdict[str, list[tuple[float, float]]] = defaultdict(list)
    everything: list[tuple[float, float]] = []
    for test, gold, written in scored:
        pair = (exact_match(written, gold), token_f1(written, gold)) if written is not None else (0.0, 0.0)
        per_test[test].append(pair)
        everything.append(pair)
    answered = sum(written is not None for _, _, written in scored)
    tests = {test: mean(pairs) for test, pairs in per_test.items()}
    return ConfigAnswers(config, group_field, len(scored), answered, tests, mean(everything))


def mean(pairs: list[tuple[float, float]]) -> AnswerScore:
    if not pairs:
        return AnswerScore(0, 0.0, 0.0)
    return AnswerScore(len(pairs), sum(p[0] for p in pairs) / len(pairs), sum(p[1] for p in pairs) / len(pairs))


def format_answers(result: AnswersResult) -> str:
    blocks = [f"{result.answers} on {result.dataset} (exact match and token F1, as LoCoMo scores answers)"]
    if result.subset is not None:
        blocks[0] += f"\nonly the questions of the export {result.subset}"
    for config in result.results:
        width = max([len(test) for test in config.tests] + [len("pooled")])
        lines = [
            f"{config.config}: {config.questions:,} questions, {config.questions - config.answered:,} without an "
            "answer (scored 0)",
            f"{config.group_field:<{width}}  {'questions':>9}  {'exact':>6}  {'F1':>6}",
        ]
        rows = [*config.tests.items(), ("pooled", config.pooled)]
        lines += [f"{label:<{width}}  {s.questions:>9,}  {s.exact_match:>6.3f}  {s.f1:>6.3f}" for label, s in rows]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def answers_json(result: AnswersResult) -> dict[str, Any]:
    def scores(score: AnswerScore) -> dict[str, Any]:
        return {"questions": score.questions, "exact_match": score.exact_match, "f1": score.f1}

    return {
        "dataset": str(result.dataset),
        "answers": str(result.answers),
        "configs": {
            config.config: {
                "group_field": config.group_field,
                "questions": config.questions,
                "answered": config.answered,
                "tests": {test: scores(score) for test, score in config.tests.items()},
                "pooled": scores(config.pooled),
            }
            for config in result.results
        },
        "only_questions_of": str(result.subset) if result.subset is not None else None,
    }


def answers_table(result: AnswersResult) -> str:
    """The scores as CSV rows (config, test, questions, exact_match, f1): one per test, then the pooled row."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["config", "group_field", "test", "questions", "exact_match", "f1"])
    for config in result.results:
        for test, score in [*config.tests.items(), ("(pooled)", config.pooled)]:
            writer.writerow([config.config, config.group_field, test, score.questions, score.exact_match, score.f1])
    return out.getvalue()
