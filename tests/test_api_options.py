"""The settings a Python caller builds (gen.RunOptions, RunSettings, RateLimits and every other options object of
gen.api) refuse a value out of its range, of the wrong type or under an unknown name when they are made: one
GenError naming the field and what it takes, as the command line refuses its own options; never pydantic's
ValidationError or a TypeError. Fields the command line does not expose are checked the same way. An error reached
from Python names the field or parameter, never a command-line option."""

from __future__ import annotations

import inspect
import typing

import pytest
from pydantic import ValidationError

import gen
import gen.api
from gen.errors import GenError
from gen.llm.config import RateLimits, RunSettings
from gen.validation import OptionsModel
from tests.conftest import run_cli

CASES = {
    "max_concurrency 0": (
        lambda: RateLimits(max_concurrency=0),
        "RateLimits.max_concurrency",
        "a number at least 1 and at most 1,024",
    ),
    "negative requests_per_minute, nested as mappings": (
        lambda: gen.RunOptions(llm={"limits": {"requests_per_minute": -5}}),
        "RateLimits.requests_per_minute",
        "a number at least 0.001 and at most 1,000,000,000",
    ),
    "tokens_per_minute 0": (
        lambda: RateLimits(tokens_per_minute=0),
        "RateLimits.tokens_per_minute",
        "a number at least 1 and at most 1,000,000,000,000",
    ),
    "max_retries past 100 (no option of the command line)": (
        lambda: RateLimits(max_retries=101),
        "RateLimits.max_retries",
        "a number at least 0 and at most 100",
    ),
    "timeout_s 0 (no option of the command line)": (
        lambda: RateLimits(timeout_s=0),
        "RateLimits.timeout_s",
        "a number more than 0",
    ),
    "progress_interval_s negative (no option of the command line)": (
        lambda: RunSettings(progress_interval_s=-1),
        "RunSettings.progress_interval_s",
        "a number more than 0",
    ),
    "request_processes past 64": (
        lambda: RunSettings(request_processes=65),
        "RunSettings.request_processes",
        "a number at least 0 and at most 64",
    ),
    "progress not a mode": (
        lambda: RunSettings(progress="loud"),
        "RunSettings.progress",
        "'auto' or 'live' or 'plain' or 'off'",
    ),
    "workers 0": (lambda: gen.RunOptions(workers=0), "RunOptions.workers", "a number at least 1 and at most 256"),
    "workers as words": (
        lambda: gen.RunOptions(workers="four"),
        "RunOptions.workers",
        "a number at least 1 and at most 256",
    ),
    "negative limit": (
        lambda: gen.RunOptions(limit=-1),
        "RunOptions.limit",
        "a number at least 0 and at most 1,000,000,000",
    ),
    "executor unknown": (lambda: gen.RunOptions(executor="dask"), "RunOptions.executor", "'local' or 'ray'"),
    "llm not settings": (lambda: gen.RunOptions(llm=5), "RunOptions.llm", "RunSettings"),
    "output_dir not a path": (lambda: gen.RunOptions(output_dir=3), "RunOptions.output_dir", "Path or None"),
}


@pytest.mark.parametrize(("make", "field", "expected"), CASES.values(), ids=list(CASES))
def test_a_bad_setting_from_python_is_one_error_naming_the_field_and_what_it_takes(make, field, expected):
    with pytest.raises(GenError) as raised:
        make()
    assert raised.value.field == field
    assert raised.value.expected == expected


def test_a_misspelt_setting_is_named_with_the_nearest_one():
    with pytest.raises(GenError) as raised:
        RateLimits(max_concurency=4)
    assert raised.value.field == "RateLimits.max_concurency"
    assert raised.value.message == "unknown key 'max_concurency'; did you mean 'max_concurrency'?"


def test_settings_in_range_are_kept_as_given_and_cannot_change():
    options = gen.RunOptions(workers=256, limit=0, llm={"limits": {"requests_per_minute": 0.001}})
    assert (options.workers, options.limit, options.llm.limits.requests_per_minute) == (256, 0, 0.001)
    with pytest.raises(ValidationError):  # frozen: one run's settings do not change under it
        options.workers = 3  # type: ignore[misc]


# --- every options class of the API, walked from gen.api.__all__ ---------------------------------------------


def options_classes() -> list[type[OptionsModel]]:
    """Every options class a caller of gen.api builds: those the API names, and the models nested in their fields
    (RunOptions.llm is a RunSettings, whose `limits` is a RateLimits), read from the classes themselves."""
    found: list[type[OptionsModel]] = []
    pending = [getattr(gen.api, name) for name in gen.api.__all__]
    while pending:
        item = pending.pop()
        if isinstance(item, type) and issubclass(item, OptionsModel) and item not in found:
            found.append(item)
            for field in item.model_fields.values():
                pending.extend(typing.get_args(field.annotation) or [field.annotation])
    return sorted(found, key=lambda model: model.__name__)


def out_of_range(field) -> list:
    """A value just past each bound the field declares (ge=1: 0; le=256: 257; gt=0: 0)."""
    values = []
    for bound in field.metadata:
        for name, step in (("ge", -1), ("le", 1), ("gt", 0), ("lt", 0)):
            if hasattr(bound, name):
                values.append(getattr(bound, name) + step)
    return values


BAD_CASES = [
    (model, name, value)
    for model in options_classes()
    for name, field in model.model_fields.items()
    for value in [*out_of_range(field), object()]  # object(): no field of any type takes it
]


def test_the_walk_finds_every_options_class_of_the_api():
    """Written out by hand once, so that the walk below cannot silently find nothing."""
    names = {model.__name__ for model in options_classes()}
    assert names >= {
        "RunOptions", "RunSettings", "RateLimits", "PlanOptions", "ValidateOptions", "PushOptions", "ExportOptions",
        "EvalOptions", "BaselineOptions", "JudgeOptions", "ViewOptions",
    }  # fmt: skip


@pytest.mark.parametrize(
    ("model", "name", "value"),
    BAD_CASES,
    ids=[f"{m.__name__}.{n}={'object()' if type(v) is object else v}" for m, n, v in BAD_CASES],
)
def test_every_field_of_every_options_class_refuses_a_bad_value_as_one_error(model, name, value):
    with pytest.raises(GenError) as raised:
        model(**{name: value})
    assert raised.value.field == f"{model.__name__}.{name}"
    assert raised.value.expected  # what it takes: its range or its type
    if type(value) is not object:  # a number out of range is quoted back
        assert str(value).removesuffix(".0") in raised.value.message


@pytest.mark.parametrize("model", options_classes(), ids=lambda model: model.__name__)
def test_every_options_class_names_the_nearest_field_for_a_misspelt_one(model):
    for name in model.model_fields:
        misspelt = name[:-1] + name[-1] * 2  # the last letter doubled: "workerss"
        with pytest.raises(GenError) as raised:
            model(**{misspelt: None})
        assert raised.value.field == f"{model.__name__}.{misspelt}"
        assert raised.value.message.endswith(f"did you mean {name!r}?")


@pytest.mark.parametrize("model", options_classes(), ids=lambda model: model.__name__)
def test_settings_given_without_their_names_are_one_error_listing_the_names(model):
    with pytest.raises(GenError) as raised:
        model("value")
    assert raised.value.field == model.__name__
    assert all(f"{name}=" in raised.value.expected for name in model.model_fields)


def api_functions_with_options() -> list[str]:
    return [
        name
        for name in gen.api.__all__
        if callable(getattr(gen.api, name))
        and not isinstance(getattr(gen.api, name), type)
        and "options" in inspect.signature(getattr(gen.api, name)).parameters
    ]


def test_every_api_function_with_options_takes_an_options_class_through_api_call():
    """The options and progress of a call are handled in one place (gen/api/calls.py), never by hand."""
    functions = api_functions_with_options()
    assert {"run", "plan", "preview", "validate", "push", "export_harness", "evaluate", "baseline", "judge"} <= set(
        functions
    )
    for name in functions:
        function = getattr(gen.api, name)
        assert hasattr(function, "__wrapped__"), f"{name} is not decorated with api_call"
        annotation = inspect.signature(function).parameters["options"].annotation
        kind = annotation.split(" | ")[0]  # "PlanOptions | None"
        assert issubclass(getattr(gen.api, kind), OptionsModel), name


@pytest.mark.parametrize("name", api_functions_with_options())
def test_options_of_another_kind_are_one_error_before_any_work(name):
    function = getattr(gen.api, name)
    required = [
        p for p in inspect.signature(function).parameters.values() if p.default is p.empty and p.name != "options"
    ]
    with pytest.raises(GenError) as raised:
        function(*["unused"] * len(required), options={"progress": "off"})
    assert raised.value.field == f"{name}(options=...)"
    assert raised.value.message.endswith("got a dict")


API_FUNCTIONS = sorted(name for name in gen.api.__all__ if inspect.isfunction(getattr(gen.api, name)))
# what each kind of parameter takes, by the parameter's name as the API spells it; a new parameter name fails the
# test below until it is listed, so its check is thought about
GOOD_VALUES = {
    "recipe": "never read.yaml",
    "run_folder": "never read",
    "dataset": "never read",
    "output": "never written",
    "results": "never read.json",
    "answers": "never read.jsonl",
    "predictions": "never read.jsonl",
    "format": "beir",
    "name": "recent",
    "product": "time_content_questions",
    "index": 0,
    "batch_id": "batch_0",
}


@pytest.mark.parametrize("name", API_FUNCTIONS)
def test_every_api_function_refuses_an_argument_of_a_type_its_signature_does_not_name(name):
    """gen.summary(None), gen.load(5), gen.export_harness(folder, None, ...) are one GenError naming the parameter
    (gen/api/calls.py), never a TypeError from deep inside."""
    function = getattr(gen.api, name)
    assert hasattr(function, "__wrapped__"), f"{name} is not decorated with api_call"
    parameters = inspect.signature(function).parameters.values()
    required = [p.name for p in parameters if p.default is p.empty and p.kind is not p.KEYWORD_ONLY]
    for parameter in parameters:
        if parameter.name == "options" or "Callable" in str(parameter.annotation):
            continue
        arguments = {r: GOOD_VALUES[r] for r in required} | {parameter.name: object()}
        with pytest.raises(GenError) as raised:
            function(**arguments)
        assert raised.value.field == f"{name}({parameter.name}=...)", raised.value
        assert raised.value.message == "got a value of type object"


# --- names: an error reached from Python names the field, from the command line the option -----------------


def test_a_python_caller_is_told_the_field_and_a_shell_user_the_option(tmp_path, capsys):
    with pytest.raises(GenError) as raised:
        gen.RunOptions(ray_address="auto")
    assert (raised.value.field, raised.value.expected) == ("RunOptions.ray_address", "executor='ray'")
    assert "--" not in str(raised.value)
    code, _, err = run_cli(["run", "r.yaml", "--ray-address", "auto"], capsys)
    assert code == 2
    assert err == "error: --ray-address: --ray-address is only for --executor ray (expected --executor ray)\n"
    with pytest.raises(GenError) as raised:  # and after the command, Python's names again
        gen.RunOptions(ray_address="auto")
    assert raised.value.field == "RunOptions.ray_address"


def test_evaluate_from_python_names_its_parameters_and_fields(quickstart, tmp_path):
    with pytest.raises(GenError) as raised:
        gen.evaluate(quickstart)
    assert raised.value.field == "predictions / answers"
    assert raised.value.message == "give either predictions (retrieved responses) or answers (written answers)"
    with pytest.raises(GenError) as raised:
        gen.evaluate(quickstart, answers=tmp_path / "a.jsonl", options=gen.EvalOptions(k=3))
    assert (raised.value.field, raised.value.expected) == ("EvalOptions.k", "EvalOptions.k with predictions")
    with pytest.raises(GenError) as raised:  # the scores written over the predictions they read
        gen.evaluate(quickstart, tmp_path / "p.jsonl", options=gen.EvalOptions(json_out=tmp_path / "p.jsonl"))
    assert "EvalOptions.json_out" in str(raised.value) and "--" not in str(raised.value)


def test_preview_refuses_a_negative_index_rather_than_showing_the_last_item():
    with pytest.raises(GenError) as raised:
        gen.preview("never read.yaml", "time_content_questions", -1)
    assert (raised.value.field, raised.value.expected) == ("preview(index=...)", "0 or more")


def test_harness_exports_and_imports_name_their_parameters_from_python_and_options_from_a_shell(
    quickstart, tmp_path, capsys
):
    with pytest.raises(GenError) as raised:
        gen.export_harness(quickstart, "locomo", tmp_path / "x", gen.ExportOptions(config="nope"))
    assert raised.value.field == "ExportOptions.config"
    with pytest.raises(GenError) as raised:
        gen.export_harness(quickstart, "locomoo", tmp_path / "x")
    assert raised.value.field == "format"
    with pytest.raises(GenError) as raised:
        gen.export_harness(quickstart, "locomo", quickstart / "inside")
    assert "output: this lies inside the input dataset" in str(raised.value) and "--" not in str(raised.value)
    results = tmp_path / "results.json"
    results.write_text("[]")
    with pytest.raises(GenError) as raised:
        gen.import_predictions(results, "longmemeval", tmp_path / "p.jsonl")
    assert raised.value.field == "import_predictions(export_folder=...)"
    code, _, err = run_cli(
        ["export", str(quickstart), "--format", "locomo", "--output", str(tmp_path / "y"), "--config", "nope"], capsys
    )
    assert code == 2 and "--config: no question config" in err
    code, _, err = run_cli(
        ["import-predictions", str(results), "--format", "longmemeval", "--output", str(tmp_path / "p.jsonl")], capsys
    )
    assert code == 2 and "--export: " in err


def test_an_empty_path_given_to_an_api_function_is_named_not_read_as_the_current_folder():
    with pytest.raises(GenError) as raised:
        gen.load_recipe("")
    assert (raised.value.field, raised.value.message) == ("load_recipe(recipe=...)", "an empty path")
    with pytest.raises(GenError) as raised:
        gen.summary("  ")
    assert (raised.value.field, raised.value.message) == ("summary(run_folder=...)", "an empty path")


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        ("x" * 256, "a path with a name of more than 255 bytes (a file system takes 255 at most)"),
        ("a/" * 2100, "a path of more than 4,096 bytes"),
        ("a\x00b", "a path with a NUL character"),
        ("\ud800", "a path that cannot be written as a file name (a lone surrogate)"),
    ],
)
def test_a_path_no_file_system_takes_is_one_error_where_it_is_given(path, problem, tmp_path, capsys):
    """Python's os calls fail on such a path (ENAMETOOLONG, ValueError, UnicodeEncodeError) wherever it is first
    used; gen names it where it was given: the parameter, the options field, or at a shell the path itself."""
    with pytest.raises(GenError) as raised:
        gen.summary(path)
    assert (raised.value.field, raised.value.message) == ("summary(run_folder=...)", problem)
    with pytest.raises(GenError) as raised:
        gen.EvalOptions(json_out=path)
    assert raised.value.field == "EvalOptions.json_out" and raised.value.message.startswith(problem)
    if "\x00" not in path and "\ud800" not in path:  # neither can be a command-line argument
        code, _, err = run_cli(["eval", path, "--predictions", str(tmp_path / "p.jsonl")], capsys)
        assert (
            code == 2
            and err.count("\n") == 1
            and err.endswith(f": {problem} (expected a path a file system can take)\n")
        )


def test_an_options_field_given_on_the_command_line_is_named_by_its_option(quickstart, tmp_path, capsys):
    long_name = str(tmp_path / ("x" * 256))
    code, _, err = run_cli(["eval", str(quickstart), "--predictions", "p.jsonl", "--json", long_name], capsys)
    assert code == 2 and err.startswith("error: --json: a path with a name of more than 255 bytes")
    code, _, err = run_cli(["run", "r.yaml", "--output-dir", long_name], capsys)
    assert code == 2 and err.startswith("error: --output-dir: a path with a name of more than 255 bytes")
    with pytest.raises(GenError) as raised:  # and the same setting from Python, by its field
        gen.EvalOptions(json_out=long_name)
    assert raised.value.field == "EvalOptions.json_out"
