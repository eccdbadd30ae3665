"""The command line is a thin layer over the Python API: every command of the typer app (read from the app, so a
command added without its API function fails here) calls exactly one function of gen.api, once, with the options
its command line gave. The API function is replaced by a recorder, so nothing is read or run."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest

import gen
import gen.api
from gen.llm.config import RateLimits, RunSettings
from tests.conftest import run_cli

GEN = Path(gen.__file__).parent


def commands() -> set[str]:
    """Every command path of the app ("run", "batches cancel"...); a group that runs on its own (gen batches) is
    one too."""
    import typer.main

    from gen.cli import app

    def walk(group: Any, prefix: str) -> set[str]:
        found = set()
        for name, command in group.commands.items():
            path = f"{prefix}{name}"
            if hasattr(command, "commands"):
                if command.invoke_without_command:
                    found.add(path)
                found |= walk(command, f"{path} ")
            else:
                found.add(path)
        return found

    return walk(typer.main.get_command(app), "")


# command path -> (its command line, the API function, what it returns, the call expected: args, keyword args).
# A keyword given as CALLABLE is a function the command passes to print through (compared by being callable).
CALLABLE = object()
CASES: dict[str, tuple[list[str], str, Any, tuple, dict]] = {
    "run": (
        [
            "run", "r.yaml", "--output-dir", "out", "--limit", "3", "--workers", "2", "--source-dir", "s",
            "--offline", "--cache-dir", "c", "--max-concurrency", "4", "--requests-per-minute", "60",
            "--request-processes", "1",
        ],
        "run",
        Path("out/r"),
        (
            Path("r.yaml"),
            gen.RunOptions(
                output_dir=Path("out"),
                limit=3,
                workers=2,
                source_dir=Path("s"),
                llm=RunSettings(
                    limits=RateLimits(max_concurrency=4, requests_per_minute=60.0),
                    offline=True,
                    cache_dir=Path("c"),
                    request_processes=1,
                ),
            ),
        ),
        {},
    ),
    "plan": (
        ["plan", "r.yaml", "--limit", "2", "--cache-dir", "c"],
        "plan",
        pd.DataFrame(),
        (Path("r.yaml"), gen.PlanOptions(limit=2, cache_dir=Path("c"))),
        {},
    ),
    "preview": (
        ["preview", "r.yaml", "--product", "time_content_questions", "--index", "3"],
        "preview",
        "the prompt",
        (Path("r.yaml"), "time_content_questions", 3, gen.PlanOptions()),
        {},
    ),
    "validate": (
        ["validate", "r.yaml", "--probe", "--source-dir", "s"],
        "validate",
        gen.Validation(recipe="r", conversations=1, responses=None, products=["log"]),
        (Path("r.yaml"), gen.ValidateOptions(source_dir=Path("s"), probe=True)),
        {},
    ),
    "products": (["products"], "list_products", {"log": "the log"}, (), {}),
    "push": (
        ["push", "out/q", "--repo-id", "me/x", "--public", "--dry-run", "-m", "first", "--create-pr"],
        "push",
        None,
        (Path("out/q"), gen.PushOptions(repo_id="me/x", private=False, message="first", dry_run=True, create_pr=True)),
        {"out": CALLABLE, "note": CALLABLE},
    ),
    "export": (
        ["export", "d", "--format", "beir", "--output", "o", "--config", "time_queries", "--revision", "v1"],
        "export_harness",
        [],
        (Path("d"), "beir", Path("o"), gen.ExportOptions(config="time_queries", revision="v1")),
        {},
    ),
    "import-predictions": (
        ["import-predictions", "res.json", "--format", "locomo", "--export", "e", "--output", "p.jsonl"],
        "import_predictions",
        gen.Imported(5, None),
        (Path("res.json"), "locomo", Path("p.jsonl")),
        {"export_folder": Path("e"), "prediction_key": None},
    ),
    "eval": (
        ["eval", "d", "--predictions", "p.jsonl", "--k", "5", "--json", "s.json"],
        "evaluate",
        gen.Scores(pd.DataFrame(), "the scores", {}),
        (Path("d"), Path("p.jsonl")),
        {"answers": None, "options": gen.EvalOptions(k=5, json_out=Path("s.json"), llm=RunSettings())},
    ),
    "baseline": (
        ["baseline", "bm25", "d", "--output", "o.jsonl", "--k", "7", "--whole-dialogue"],
        "baseline",
        3,
        ("bm25", Path("d"), Path("o.jsonl"), gen.BaselineOptions(k=7, whole_dialogue=True)),
        {},
    ),
    "judge": (
        ["judge", "d", "--answers", "a.jsonl", "--endpoint", "j", "--offline", "--tokens-per-minute", "1000"],
        "judge",
        gen.Judged("the verdicts", Path("v.json"), 2, {"calls_made": 1, "calls_cached": 1}),
        (
            Path("d"),
            Path("a.jsonl"),
            gen.JudgeOptions(
                endpoint="j", llm=RunSettings(limits=RateLimits(tokens_per_minute=1000.0), offline=True)
            ),
        ),
        {},
    ),
    "view": (
        ["view", "f", "--port", "0", "--compare", "g"],
        "view_folder",
        None,
        (Path("f"), gen.ViewOptions(port=0, compare=Path("g"))),
        {"say": CALLABLE},
    ),
    "schema": (
        ["schema", "--markdown", "--builtin"],
        "schema",
        "# options\n",
        (),
        {"markdown": True, "builtin": True, "output": None},
    ),
    "cache repair": (
        ["cache", "repair", "--cache-dir", "c"],
        "repair_cache",
        gen.Repaired(Path("c/llm.sqlite"), 4, 0, Path("c/llm.sqlite.damaged")),
        (Path("c"),),
        {},
    ),
    "batches": (["batches", "--cache-dir", "c"], "batches", [], (Path("c"),), {}),
    "batches cancel": (
        ["batches", "cancel", "batch_1", "--cache-dir", "c"],
        "cancel_batch",
        "cancelling",
        ("batch_1", Path("c")),
        {},
    ),
    "batches forget": (
        ["batches", "forget", "batch_1"],
        "forget_batch",
        gen.Forgotten(SimpleNamespace(status="completed"), still_running=False),  # type: ignore[arg-type]
        ("batch_1", None),
        {},
    ),
}  # fmt: skip


def test_every_command_of_the_app_has_its_case_here():
    assert commands() == set(CASES)


@pytest.mark.parametrize("command", sorted(CASES))
def test_the_command_calls_its_api_function_once_with_the_options_given(command, monkeypatch, capsys):
    argv, function, returned, args, kwargs = CASES[command]
    calls: list[tuple[tuple, dict]] = []

    def recorder(*given: Any, **named: Any) -> Any:
        calls.append((given, named))
        return returned

    monkeypatch.setattr(gen.api, function, recorder)
    code, _, err = run_cli(argv, capsys)
    assert code == 0, err
    assert len(calls) == 1
    given, named = calls[0]
    assert given == args
    assert named.keys() == kwargs.keys()
    for key, expected in kwargs.items():
        assert callable(named[key]) if expected is CALLABLE else named[key] == expected, key


def test_a_command_prints_what_its_function_returned(monkeypatch, capsys):
    monkeypatch.setattr(gen.api, "preview", lambda *_, **__: "the prompt, as sent")
    assert run_cli(["preview", "r.yaml", "--product", "p"], capsys)[1] == "the prompt, as sent\n"
    scores = gen.Scores(pd.DataFrame(), "recall 0.5", {})
    monkeypatch.setattr(gen.api, "evaluate", lambda *_, **__: scores)
    assert run_cli(["eval", "d", "--answers", "a.jsonl"], capsys)[1] == "recall 0.5\n"


def test_import_gen_names_exactly_the_api():
    assert sorted(gen.__all__) == sorted(gen.api.__all__)


def test_no_api_name_is_also_a_module_of_gen():
    """`import gen.x.y` binds gen.x to the package x, so an API function named like a package of gen would be
    replaced by it after the first such import (hence export_harness, view_folder, list_products)."""
    modules = {path.stem for path in GEN.glob("*.py")} | {path.name for path in GEN.iterdir() if path.is_dir()}
    assert not set(gen.__all__) & modules


def test_run_options_refuse_what_the_command_line_refuses():
    with pytest.raises(gen.errors.GenError, match=r"RunOptions.ray_address is only for executor='ray'"):
        gen.RunOptions(ray_address="auto")
    with pytest.raises(gen.errors.GenError, match=r"RunOptions.executor: .*dask.*\(expected 'local' or 'ray'\)"):
        gen.RunOptions(executor="dask")
