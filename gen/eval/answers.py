"""`gen eval --answers`: score a system's written answers against the gold answers of a dataset.

The answers file is JSON lines `{"question_id": "...", "answer": "..."}`, one per question at most; every line is
checked against the dataset (the question must exist and have a gold answer). Each question of a config with
gold answers gets the exact match and token F1 of answer_metrics (LoCoMo's rules); a question without a line
scores 0 for both. Scores are averaged per test and pooled over the config's questions.

A config whose gold answers a model wrote (GoldAnswers.written) can also be judged: an LLM says yes or no to
each answer (gen/judging/written.py asks it; this module only counts what it said, so gen.eval stays free of
LLM code). The judge's rate is yes / (questions − not judged): a question without an answer (no line, or only
spaces) is a no without a call, and one the judge gave no usable verdict for is left out and listed, never
guessed. Reading (`read_sheet`) and scoring (`score_sheet`) are two steps so the judge can run between them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
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
NO_ANSWERS = (
    "a dataset with a config of questions with gold answers (temporal_reasoning, time_content_questions, or "
    "time queries with gold_answers)"
)


@dataclass(frozen=True)
class AnswerScore:
    questions: int
    exact_match: float
    f1: float


@dataclass
class JudgeTally:
    """The judge's verdicts over some questions: yes, no (judged no, or no answer) and not judged."""

    questions: int = 0
    no_answer: int = 0
    not_judged: int = 0
    yes: int = 0

    @property
    def scored(self) -> int:
        return self.questions - self.not_judged

    @property
    def accuracy(self) -> float | None:
        return self.yes / self.scored if self.scored else None

    def add(self, asked: Asked, verdict: Verdict | None) -> None:
        self.questions += 1
        self.no_answer += not asked.answered
        self.not_judged += asked.answered and (verdict is None or verdict.yes is None)
        self.yes += asked.answered and verdict is not None and verdict.yes is True


@dataclass(frozen=True)
class Verdict:
    """What the judge said of one answer: yes, no, or None with the reason it gave no usable verdict."""

    yes: bool | None
    failure: str | None = None


@dataclass
class ConfigAnswers:
    config: str
    group_field: str
    questions: int
    answered: int
    tests: dict[str, AnswerScore]
    pooled: AnswerScore
    written: bool = False  # a model wrote the gold answers: the judge's verdicts belong here
    judged_tests: dict[str, JudgeTally] | None = None  # None: not judged
    judged_pooled: JudgeTally | None = None
    not_judged: list[tuple[str, str]] = field(default_factory=list)  # (question id, why)


@dataclass
class AnswersResult:
    dataset: Path
    answers: Path
    results: list[ConfigAnswers] = field(default_factory=list)
    subset: Path | None = None
    judged_by: str | None = None  # "endpoint (model)" when a judge ran


@dataclass(frozen=True)
class Gold:
    config: str
    test: str
    answer: str


@dataclass(frozen=True)
class Asked:
    """One question to score: its gold answer, what the judge would be shown, and the system's answer."""

    question_id: str
    config: str
    test: str
    gold: str
    answer: str | None  # None: the file has no line for it
    question: str  # the question, or a dialogue's last utterance
    dialogue: list[dict[str, str]]  # the whole dialogue ([] for a plain question)
    abstention: bool  # the gold answer says the conversations do not hold what is asked

    @property
    def answered(self) -> bool:
        return self.answer is not None and bool(self.answer.strip())


@dataclass(frozen=True)
class SheetConfig:
    group_field: str
    written: bool
    asked: list[Asked]


@dataclass
class Sheet:
    """Every question with a gold answer, and the system's answers, read and checked before anything is scored."""

    dataset: Path
    answers: Path
    subset: Path | None
    configs: dict[str, SheetConfig]

    def to_judge(self) -> list[Asked]:
        """The answered questions whose gold answer a model wrote: the ones the judge is asked about."""
        return [a for config in self.configs.values() if config.written for a in config.asked if a.answered]

    @property
    def written(self) -> bool:
        return any(config.written for config in self.configs.values())


def evaluate_answers(dataset_path: Path, answers_path: Path, subset: Path | None = None) -> AnswersResult:
    """Exact match and token F1 only (no judge)."""
    return score_sheet(read_sheet(dataset_path, answers_path, subset), None)


def read_sheet(dataset_path: Path, answers_path: Path, subset: Path | None = None) -> Sheet:
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
    configs = {}
    for config, items in questions.items():
        answers = GoldAnswers(dataset, config)
        asked = [asked_of(config, q, answer, written.get(q.question_id), answers) for q, answer in items]
        configs[config] = SheetConfig(dataset.declared[config]["group_field"], answers.written, asked)
    return Sheet(Path(dataset_path), Path(answers_path), subset, configs)


def asked_of(config: str, question: Question, gold: str, answer: str | None, answers: GoldAnswers) -> Asked:
    item = question.item
    dialogue = item.record.get("dialogue")
    turns = dialogue if isinstance(dialogue, list) and dialogue else []
    text = str(turns[-1].get("text", "")) if turns else str(item.record.get("question") or "")
    abstention = answers.abstains(item, question.question_id)
    return Asked(question.question_id, config, question.group, gold, answer, text, turns, abstention)


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


def score_sheet(sheet: Sheet, verdicts: Mapping[str, Verdict] | None, judged_by: str | None = None) -> AnswersResult:
    """Every config scored; `verdicts` (question id → the judge's verdict, for the answered questions with a
    written gold answer) adds the judge's tallies to the configs whose gold answers a model wrote."""
    result = AnswersResult(sheet.dataset, sheet.answers, subset=sheet.subset, judged_by=judged_by)
    for config, sheet_config in sheet.configs.items():
        scored = score_config(config, sheet_config.group_field, sheet_config.asked)
        scored.written = sheet_config.written
        if sheet_config.written and verdicts is not None:
            judge_config(scored, sheet_config.asked, verdicts)
        result.results.append(scored)
    return result


def score_config(config: str, group_field: str, asked: list[Asked]) -> ConfigAnswers:
    """Each question's exact match and F1 (0 for both without a line), averaged per test and over all."""
    per_test: defaultdict[str, list[tuple[float, float]]] = defaultdict(list)
    everything: list[tuple[float, float]] = []
    for one in asked:
        written = one.answer
        pair = (exact_match(written, one.gold), token_f1(written, one.gold)) if written is not None else (0.0, 0.0)
        per_test[one.test].append(pair)
        everything.append(pair)
    answered = sum(one.answer is not None for one in asked)
    tests = {test: mean(pairs) for test, pairs in per_test.items()}
    return ConfigAnswers(config, group_field, len(asked), answered, tests, mean(everything))


def judge_config(scored: ConfigAnswers, asked: list[Asked], verdicts: Mapping[str, Verdict]) -> None:
    scored.judged_tests, scored.judged_pooled = {}, JudgeTally()
    for one in asked:
        verdict = verdicts.get(one.question_id)
        scored.judged_tests.setdefault(one.test, JudgeTally()).add(one, verdict)
        scored.judged_pooled.add(one, verdict)
        if one.answered and (verdict is None or verdict.yes is None):
            scored.not_judged.append((one.question_id, verdict.failure if verdict and verdict.failure else "?"))


def mean(pairs: list[tuple[float, float]]) -> AnswerScore:
    if not pairs:
        return AnswerScore(0, 0.0, 0.0)
    return AnswerScore(len(pairs), sum(p[0] for p in pairs) / len(pairs), sum(p[1] for p in pairs) / len(pairs))


NOT_JUDGED_NOTE = "written gold answers, not judged (give --judge-endpoint NAME or --judge-recipe FILE to judge them)"


def format_answers(result: AnswersResult) -> str:
    head = f"{result.answers} on {result.dataset} (exact match and token F1, as LoCoMo scores answers)"
    if result.judged_by is not None:
        head += f"\nanswers to written gold answers judged yes or no by {result.judged_by}"
    if result.subset is not None:
        head += f"\nonly the questions of the export {result.subset}"
    return "\n\n".join([head, *(config_block(config) for config in result.results)])


def config_block(config: ConfigAnswers) -> str:
    """One config's table: per test and pooled, exact match and F1, and the judge's columns where it judged."""
    judged = config.judged_tests is not None
    first = f"{config.config}: {config.questions:,} questions, {config.questions - config.answered:,} without an answer"
    if judged and config.judged_pooled is not None:
        first += (
            f" (scored 0, and no for the judge), {config.judged_pooled.not_judged:,} not judged (left out of its rate)"
        )
    else:
        first += " (scored 0)" + (f"; {NOT_JUDGED_NOTE}" if config.written else "")
    width = max([len(test) for test in config.tests] + [len("pooled"), len(config.group_field)])
    header = f"{config.group_field:<{width}}  {'questions':>9}  {'exact':>6}  {'F1':>6}"
    lines = [first, header + (f"  {'judged':>6}  {'yes':>5}  {'judge':>6}" if judged else "")]
    tallies = {**(config.judged_tests or {}), "pooled": config.judged_pooled}
    for label, s in [*config.tests.items(), ("pooled", config.pooled)]:
        row = f"{label:<{width}}  {s.questions:>9,}  {s.exact_match:>6.3f}  {s.f1:>6.3f}"
        tally = tallies.get(label)
        if judged and tally is not None:
            rate = "-" if tally.accuracy is None else f"{tally.accuracy:.3f}"
            row += f"  {tally.scored:>6,}  {tally.yes:>5,}  {rate:>6}"
        lines.append(row)
    if config.not_judged:
        lines.append("not judged: " + "; ".join(f"{qid} ({why})" for qid, why in config.not_judged))
    return "\n".join(lines)


def tally_json(tally: JudgeTally) -> dict[str, Any]:
    return {
        "questions": tally.questions,
        "no_answer": tally.no_answer,
        "not_judged": tally.not_judged,
        "scored": tally.scored,
        "yes": tally.yes,
        "accuracy": tally.accuracy,
    }


def judge_json(config: ConfigAnswers) -> dict[str, Any] | None:
    if config.judged_tests is None or config.judged_pooled is None:
        return None
    return {
        "tests": {test: tally_json(tally) for test, tally in config.judged_tests.items()},
        "pooled": tally_json(config.judged_pooled),
        "not_judged": [{"question_id": qid, "failure": why} for qid, why in config.not_judged],
    }


def answers_json(result: AnswersResult) -> dict[str, Any]:
    def scores(score: AnswerScore) -> dict[str, Any]:
        return {"questions": score.questions, "exact_match": score.exact_match, "f1": score.f1}

    return {
        "dataset": str(result.dataset),
        "answers": str(result.answers),
        "judged_by": result.judged_by,
        "configs": {
            config.config: {
                "group_field": config.group_field,
                "questions": config.questions,
                "answered": config.answered,
                "tests": {test: scores(score) for test, score in config.tests.items()},
                "pooled": scores(config.pooled),
                "written_answers": config.written,
                "judge": judge_json(config),
            }
            for config in result.results
        },
        "only_questions_of": str(result.subset) if result.subset is not None else None,
    }


def answers_table(result: AnswersResult) -> str:
    """The scores as CSV rows (config, test, questions, exact_match, f1, and the judge's scored, yes and accuracy,
    empty where it did not judge): one per test, then the pooled row."""
    import csv
    import io

    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        [
            "config",
            "group_field",
            "test",
            "questions",
            "exact_match",
            "f1",
            "judge_scored",
            "judge_yes",
            "judge_accuracy",
        ]
    )
    for config in result.results:
        tallies = {**(config.judged_tests or {}), "(pooled)": config.judged_pooled}
        for test, score in [*config.tests.items(), ("(pooled)", config.pooled)]:
            tally = tallies.get(test)
            judged = [tally.scored, tally.yes, tally.accuracy] if tally is not None else ["", "", ""]
            writer.writerow(
                [config.config, config.group_field, test, score.questions, score.exact_match, score.f1, *judged]
            )
    return out.getvalue()
