"""Scoring a system on a finished dataset: retrieved responses or written answers, judged by an LLM where a model
wrote the gold answer (`gen eval`), a reference system's predictions (`gen baseline`), and an LLM judge's verdicts
on TeaBag answers (`gen judge`). A dataset is a run or export folder, or a Hub dataset (`hf:owner/name`, at
`revision`)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import Field

from gen.api.calls import CallOptions, api_call
from gen.callers import named
from gen.errors import GenError
from gen.llm.config import RunSettings

if TYPE_CHECKING:
    import pandas as pd

IN_MEMORY = "predictions given in memory.jsonl"


@dataclass(frozen=True)
class Scores:
    """What `evaluate` scored: `table`, one row per config and test (the --csv table); `text`, the report
    `gen eval` prints; `json`, what its --json writes; `judge`, when a judge ran on written answers: who judged
    and the calls it took, and `verdicts`, the file its verdicts were written to."""

    table: pd.DataFrame
    text: str
    json: dict[str, Any]
    judge: dict[str, Any] | None = None
    verdicts: Path | None = None


class EvalOptions(CallOptions):
    """`k`: score only the first K indices of each ranking (retrieved responses only); `questions_from`: score
    only the questions a `gen export` folder holds; `json_out`, `csv_out`: also write the scores there.

    Written answers to gold answers a model wrote are judged by an LLM only when a judge is named:
    `judge_endpoint` (a name in the llm: section) and/or `judge_recipe` (a YAML file whose llm: section defines
    it; default the dataset's recipe.yaml). `verdicts_out`: where its verdicts go (default
    <answers>.verdicts.json); `llm`: how its calls go (cache, offline, limits); `progress`: this call's displays
    (the judge's LLM steps follow it too, unless `llm.progress` says otherwise)."""

    command_line_options: ClassVar[dict[str, str]] = {
        "json_out": "--json",
        "csv_out": "--csv",
        "verdicts_out": "--verdicts",
    }

    k: int | None = Field(default=None, ge=1, le=100_000)
    questions_from: Path | None = None
    revision: str | None = None
    json_out: Path | None = None
    csv_out: Path | None = None
    judge_recipe: Path | None = None
    judge_endpoint: str | None = None
    verdicts_out: Path | None = None
    llm: RunSettings | None = None

    @property
    def judging(self) -> bool:
        return self.judge_recipe is not None or self.judge_endpoint is not None


@api_call(EvalOptions)
def evaluate(
    dataset: str | Path,
    predictions: str | Path | Iterable[Mapping[str, Any]] | None = None,
    *,
    answers: str | Path | None = None,
    options: EvalOptions | None = None,
) -> Scores:
    """Scores of retrieved responses (`predictions`: a JSONL file, or its lines as mappings {question_id,
    retrieved}) or of written answers (`answers`: JSONL of {question_id, answer}; exact match and token F1, and,
    when `options` names a judge, an LLM's yes/no on answers to gold answers a model wrote), per config and test,
    then per config over tests and pooled over questions (`gen eval`)."""
    from gen.hub_dataset import dataset_folder
    from gen.write_guard import refuse_writing_into

    chosen = options if options is not None else EvalOptions()
    if (predictions is None) == (answers is None):
        given_one = (named("--predictions", "predictions"), named("--answers", "answers"))
        raise GenError(
            f"give either {given_one[0]} (retrieved responses) or {given_one[1]} (written answers)",
            field=" / ".join(given_one),
            expected="exactly one of the two",
        )
    refuse_options(chosen, answers is not None)
    folder = dataset_folder(dataset, chosen.revision)
    given = Path(predictions) if isinstance(predictions, (str, Path)) else None
    refuse_writing_into(eval_writes(chosen, answers), eval_reads(chosen, folder, given, answers))
    if answers is not None:
        scores = score_answers(folder, Path(answers), chosen)
    elif given is not None:
        scores = score_predictions(folder, given, chosen)
    else:
        assert predictions is not None and not isinstance(predictions, (str, Path))  # given in memory
        scores = score_in_memory(folder, predictions, chosen)
    write_scores(scores, chosen)
    return scores


def eval_reads(options: EvalOptions, folder: Path, predictions: Path | None, answers: str | Path | None) -> dict:
    """The files `evaluate` reads, by the name its caller gave each (gen/callers.py)."""
    return {
        named("DATASET", "dataset"): folder,
        named("--predictions", "predictions"): predictions,
        named("--answers", "answers"): answers,
        named("--questions-from", "EvalOptions.questions_from"): options.questions_from,
        named("--judge-recipe", "EvalOptions.judge_recipe"): options.judge_recipe,
    }


def eval_writes(options: EvalOptions, answers: str | Path | None) -> dict:
    """The files `evaluate` writes, by the name its caller gave each: the scores, and with a judge its verdicts
    and the LLM cache."""
    written = {
        named("--json", "EvalOptions.json_out"): options.json_out,
        named("--csv", "EvalOptions.csv_out"): options.csv_out,
    }
    if answers is not None and options.judging:
        written[named("--verdicts", "EvalOptions.verdicts_out")] = verdicts_path(options, Path(answers))
        written[named("--cache-dir", "EvalOptions.llm.cache_dir")] = llm_settings(options).cache_path()
    return written


def score_predictions(folder: Path, predictions: Path, options: EvalOptions) -> Scores:
    from gen.eval.report import format_result, result_json, scores_table
    from gen.eval.score import evaluate as score

    result = score(folder, predictions, options.k, options.questions_from)
    return Scores(scores_table(result), format_result(result), result_json(result))


def score_in_memory(folder: Path, lines: Iterable[Mapping[str, Any]], options: EvalOptions) -> Scores:
    """Predictions given as mappings are written as the JSONL file they stand for and read by the file's one
    reader, so they are checked line by line exactly as a file is (a problem names its line in IN_MEMORY)."""
    from gen.jsonl import encode_lines

    with tempfile.TemporaryDirectory(prefix="gen-eval-") as scratch:
        path = Path(scratch) / IN_MEMORY
        path.write_bytes(encode_lines([dict(line) for line in lines]))
        return score_predictions(folder, path, options)


def refuse_options(options: EvalOptions, answers: bool) -> None:
    """Options that only mean something for the other kind of scoring are refused, not ignored."""
    k, predictions, written = (
        named("--k", "EvalOptions.k"),
        named("--predictions", "predictions"),
        named("--answers", "answers"),
    )
    endpoint, recipe = (
        named("--judge-endpoint", "EvalOptions.judge_endpoint"),
        named("--judge-recipe", "EvalOptions.judge_recipe"),
    )
    verdicts = named("--verdicts", "EvalOptions.verdicts_out")
    if answers and options.k is not None:
        raise GenError(f"{k} cuts rankings; written answers have none", field=k, expected=f"{k} with {predictions}")
    if not answers and (options.judging or options.verdicts_out is not None):
        raise GenError(
            "the judge grades written answers; retrieved responses are scored without one",
            field=f"{endpoint} / {recipe} / {verdicts}",
            expected=f"these with {written}",
        )
    if answers and options.verdicts_out is not None and not options.judging:
        raise GenError(
            f"{verdicts} names the judge's file, and no judge was named",
            field=verdicts,
            expected=f"{endpoint} NAME or {recipe} FILE with it",
        )


def llm_settings(options: EvalOptions) -> RunSettings:
    return options.llm if options.llm is not None else RunSettings()


def verdicts_path(options: EvalOptions, answers: Path) -> Path:
    """--verdicts, else beside the answers (mine.jsonl → mine.verdicts.json), as `gen judge` writes its own."""
    return (
        options.verdicts_out if options.verdicts_out is not None else answers.with_name(f"{answers.stem}.verdicts.json")
    )


NOTHING_TO_JUDGE = "no question scored here has a gold answer a model wrote, so the judge was not asked"


def score_answers(folder: Path, answers: Path, options: EvalOptions) -> Scores:
    """Exact match and F1 of every answer, and, when a judge is named and a config's gold answers were written by
    a model, the judge's verdicts (written to their file before the scores are returned)."""
    import io

    import pandas as pd

    from gen.eval.answers import answers_json, answers_table, format_answers, read_sheet, score_sheet

    sheet = read_sheet(folder, answers, options.questions_from)
    if not (options.judging and sheet.written):
        result = score_sheet(sheet, None)
        table = pd.read_csv(io.StringIO(answers_table(result)))
        text = format_answers(result) + (f"\n\n{NOTHING_TO_JUDGE}" if options.judging else "")
        return Scores(table, text, answers_json(result))
    from gen.jsonl import write_json
    from gen.judging.endpoint import Choice, choose_endpoint
    from gen.judging.written import judge_sheet, verdicts_json

    choice = Choice(
        recipe_option=named("--judge-recipe", "EvalOptions.judge_recipe"),
        endpoint_option=named("--judge-endpoint", "EvalOptions.judge_endpoint"),
    )
    judge_endpoint = choose_endpoint(folder, options.judge_recipe, options.judge_endpoint, choice)
    verdicts, judgement = judge_sheet(sheet, judge_endpoint, llm_settings(options))
    result = score_sheet(sheet, verdicts, f"{judge_endpoint.name} ({judge_endpoint.config.model})")
    output = verdicts_path(options, answers)
    write_json(output, verdicts_json(sheet, result, judgement), "verdicts")
    scores_json = {**answers_json(result), "judge": judgement.about, "verdicts": str(output)}
    table = pd.read_csv(io.StringIO(answers_table(result)))
    return Scores(table, format_answers(result), scores_json, judgement.about, output)


def write_scores(scores: Scores, options: EvalOptions) -> None:
    from gen.jsonl import replace_file, write_json

    if options.json_out is not None:
        write_json(options.json_out, scores.json, "scores")
    if options.csv_out is not None:
        replace_file(options.csv_out, scores.table.to_csv(index=False).encode("utf-8"), "scores table")


BASELINES = ("recent", "bm25", "semantic", "semantic_meta")


class BaselineOptions(CallOptions):
    """How `baseline` ranks: `k` responses per question; `whole_dialogue`, the whole dialogue as the query of an
    ambiguous time question rather than its last utterance; `turns`, what the system retrieves for every response
    of the log instead of the questions; `revision`, of a Hub dataset; `progress`: this call's displays."""

    k: int = Field(default=10, ge=1, le=100_000)
    whole_dialogue: bool = False
    turns: bool = False
    revision: str | None = None


@api_call(BaselineOptions)
def baseline(name: str, dataset: str | Path, output: str | Path, options: BaselineOptions | None = None) -> int:
    """Write a reference system's predictions for every question config of a dataset (`gen baseline`; needs the
    eval extra); with `turns`, what it retrieves for every response of the log instead. Returns the lines
    written."""
    from gen.eval.baselines import write_baseline, write_turn_baseline
    from gen.hub_dataset import dataset_folder

    chosen = options if options is not None else BaselineOptions()
    if name not in BASELINES:
        raise GenError(
            f"unknown baseline {name!r}", field=named("NAME", "baseline(name=...)"), expected=", ".join(BASELINES)
        )
    folder, written = dataset_folder(dataset, chosen.revision), Path(output)
    if chosen.turns:
        return write_turn_baseline(name, folder, written, k=chosen.k)
    return write_baseline(name, folder, written, k=chosen.k, whole_dialogue=chosen.whole_dialogue)


class JudgeOptions(CallOptions):
    """Which endpoint judges (`recipe`: a YAML file whose llm: section defines it, default the dataset's
    recipe.yaml; `endpoint`: its name), where the verdicts go (default <answers>.verdicts.json), and how the
    calls go (`llm`: cache, offline, limits); `progress`: this call's displays (its LLM steps' too, unless
    `llm.progress` says otherwise)."""

    output: Path | None = None
    recipe: Path | None = None
    endpoint: str | None = None
    revision: str | None = None
    llm: RunSettings | None = None


@dataclass(frozen=True)
class Judged:
    """The judge's result (its verdicts and success rates), the report `gen judge` prints and where the verdicts
    were written."""

    text: str
    output: Path
    verdicts: int
    about: dict[str, Any] = field(default_factory=dict)


@api_call(JudgeOptions)
def judge(dataset: str | Path, answers: str | Path, options: JudgeOptions | None = None) -> Judged:
    """Judge a system's answers to the teabag questions (Correct or Incorrect, asked of an LLM endpoint) and write
    the verdicts (`gen judge`); replies are cached, so a second run makes no calls."""
    from gen.eval.dataset import open_dataset
    from gen.hub_dataset import dataset_folder
    from gen.jsonl import write_json
    from gen.judging.endpoint import Choice, choose_endpoint
    from gen.teabag_judge.items import read_answers, read_questions
    from gen.teabag_judge.judging import run_judge
    from gen.teabag_judge.report import format_result, result_json
    from gen.write_guard import refuse_writing_into

    chosen = options if options is not None else JudgeOptions()
    given = Path(answers)
    output = chosen.output if chosen.output is not None else given.with_name(f"{given.stem}.verdicts.json")
    settings = chosen.llm if chosen.llm is not None else RunSettings()
    folder = dataset_folder(dataset, chosen.revision)
    read = {
        named("DATASET", "dataset"): folder,
        named("--answers", "answers"): given,
        named("--recipe", "JudgeOptions.recipe"): chosen.recipe,
    }
    written = {
        named("--output", "JudgeOptions.output"): output,
        named("--cache-dir", "JudgeOptions.llm.cache_dir"): settings.cache_path(),
    }
    refuse_writing_into(written, read)
    questions = read_questions(open_dataset(folder))
    answer_map = read_answers(given, {q.question_id for q in questions})
    choice = Choice(
        recipe_option=named("--recipe", "JudgeOptions.recipe"),
        endpoint_option=named("--endpoint", "JudgeOptions.endpoint"),
        product="teabag",
    )
    judge_endpoint = choose_endpoint(folder, chosen.recipe, chosen.endpoint, choice)
    result, about = run_judge(questions, answer_map, judge_endpoint, settings)
    write_json(output, result_json(result, dataset=folder, answers=given, judge=about), "verdicts")
    return Judged(format_result(result, given, folder), output, len(result.verdicts), about)
