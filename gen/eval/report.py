"""What `gen eval` prints and what `--json` writes: the same numbers."""

from __future__ import annotations

from typing import Any

from gen.eval.score import ConfigResult, EvalResult


def format_result(result: EvalResult) -> str:
    cut = f"first {result.k} of each ranking" if result.k is not None else "whole rankings"
    blocks = [f"{result.predictions} on {result.dataset} ({cut})"]
    blocks += [config_table(config) for config in result.results]
    if result.unscored:
        blocks.append(f"not scored (no prediction in the file): {', '.join(result.unscored)}")
    return "\n\n".join(blocks)


def config_table(config: ConfigResult) -> str:
    width = max([len(test) for test in config.tests] + [len("mean over tests")])
    lines = [
        f"{config.config}: {config.questions:,} questions, {config.missing:,} without a prediction (scored as empty)",
        f"{config.group_field:<{width}}  {'questions':>9}  {'recall':>6}  {'F2':>6}",
    ]
    for test, score in config.tests.items():
        lines.append(f"{test:<{width}}  {score.questions:>9,}  {score.recall:>6.3f}  {score.f2:>6.3f}")
    lines.append(
        f"{'mean over tests':<{width}}  {config.questions:>9,}  {config.mean.recall:>6.3f}  {config.mean.f2:>6.3f}"
    )
    return "\n".join(lines)


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
                "tests": {
                    test: {"questions": score.questions, "recall": score.recall, "f2": score.f2}
                    for test, score in config.tests.items()
                },
                "mean_over_tests": {"recall": config.mean.recall, "f2": config.mean.f2},
            }
            for config in result.results
        },
        "not_scored": result.unscored,
    }
