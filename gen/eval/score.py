"""`gen eval`: score a predictions file against every question config of a dataset."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gen.errors import GenError
from gen.eval.dataset import QUESTION_CONFIGS, Dataset, Question, open_dataset
from gen.eval.metrics import GroupScore, QuestionScore, mean_over_tests, means_per_test, question_score
from gen.eval.predictions import Target, read_predictions


@dataclass
class ConfigResult:
    config: str
    group_field: str
    questions: int
    predicted: int  # questions with a line in the predictions file
    tests: dict[str, GroupScore]
    mean: QuestionScore

    @property
    def missing(self) -> int:
        return self.questions - self.predicted


@dataclass
class EvalResult:
    dataset: Path
    predictions: Path
    k: int | None
    results: list[ConfigResult] = field(default_factory=list)
    unscored: list[str] = field(default_factory=list)  # question configs the file has no line for


def evaluate(dataset_path: Path, predictions_path: Path, k: int | None = None) -> EvalResult:
    dataset = open_dataset(dataset_path)
    questions = {config: dataset.questions(config) for config in require_questions(dataset)}
    predictions = read_predictions(predictions_path, targets(dataset, questions))
    result = EvalResult(Path(dataset_path), Path(predictions_path), k)
    anything = bool(predictions)  # an empty file scores every config (all empty); otherwise only those it covers
    for config, items in questions.items():
        predicted = sum(q.question_id in predictions for q in items)
        if anything and predicted == 0:
            result.unscored.append(config)
            continue
        result.results.append(score_config(config, dataset, items, predictions, k, predicted))
    return result


def require_questions(dataset: Dataset) -> list[str]:
    if not dataset.question_configs:
        raise GenError(
            "the dataset has no question config to score",
            file=dataset.folder,
            expected="time_queries, ambiguous_time_queries or time_content_questions",
        )
    return dataset.question_configs


def targets(dataset: Dataset, questions: dict[str, list[Question]]) -> dict[str, Target]:
    lengths = dataset.conversation_lengths()
    found: dict[str, Target] = {}
    for items in questions.values():
        for q in items:
            if q.conversation_id not in lengths:
                raise GenError(
                    f"question {q.question_id} is about conversation {q.conversation_id}, which the log lacks",
                    file=dataset.folder,
                )
            found[q.question_id] = Target(q.conversation_id, lengths[q.conversation_id])
    return found


def score_config(
    config: str,
    dataset: Dataset,
    items: list[Question],
    predictions: dict[str, list[int]],
    k: int | None,
    predicted: int,
) -> ConfigResult:
    scored = ((q.group, question_score(q.relevant, predictions.get(q.question_id, []), k)) for q in items)
    tests = means_per_test(scored)
    return ConfigResult(config, QUESTION_CONFIGS[config], len(items), predicted, tests, mean_over_tests(tests))
