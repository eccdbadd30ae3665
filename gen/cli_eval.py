"""The `gen eval` and `gen baseline` commands (registered in gen/cli.py): scoring a system's retrieved responses,
and writing a reference system's. Heavy imports happen inside the functions, so every other command starts
without them."""

from __future__ import annotations

import logging
from enum import StrEnum
from pathlib import Path

import typer

from gen.cli_options import number
from gen.hub_dataset import DATASET_HELP, REVISION

log = logging.getLogger(__name__)


def evaluate(
    dataset: Path = typer.Argument(..., metavar="DATASET", help=DATASET_HELP),
    revision: str | None = REVISION,
    predictions: Path | None = typer.Option(
        None, "--predictions", help='JSONL, one line per question: {"question_id": ..., "retrieved": [index, ...]}.'
    ),
    answers: Path | None = typer.Option(
        None,
        "--answers",
        help='Score written answers instead: JSONL, one line per question: {"question_id": ..., "answer": "..."} '
        "(exact match and token F1 against the gold answers).",
    ),
    json_out: Path | None = typer.Option(None, "--json", help="Also write the scores to this JSON file."),
    csv_out: Path | None = typer.Option(
        None, "--csv", help="Also write the scores as a table (config, test, questions, recall, f2...) to this CSV."
    ),
    k: int | None = number(None, "--k", help="Score only the first K indices of each ranking."),
    questions_from: Path | None = typer.Option(
        None,
        "--questions-from",
        help="Score only the questions a `gen export` folder holds (a LongMemEval export keeps one wording per "
        "base question).",
    ),
) -> None:
    """Score retrieved response indices: recall and F2 per test, their mean over tests and the pooled mean over
    questions, per question config. With --answers, score written answers to the questions that have gold
    answers: exact match and token F1 per test and pooled.

    Example: gen eval outputs/locomo-temporal --predictions mine.jsonl --k 10
    """
    from gen.errors import GenError
    from gen.hub_dataset import dataset_folder
    from gen.write_guard import refuse_writing_into

    if (predictions is None) == (answers is None):
        raise GenError(
            "give either --predictions (retrieved responses) or --answers (written answers)",
            field="--predictions / --answers",
            expected="exactly one of the two",
        )
    folder = dataset_folder(dataset, revision)
    read = {"DATASET": folder, "--predictions": predictions, "--answers": answers, "--questions-from": questions_from}
    refuse_writing_into({"--json": json_out, "--csv": csv_out}, read)
    if answers is not None:
        if k is not None:
            raise GenError(
                "--k cuts rankings; written answers have none", field="--k", expected="--k with --predictions"
            )
        score_answers(folder, answers, questions_from, json_out, csv_out)
        return
    assert predictions is not None  # one of the two, checked above
    from gen.eval.report import format_result, result_json, scores_table
    from gen.eval.score import evaluate as score

    result = score(folder, predictions, k, questions_from)
    typer.echo(format_result(result))
    if json_out is not None:
        from gen.jsonl import write_json

        write_json(json_out, result_json(result), "scores")
    if csv_out is not None:
        from gen.jsonl import replace_file

        replace_file(csv_out, scores_table(result).to_csv(index=False).encode("utf-8"), "scores table")


def score_answers(
    folder: Path, answers: Path, questions_from: Path | None, json_out: Path | None, csv_out: Path | None
) -> None:
    from gen.eval.answers import answers_json, answers_table, evaluate_answers, format_answers

    result = evaluate_answers(folder, answers, questions_from)
    typer.echo(format_answers(result))
    if json_out is not None:
        from gen.jsonl import write_json

        write_json(json_out, answers_json(result), "scores")
    if csv_out is not None:
        from gen.jsonl import replace_file

        replace_file(csv_out, answers_table(result).encode("utf-8"), "scores table")


class BaselineName(StrEnum):
    recent = "recent"
    bm25 = "bm25"
    semantic = "semantic"
    semantic_meta = "semantic_meta"


def baseline(
    name: BaselineName = typer.Argument(..., metavar="NAME", help="recent, bm25, semantic or semantic_meta."),
    dataset: Path = typer.Argument(..., metavar="DATASET", help=DATASET_HELP),
    revision: str | None = REVISION,
    output: Path = typer.Option(..., "--output", help="The predictions file to write (JSONL, as gen eval reads)."),
    k: int = number(10, "--k", help="Responses retrieved per question."),
    whole_dialogue: bool = typer.Option(
        False, "--whole-dialogue", help="ambiguous_time_queries: use the whole dialogue, not its last utterance."
    ),
    turns: bool = typer.Option(
        False,
        "--turns",
        help="Instead of questions: for every response of the log, what the system retrieves from earlier sessions "
        "when queried with the turn before it (a retrieval file for quality_labels).",
    ),
) -> None:
    """Write a reference system's predictions for every question config of a dataset (needs the eval extra:
    pip install 'gen-memory[eval]').

    Example: gen baseline bm25 outputs/locomo-temporal --output bm25.jsonl --k 30
    """
    from gen.eval.baselines import write_baseline, write_turn_baseline
    from gen.hub_dataset import dataset_folder

    dataset = dataset_folder(dataset, revision)
    if turns:
        count = write_turn_baseline(name.value, dataset, output, k=k)
        log.info("wrote what was retrieved for %s responses to %s", f"{count:,}", output)
        return
    count = write_baseline(name.value, dataset, output, k=k, whole_dialogue=whole_dialogue)
    log.info("wrote %s predictions to %s", f"{count:,}", output)
