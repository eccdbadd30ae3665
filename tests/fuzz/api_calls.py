"""The Python API surface: a function of gen/api called from a script with hostile values for its options (the
fields of gen.RunOptions, EvalOptions, JudgeOptions, PushOptions, RunSettings, RateLimits) and its keyword
arguments. The promise is the command line's: the call returns, or raises GenError naming what it refused; any
other exception is a broken promise. Each case is a valid call with one to three values changed, run by
tests/fuzz/api_call.py in a process of its own (so the runner's checks of files, memory and time hold too)."""

from __future__ import annotations

import inspect
import math
import pickle
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from tests.fuzz import datasets
from tests.fuzz.api_call import Make
from tests.fuzz.bases import BASES
from tests.fuzz.own_logs import json_lines
from tests.fuzz.runner import Case
from tests.fuzz.values import to_json

CALL = "call.pickle"

# each function's valid call: positional arguments, keyword arguments, and which keyword holds an options object
# (its class and valid fields); the hostile values go into the options' fields or the keyword arguments. Paths in
# options are Path objects, as their fields are typed (a string there is one of the hostile values)
CALLS: dict[str, tuple[tuple, dict[str, Any], tuple[str, str, dict[str, Any]] | None]] = {
    "run": (("recipe.yaml",), {}, ("options", "RunOptions", {"output_dir": Path("out"), "limit": 1})),
    "plan": (("recipe.yaml",), {}, ("options", "PlanOptions", {"limit": 1, "cache_dir": Path("cache")})),
    "validate": (
        ("recipe.yaml",),
        {},
        ("options", "ValidateOptions", {"source_dir": Path("data"), "cache_dir": Path("cache")}),
    ),
    "preview": (
        ("recipe.yaml", "time_queries"),
        {"index": 0},
        ("options", "PlanOptions", {"limit": 1, "cache_dir": Path("cache")}),
    ),
    "evaluate": (("ds", "mine.jsonl"), {}, ("options", "EvalOptions", {"k": 3, "json_out": Path("out/scores.json")})),
    "evaluate-answers": (
        ("own",),
        {"answers": "answers.jsonl"},
        ("options", "EvalOptions", {"csv_out": Path("out/scores.csv")}),
    ),
    "judge": (("ds", "mine.jsonl"), {}, ("options", "JudgeOptions", {"output": Path("out/verdicts.json")})),
    "push": (
        ("own",),
        {},
        ("options", "PushOptions", {"repo_id": "me/own", "export_dir": Path("out/hub"), "dry_run": True}),
    ),
    "export_harness": (("ds", "beir", "out/exp"), {}, ("options", "ExportOptions", {"config": "time_queries"})),
    "import_predictions": (("results.json", "beir", "out/preds.jsonl"), {}, None),
    "baseline": (
        ("recent", "ds", "out/recent.jsonl"),
        {},
        ("options", "BaselineOptions", {"k": 5, "whole_dialogue": False, "turns": False}),
    ),
    "summary": (("ds",), {}, None),
    "load": (("ds",), {}, None),
    "load_recipe": (("recipe.yaml",), {"source_dir": "data"}, None),
    "schema": ((), {"markdown": True, "builtin": False, "output": "out/schema.md"}, None),
    "batches": ((), {"cache_dir": "cache"}, None),
    "forget_batch": (("batch_123",), {"cache_dir": "cache"}, None),
    "repair_cache": ((), {"cache_dir": "cache"}, None),
}
# the fields each options class takes, beside those of its valid call
OPTION_FIELDS = {
    "RunOptions": ["output_dir", "limit", "workers", "executor", "ray_address", "source_dir", "llm"],
    "PlanOptions": ["limit", "cache_dir", "progress"],
    "ValidateOptions": ["source_dir", "cache_dir", "probe", "progress"],
    "ExportOptions": ["config", "revision", "progress"],
    "BaselineOptions": ["k", "whole_dialogue", "turns", "revision", "progress"],
    "EvalOptions": [
        "k",
        "questions_from",
        "revision",
        "json_out",
        "csv_out",
        "judge_recipe",
        "judge_endpoint",
        "verdicts_out",
        "llm",
    ],
    "JudgeOptions": ["output", "recipe", "endpoint", "revision", "llm"],
    "PushOptions": [
        "repo_id",
        "private",
        "revision",
        "create_pr",
        "message",
        "max_shard_size",
        "export_dir",
        "dry_run",
        "personal_data_ok",
    ],
}
RUN_SETTINGS = ["limits", "cache_dir", "offline", "progress", "progress_interval_s", "request_processes"]
RATE_LIMITS = ["max_concurrency", "requests_per_minute", "tokens_per_minute", "timeout_s", "max_retries", "max_wait_s"]
# where a value names a file or folder gen may write: the value is then a declared output of the case
WRITTEN = {"output_dir", "json_out", "csv_out", "verdicts_out", "output", "export_dir", "cache_dir", "batch_export"}
WRITTEN_ARGUMENT = {"import_predictions": 2, "baseline": 2, "export_harness": 2}  # the position of the output

HOSTILE = [
    None,
    True,
    False,
    0,
    -1,
    1.5,
    10**20,
    float("nan"),
    float("inf"),
    -math.inf,
    "",
    " ",
    "1",
    "abc",
    "\x00",
    "\u202e",
    "x" * 5000,
    [],
    {},
    ["a"],
    {"a": 1},
    b"bytes",
    (1, 2),
    Path("/dev/full"),
    "/dev/zero",
    "/",
    ".",
    "out",
    "out/earlier-run",  # (not a file inside it: an output named explicitly is replaced, as it would be by hand)
    "recipe.yaml",
    "ds",
    "ds/run.json",
    "missing/deep",
    "hf:nobody/nothing",
    "~",
]


def hostile() -> st.SearchStrategy:
    return st.one_of(st.sampled_from(HOSTILE), st.integers(), st.text(max_size=8))


@st.composite
def llm_settings(draw) -> Any:
    """RunSettings given as a mapping or made, its fields (and its limits') hostile."""
    fields: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(RUN_SETTINGS + RATE_LIMITS), min_size=1, max_size=2, unique=True)):
        if name in RATE_LIMITS:
            fields.setdefault("limits", {})[name] = draw(hostile())
        else:
            fields[name] = draw(hostile())
    as_object = draw(st.booleans())
    if as_object and isinstance(fields.get("limits"), dict):
        fields["limits"] = Make("RateLimits", fields["limits"], module="gen.llm.config")
    return Make("RunSettings", fields, module="gen.llm.config") if as_object else fields


@st.composite
def api_cases(draw, calls: tuple[str, ...] = tuple(sorted(CALLS)), options_only: bool = False) -> Case:
    """A call of one of `calls` with one to three hostile values (with `options_only`, only in its options
    object's fields)."""
    name = draw(st.sampled_from(calls))
    args, kwargs, options = CALLS[name]
    args, kwargs = list(args), dict(kwargs)
    changed: list[str] = []
    option_fields: dict[str, Any] = dict(options[2]) if options else {}
    for _ in range(draw(st.integers(1, 3))):
        places = ["option", "option", "keyword", "argument"] if options else ["keyword", "argument"]
        if options_only and options:
            places = ["option"]
        where = draw(st.sampled_from(places))
        if where == "option" and options:
            field = draw(st.sampled_from(OPTION_FIELDS[options[1]]))
            value = draw(llm_settings()) if field == "llm" and draw(st.booleans()) else draw(hostile())
            option_fields[field] = value
            changed.append(f"{options[1]}.{field}={value!r}"[:160])
        elif where == "keyword" and kwargs:
            field = draw(st.sampled_from(sorted(kwargs)))
            kwargs[field] = draw(hostile())
            changed.append(f"{field}={kwargs[field]!r}"[:160])
        elif args:
            position = draw(st.integers(0, len(args) - 1))
            args[position] = draw(hostile())
            changed.append(f"argument {position}={args[position]!r}"[:160])
    if options:
        keyword, class_name, _ = options
        as_mapping = not options_only and draw(st.integers(0, 9)) == 0  # a dict where the object belongs
        kwargs[keyword] = dict(option_fields) if as_mapping else Make(class_name, option_fields)
        if as_mapping:
            changed.append(f"{keyword} given as a dict")
    function = "evaluate" if name == "evaluate-answers" else name
    call = {"function": function, "args": args, "kwargs": kwargs}
    return Case(
        "api",
        (CALL,),
        {**files(), CALL: pickle.dumps(call)},
        outputs=outputs(kwargs, option_fields, args[WRITTEN_ARGUMENT[name]] if name in WRITTEN_ARGUMENT else None),
        names=names(function, args, kwargs, option_fields, options[1] if options else None),
        what=f"gen.{function}: {'; '.join(changed)}"[:400],
        module="tests.fuzz.api_call",
    )


def files() -> dict[str, bytes]:
    """The quickstart recipe and source, a finished dataset (`ds/`) and one made from people's logs (`own/`), and
    a file of each kind the calls read."""
    found = {**BASES["quickstart"].files(), **datasets.dataset_files(), **datasets.own_dataset_files()}
    found["mine.jsonl"] = json_lines(datasets.valid_predictions()[:3])
    found["answers.jsonl"] = json_lines(datasets.valid_answers()[:3])
    found["results.json"] = to_json(datasets.valid_results("beir"))
    return found


def outputs(kwargs: dict[str, Any], option_fields: dict[str, Any], argument: Any) -> tuple[str, ...]:
    """The run's default output folder, the cache, the default verdicts files, the output argument, and every value
    given to a field that names where gen writes."""
    found = ["out", "cache", "outputs", "mine.verdicts.json", "answers.verdicts.json"]
    if isinstance(argument, (str, Path)) and str(argument):
        found.append(str(argument))
    settings = option_fields.get("llm")
    nested = settings.kwargs if isinstance(settings, Make) else settings if isinstance(settings, dict) else {}
    for fields in (kwargs, option_fields, nested):
        for field, value in fields.items():
            if field in WRITTEN and isinstance(value, (str, Path)) and str(value):
                found.append(str(value).rstrip("/") or "/")
    return tuple(found)


def names(
    function: str, args: list, kwargs: dict[str, Any], option_fields: dict[str, Any], class_name: str | None
) -> tuple[str, ...]:
    """What a refusal may name: a field or parameter (as gen's Python API or its command line spells it) or a
    value given."""
    import gen.api

    parameters = list(inspect.signature(getattr(gen.api, function)).parameters)
    fields = [*kwargs, *option_fields, *RUN_SETTINGS, *RATE_LIMITS, *parameters]
    fields += [f"{function}({parameter}=...)" for parameter in parameters]
    spelt = [form for field in fields for form in (field, f"--{field.replace('_', '-')}")]
    if class_name:
        spelt += [class_name, *(f"{class_name}.{field}" for field in option_fields)]
        spelt += [f"RunSettings.{field}" for field in RUN_SETTINGS] + [f"RateLimits.{field}" for field in RATE_LIMITS]
    given = [*args, *kwargs.values(), *option_fields.values()]
    values = [str(value) for value in given if isinstance(value, (str, Path, int, float))]
    positional = ["NAME", "DATASET", "RESULTS", "FORMAT", "--format", "--product", "--config", "RUN_FOLDER"]
    files = ["recipe.yaml", "mine.jsonl", "answers.jsonl", "results.json", "ds", "own", "run.json"]
    return (*spelt, *values, *positional, *files)
