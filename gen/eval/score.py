"""`gen eval`: score a predictions file against every question config of a dataset."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen import progress, reading
from gen.errors import GenError
from gen.eval.dataset import Dataset, Question, finished_report, open_dataset
from gen.eval.metrics import GroupScore, QuestionScore, mean_over_tests, means_per_test, pooled, question_score
from gen.eval.predictions import Target, read_predictions


@dataclass
class ConfigResult:
    config: str
    group_field: str
    questions: int
    predicted: int  # questions with a line in the predictions file
    tests: dict[str, GroupScore]
    mean: QuestionScore  # over tests: every test weighs the same (the method's headline)
    pooled: GroupScore  # over questions: what the harnesses' own scripts report
    abstentions: int = 0  # questions with nothing to retrieve (an empty window): left out of every score

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
    subset: Path | None = None  # the export whose questions alone were scored
    quality: dict[str, Any] | None = None  # run.json's summary of quality labels, when the run has them


def evaluate(
    dataset_path: Path, predictions_path: Path, k: int | None = None, subset: Path | None = None
) -> EvalResult:
    report = finished_report(Path(dataset_path), "scored")
    dataset = open_dataset(dataset_path)
    configs = require_questions(dataset)
    questions = {}
    with progress.task("reading the questions", len(configs), "configs") as bar:
        for config in configs:
            questions[config] = dataset.questions(config)
            bar.advance()
    with progress.task(f"reading {Path(predictions_path).name}"):
        predictions = read_predictions(predictions_path, targets(dataset, questions))
    if subset is not None:
        questions = only_exported(questions, subset)
    result = EvalResult(Path(dataset_path), Path(predictions_path), k, subset=subset, quality=quality_of(report))
    anything = bool(predictions)  # an empty file scores every config (all empty); otherwise only those it covers
    for config, items in questions.items():
        predicted = sum(q.question_id in predictions for q in items)
        if anything and predicted == 0:
            result.unscored.append(config)
            continue
        result.results.append(score_config(config, dataset, items, predictions, k, predicted))
    return result


def quality_of(report: dict[str, Any]) -> dict[str, Any] | None:
    summary = ((report.get("configs") or {}).get("quality_turns") or {}).get("summary")
    return summary if isinstance(summary, dict) and summary else None


def only_exported(questions: dict[str, list[Question]], export: Path) -> dict[str, list[Question]]:
    """The questions a `gen export` folder holds (its gen-export.json lists each config's question ids): a
    LongMemEval export keeps one wording per base question, and the other wordings are not missing answers."""
    path = export / "gen-export.json" if export.is_dir() else export
    try:
        manifest = reading.read_json(path, "the gen-export.json of a folder `gen export` wrote")
        kept = {config: set(info["tests"]) for config, info in manifest["configs"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise GenError(
            f"cannot read the export's list of questions ({exc.__class__.__name__}: {exc})",
            file=path,
            field="configs.<config>.tests",
            expected="the gen-export.json of a folder `gen export` wrote",
        ) from None
    return {
        config: [q for q in items if q.question_id in kept[config]]
        for config, items in questions.items()
        if config in kept
    }


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
    # a question with an empty window (one answered by abstaining) has nothing to retrieve: it has no recall to
    # score, as LongMemEval's retrieval metrics leave out its abstention questions
    scored = ((q.group, question_score(q.relevant, predictions.get(q.question_id, []), k)) for q in items if q.relevant)
    tests = means_per_test(scored)
    return ConfigResult(
        config,
        dataset.declared[config]["group_field"],
        len(items),
        predicted,
        tests,
        mean_over_tests(tests),
        pooled(tests),
        sum(not q.relevant for q in items),
    )
