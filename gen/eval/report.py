"""What `gen eval` prints and what `--json` writes: the same numbers."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gen.eval.metrics import GroupScore
from gen.eval.score import ConfigResult, EvalResult

if TYPE_CHECKING:
    import pandas as pd
from gen.templating import render


def format_result(result: EvalResult) -> str:
    cut = f"first {result.k} of each ranking" if result.k is not None else "whole rankings"
    blocks = [f"{result.predictions} on {result.dataset} ({cut})"]
    if result.subset is not None:
        blocks[0] += f"\nonly the questions of the export {result.subset}"
    blocks += [config_table(config) for config in result.results]
    if result.results:
        blocks.append(render("eval/conventions.j2").strip())  # which summary each harness prints
    if result.unscored:
        blocks.append(f"not scored (no prediction in the file): {', '.join(result.unscored)}")
    if result.quality is not None:
        blocks.append(render("eval/quality.j2", quality=result.quality).strip())
    return "\n\n".join(blocks)


def config_table(config: ConfigResult) -> str:
    width = max([len(test) for test in config.tests] + [len("mean over tests")])
    left_out = f", {config.abstentions:,} abstentions (nothing to retrieve: not scored)" if config.abstentions else ""
    lines = [
        f"{config.config}: {config.questions:,} questions, {config.missing:,} without a prediction (scored as empty)"
        + left_out,
        f"{config.group_field:<{width}}  {'questions':>9}  {'recall':>6}  {'F2':>6}  {'all found':>9}  "
        f"{'any found':>9}",
    ]
    for test, score in config.tests.items():
        lines.append(row(test, width, score))
    mean = config.mean
    scored = config.questions - config.abstentions
    lines.append(f"{'mean over tests':<{width}}  {scored:>9,}  {mean.recall:>6.3f}  {mean.f2:>6.3f}")
    lines.append(row("pooled", width, config.pooled))
    return "\n".join(lines)


def row(label: str, width: int, score: GroupScore) -> str:
    return (
        f"{label:<{width}}  {score.questions:>9,}  {score.recall:>6.3f}  {score.f2:>6.3f}  "
        f"{score.all_found:>9.3f}  {score.any_found:>9.3f}"
    )


def scores(score: GroupScore) -> dict[str, float | int]:
    return {
        "questions": score.questions,
        "recall": score.recall,
        "f2": score.f2,
        "all_found": score.all_found,
        "any_found": score.any_found,
    }


def result_json(result: EvalResult) -> dict[str, Any]:
    return {
        "dataset": str(result.dataset),
        "predictions": str(result.predictions),
        "k": result.k,
        "configs": {
            config.config: {
                "group_field": config.group_field,
                "questions": config.questions,
                "predicted": config.predicted,
                "missing": config.missing,
                "abstentions": config.abstentions,
                "tests": {test: scores(score) for test, score in config.tests.items()},
                "mean_over_tests": {"recall": config.mean.recall, "f2": config.mean.f2},
                "pooled": scores(config.pooled),
            }
            for config in result.results
        },
        "not_scored": result.unscored,
        "only_questions_of": str(result.subset) if result.subset is not None else None,
        "quality_labels": result.quality,
    }


def score_rows(result: EvalResult) -> list[dict[str, Any]]:
    """The scores as rows: per config, one per test, then its mean over tests (recall and F2) and its pooled
    mean over questions; what `gen eval --csv` writes and gen.evaluate returns as a DataFrame."""
    rows: list[dict[str, Any]] = []
    for config in result.results:
        where = {"config": config.config, "group_field": config.group_field}
        rows += [{**where, "test": test, **scores(score)} for test, score in config.tests.items()]
        rows.append({**where, "test": "(mean over tests)", "recall": config.mean.recall, "f2": config.mean.f2})
        rows.append({**where, "test": "(pooled)", **scores(config.pooled)})
    return rows


SCORE_COLUMNS = ("config", "group_field", "test", "questions", "recall", "f2", "all_found", "any_found")


def scores_table(result: EvalResult) -> pd.DataFrame:
    import pandas as pd  # only for the table

    return pd.DataFrame(score_rows(result), columns=list(SCORE_COLUMNS))
