"""gen: evaluation datasets for long-term-memory dialogue agents, built from multi-session corpora.

The Python API (gen/api.py; the command line is a thin layer over the same code):

    load_recipe(path_or_mapping)        a recipe, checked whole (its keys, then every product's options)
    run_recipe(recipe, output_dir)      build, validate and write a run folder; returns its path
    validate(recipe)                    what a run will need: sources, prompts, API-key variables (writes nothing)
    plan(recipe)                        LLM calls needed, cached and at most, per step (a DataFrame)
    summary(run_folder)                 one row per config: records, validation (a DataFrame)
    load(run_folder)                    a datasets.DatasetDict, one Dataset per config
    export_harness(dataset, format, out)  a harness's layout: locomo, longmemeval or beir
    evaluate(dataset, predictions)      scores per config and test (a DataFrame)

They are imported on first use, so `import gen` stays light.
"""

import importlib
from typing import Any

__version__ = "0.1.0"

__all__ = ["evaluate", "export_harness", "load", "load_recipe", "plan", "run_recipe", "summary", "validate"]


def __getattr__(name: str) -> Any:
    if name in __all__:  # the API on first use, so that `import gen` stays light
        return getattr(importlib.import_module("gen.api"), name)
    raise AttributeError(f"module 'gen' has no attribute {name!r}")
