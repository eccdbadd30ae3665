"""The `gen judge` command (registered in gen/cli.py). Heavy imports happen inside the function."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gen.cli_options import (
    CACHE_DIR,
    MAX_CONCURRENCY,
    OFFLINE,
    REQUESTS_PER_MINUTE,
    TOKENS_PER_MINUTE,
    run_settings,
)
from gen.hub_dataset import DATASET_HELP, REVISION

if TYPE_CHECKING:
    from gen.llm.config import RunSettings
    from gen.teabag_judge.endpoint import Judge
    from gen.teabag_judge.items import Question
    from gen.teabag_judge.score import Result


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
    from gen.eval.dataset import open_dataset
    from gen.hub_dataset import dataset_folder
    from gen.jsonl import write_json
    from gen.teabag_judge.endpoint import choose_endpoint
    from gen.teabag_judge.items import read_answers, read_questions
    from gen.teabag_judge.report import format_result, result_json
    from gen.write_guard import refuse_writing_into

    output = output if output is not None else answers.with_name(f"{answers.stem}.verdicts.json")
    settings = run_settings(offline, cache_dir, max_concurrency, requests_per_minute, tokens_per_minute)
    dataset = dataset_folder(dataset, revision)
    read = {"DATASET": dataset, "--answers": answers, "--recipe": recipe}
    refuse_writing_into({"--output": output, "--cache-dir": settings.cache_path()}, read)
    questions = read_questions(open_dataset(dataset))
    answer_map = read_answers(answers, {q.question_id for q in questions})
    judge_endpoint = choose_endpoint(dataset, recipe, endpoint)
    result, about = run_judge(questions, answer_map, judge_endpoint, settings)
    typer.echo(format_result(result, answers, dataset))
    write_json(output, result_json(result, dataset=dataset, answers=answers, judge=about), "verdicts")
    calls = f"judge calls made {about['calls_made']:,}, cached {about['calls_cached']:,}"
    logging.getLogger(__name__).info("wrote %s verdicts to %s (%s)", f"{len(result.verdicts):,}", output, calls)


def run_judge(
    questions: Sequence[Question], answers: Mapping[str, str], judge_endpoint: Judge, settings: RunSettings
) -> tuple[Result, dict[str, Any]]:
    """The verdicts, and what to say about the judge: endpoint, model, prompt and the calls it took."""
    from gen.llm.engine import Engine
    from gen.teabag_judge.ask import PROMPT, STEP, ask_judge
    from gen.teabag_judge.score import has_answer, verdicts
    from gen.templating import template_id

    name, config = judge_endpoint.name, judge_endpoint.config
    asked = [q for q in questions if has_answer(answers, q.question_id)]
    with Engine({name: config}, settings) as engine:
        outcomes = ask_judge(engine, asked, answers, name, config.max_reject_rate) if asked else {}
        report = engine.report()
    step = report["steps"].get(STEP, {})
    about = {
        "endpoint": name,
        "model": config.model,
        "fingerprint": report["endpoints"][name]["fingerprint"],
        "prompt": PROMPT,
        "prompt_id": template_id(PROMPT),
        **{key: step.get(key, 0) for key in ("calls_made", "calls_cached", "input_tokens", "output_tokens")},
        "cost_usd": step.get("cost_usd"),
    }
    return verdicts(questions, answers, outcomes), about
