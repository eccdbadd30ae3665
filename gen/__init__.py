"""gen: evaluation datasets for long-term-memory dialogue agents, built from multi-session corpora.

The Python API is the one door every command goes through (gen/api/; each `gen` command is a thin layer over one
of these functions):

    load_recipe(path_or_mapping)          a recipe, checked whole (its keys, then every product's options)
    run(recipe, RunOptions(...))          build, validate and write a run folder; returns its path
    validate(recipe, ValidateOptions())   what a run will need: sources, prompts, API-key variables (writes nothing)
    plan(recipe, PlanOptions())           LLM calls needed, cached and at most, per step (a DataFrame)
    preview(recipe, product, index)       the prompt one item sends
    summary(run_folder)                   one row per config: records, validation (a DataFrame)
    load(run_folder)                      a datasets.DatasetDict, one Dataset per config
    push(run_folder, PushOptions(...))    publish to the Hugging Face Hub
    export_harness(dataset, format, out, ExportOptions())  a harness's layout: locomo, longmemeval or beir
    import_predictions(results, format, out)  a harness's results back as predictions
    evaluate(dataset, predictions)        scores per config and test (predictions from a file or in memory)
    baseline(name, dataset, output)       a reference system's predictions
    judge(dataset, answers)               an LLM judge's verdicts on TeaBag answers
    view_folder(run_folder)               the run in a local web app
    batches(), cancel_batch(id), forget_batch(id), repair_cache(), schema(), list_products()

Each options object is checked when made (one GenError naming `Class.field` and what it takes) and its
`progress` ("auto", "live", "plain", "off") decides the displays of that one call.

They are imported on first use, so `import gen` stays light.
"""

import importlib
from typing import Any

__version__ = "0.1.0"

# gen/api/__init__.py's __all__, repeated here so that naming them imports nothing (tests/test_one_door.py checks
# that the two lists agree)
__all__ = [
    "BaselineOptions",
    "EvalOptions",
    "ExportOptions",
    "Forgotten",
    "GenError",
    "Imported",
    "JudgeOptions",
    "Judged",
    "PlanOptions",
    "PushOptions",
    "Repaired",
    "RunOptions",
    "Scores",
    "ValidateOptions",
    "Validation",
    "ViewOptions",
    "baseline",
    "batches",
    "cancel_batch",
    "evaluate",
    "export_harness",
    "forget_batch",
    "import_predictions",
    "judge",
    "list_products",
    "load",
    "load_recipe",
    "plan",
    "preview",
    "push",
    "repair_cache",
    "run",
    "schema",
    "summary",
    "validate",
    "view_folder",
]


def __getattr__(name: str) -> Any:
    if name in __all__:  # the API on first use, so that `import gen` stays light
        return getattr(importlib.import_module("gen.api"), name)
    raise AttributeError(f"module 'gen' has no attribute {name!r}")
