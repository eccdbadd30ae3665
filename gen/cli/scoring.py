"""`gen eval`, `gen baseline` and `gen judge` (registered in gen/cli/main.py): scoring a system's retrieved
responses or answers, writing a reference system's, and judging TeaBag answers, each a thin layer over its
function in gen/api/scoring.py (imported inside the command, so every other command starts without it)."""

from __future__ import annotations

import logging
from enum import StrEnum
from pathlib import Path

import typer

from gen.cli.options import (
    CACHE_DIR,
    DATASET_HELP,
    MAX_CONCURRENCY,
    OFFLINE,
    REQUESTS_PER_MINUTE,
    REVISION,
    TOKENS_PER_MINUTE,
    number,
    run_settings,
)

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
    judge_endpoint: str | None = typer.Option(
        None,
        "--judge-endpoint",
        help="With --answers: have this endpoint judge the answers to gold answers a model wrote (yes/no); its "
        "llm: section is --judge-recipe's, else DATASET/recipe.yaml's.",
    ),
    judge_recipe: Path | None = typer.Option(
        None,
        "--judge-recipe",
        help="With --answers: a YAML file whose llm: section defines the judging endpoint (judges the written "
        "answers; --judge-endpoint picks one when it defines several).",
    ),
    verdicts: Path | None = typer.Option(
        None, "--verdicts", help="The judge's verdicts file (default: beside the answers, <answers>.verdicts.json)."
    ),
    cache_dir: Path | None = CACHE_DIR,
    offline: bool = OFFLINE,
    max_concurrency: int | None = MAX_CONCURRENCY,
    requests_per_minute: float | None = REQUESTS_PER_MINUTE,
    tokens_per_minute: float | None = TOKENS_PER_MINUTE,
) -> None:
    """Score retrieved response indices: recall and F2 per test, their mean over tests and the pooled mean over
    questions, per question config. With --answers, score written answers to the questions that have gold
    answers: exact match and token F1 per test and pooled, and, with --judge-endpoint or --judge-recipe, an LLM
    judge's yes/no on answers to gold answers a model wrote (without them those are reported as not judged, and
    no call is made).

    Example: gen eval outputs/locomo-temporal --predictions mine.jsonl --k 10
    """
    import gen

    settings = run_settings(offline, cache_dir, max_concurrency, requests_per_minute, tokens_per_minute)
    options = gen.EvalOptions(
        k=k,
        questions_from=questions_from,
        revision=revision,
        json_out=json_out,
        csv_out=csv_out,
        judge_recipe=judge_recipe,
        judge_endpoint=judge_endpoint,
        verdicts_out=verdicts,
        llm=settings,
    )
    scores = gen.evaluate(dataset, predictions, answers=answers, options=options)
    typer.echo(scores.text)
    if scores.judge is not None:
        calls = f"judge calls made {scores.judge['calls_made']:,}, cached {scores.judge['calls_cached']:,}"
        log.info("wrote the judge's verdicts to %s (%s)", scores.verdicts, calls)


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
    import gen

    options = gen.BaselineOptions(k=k, whole_dialogue=whole_dialogue, turns=turns, revision=revision)
    count = gen.baseline(name.value, dataset, output, options)
    if turns:
        log.info("wrote what was retrieved for %s responses to %s", f"{count:,}", output)
    else:
        log.info("wrote %s predictions to %s", f"{count:,}", output)


def judge(
    dataset: Path = typer.Argument(..., metavar="DATASET", help=f"{DATASET_HELP} It holds the teabag config."),
    revision: str | None = REVISION,
    answers: Path = typer.Option(
        ..., "--answers", help='JSONL, one line per question: {"question_id": ..., "answer": "..."}.'
    ),
    output: Path | None = typer.Option(
        None, "--output", help="The verdicts file to write (default: beside the answers, <answers>.verdicts.json)."
    ),
    recipe: Path | None = typer.Option(
        None,
        "--recipe",
        help="A YAML file whose llm: section defines the judging endpoint (default: DATASET/recipe.yaml).",
    ),
    endpoint: str | None = typer.Option(
        None,
        "--endpoint",
        help="The endpoint that judges (default: the only one, else the teabag product entry's endpoint).",
    ),
    cache_dir: Path | None = CACHE_DIR,
    offline: bool = OFFLINE,
    max_concurrency: int | None = MAX_CONCURRENCY,
    requests_per_minute: float | None = REQUESTS_PER_MINUTE,
    tokens_per_minute: float | None = TOKENS_PER_MINUTE,
) -> None:
    """Judge a system's answers to the teabag questions (Correct or Incorrect, asked of an LLM endpoint) and
    print the success rate overall and per source.

    A question without an answer counts as Incorrect; one the judge gave no usable verdict for is listed and
    left out of the rate. Replies are cached: a second run makes no calls.

    Example: gen judge outputs/teabag-cc --answers mine.jsonl --endpoint judge
    """
    import gen

    settings = run_settings(offline, cache_dir, max_concurrency, requests_per_minute, tokens_per_minute)
    options = gen.JudgeOptions(output=output, recipe=recipe, endpoint=endpoint, revision=revision, llm=settings)
    judged = gen.judge(dataset, answers, options)
    typer.echo(judged.text)
    calls = f"judge calls made {judged.about['calls_made']:,}, cached {judged.about['calls_cached']:,}"
    log.info("wrote %s verdicts to %s (%s)", f"{judged.verdicts:,}", judged.output, calls)
