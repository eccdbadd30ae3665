"""gen from Python: every command of the `gen` program is a thin layer over one function here, so a script and
the command line take the same path and get the same checks and errors.

    import gen

    recipe = gen.load_recipe("recipes/quickstart.yaml")          # or a dict, checked the same way
    folder = gen.run(recipe, gen.RunOptions(output_dir=Path("outputs")))
    gen.summary(folder)                                            # a DataFrame: one row per config
    dataset = gen.load(folder)                                     # a DatasetDict: one Dataset per config
    gen.export_harness(folder, "beir", "exports/quickstart-beir")
    gen.evaluate(folder, "predictions.jsonl").table                # scores per config and test

Every function raises `gen.GenError` (gen/errors.py) with the file, record and field of a problem, as the command line
prints it. A function's settings are one options object (gen.RunOptions, PlanOptions, ValidateOptions,
PushOptions, ExportOptions, EvalOptions, BaselineOptions, JudgeOptions, ViewOptions): checked when it is made (a
value out of range, of the wrong type or misspelt is a GenError naming `Class.field` and what it takes), and its
`progress` decides the displays of that call only (calls.py). The modules:

    calls.py       CallOptions (the options' base) and api_call: the options and progress of every call

    recipes.py     load_recipe, and `bound`: the one way a recipe is loaded and its products bound
    building.py    run, plan, validate, preview (gen run, plan, validate, preview)
    folders.py     summary, load: a finished run folder from Python
    publishing.py  push, export_harness, import_predictions (gen push, export, import-predictions)
    scoring.py     evaluate, baseline, judge (gen eval, baseline, judge)
    tools.py       view_folder, batches, cancel_batch, forget_batch, repair_cache, schema, list_products

Three names differ from their command, because gen has a package of the command's name (gen.export, gen.view,
gen.products) that an import would put in the function's place: export_harness, view_folder, list_products.
"""

from gen.api.building import PlanOptions, ValidateOptions, Validation, plan, preview, run, validate
from gen.api.folders import load, summary
from gen.api.publishing import ExportOptions, Imported, PushOptions, export_harness, import_predictions, push
from gen.api.recipes import load_recipe
from gen.api.scoring import BaselineOptions, EvalOptions, Judged, JudgeOptions, Scores, baseline, evaluate, judge
from gen.api.tools import (
    Forgotten,
    Repaired,
    ViewOptions,
    batches,
    cancel_batch,
    forget_batch,
    list_products,
    repair_cache,
    schema,
    view_folder,
)
from gen.errors import GenError
from gen.pipeline.options import RunOptions

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
