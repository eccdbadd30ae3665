"""The command line under usage errors, --version, --debug, exit codes and Ctrl-C before a run, through real
`gen` processes (main() decides the exit code); and how `gen plan` shows small and large costs."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

from gen.cli import dollars
from tests.conftest import REPO, gen_subprocess, locomo_sample, run_cli, write_json, write_recipe

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"


def gen_process(*args, cwd: Path | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gen", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def gen(*args, cwd: Path | None = None) -> tuple[int, str, str]:
    """Run `gen ARGS` in a new process; (exit code, stdout, stderr)."""
    done = gen_subprocess(*args, cwd=cwd, timeout=120)
    return done.returncode, done.stdout, done.stderr


def gen_all(commands: dict[str, list]) -> dict[str, tuple[int, str, str]]:
    """Several `gen` processes at once (each is mostly Python's start-up), their results by name."""
    running = {name: gen_process(*args) for name, args in commands.items()}
    results = {}
    for name, process in running.items():
        out, err = process.communicate(timeout=120)
        results[name] = (process.returncode, out, err)
    return results


# --- 7. usage errors: exit 2, the usage line, the error, no traceback -----------------------------------

USAGE_ERRORS = {
    "run: unknown option": (["run", "r.yaml", "--bogus"], "run", "No such option: --bogus"),
    "run: missing recipe": (["run"], "run", "Missing argument"),
    "run: bad --limit": (["run", "r.yaml", "--limit", "-1"], "run", "Invalid value for '--limit'"),
    "plan: missing recipe": (["plan"], "plan", "Missing argument"),
    "preview: missing --product": (["preview", "r.yaml"], "preview", "Missing option '--product'"),
    "validate: extra argument": (["validate", "a.yaml", "b.yaml"], "validate", "unexpected extra argument"),
    "products: extra argument": (["products", "log"], "products", "unexpected extra argument"),
    "push: missing folder": (["push"], "push", "Missing argument"),
    "gen: unknown option": (["--loud", "products"], "", "No such option: --loud"),
    "gen: unknown command": (["build", "r.yaml"], "", "No such command 'build'"),
}


@pytest.fixture(scope="module")
def usage_results():
    return gen_all({name: args for name, (args, _, _) in USAGE_ERRORS.items()})


@pytest.mark.parametrize("case", USAGE_ERRORS)
def test_usage_errors_exit_2_with_the_usage_line_and_no_traceback(usage_results, case):
    _, subcommand, message = USAGE_ERRORS[case]
    code, out, err = usage_results[case]
    assert code == 2, err
    assert "Traceback" not in err and "Traceback" not in out
    command = f"gen {subcommand}".rstrip()
    assert err.startswith(f"Usage: {command} ")
    assert f"Try '{command} --help' for help." in err
    assert message in err


# Every number the command line takes, just past its range (written here by hand, not read from gen): refused by
# the parser before any work, exit 2, the option named. NaN and inf are in no range.
OUT_OF_RANGE = [
    (["run", "r.yaml", "--workers", "257"], "--workers"),
    (["run", "r.yaml", "--workers", "0"], "--workers"),
    (["run", "r.yaml", "--request-processes", "65"], "--request-processes"),
    (["run", "r.yaml", "--max-concurrency", "1025"], "--max-concurrency"),
    (["run", "r.yaml", "--requests-per-minute", "inf"], "--requests-per-minute"),
    (["run", "r.yaml", "--requests-per-minute", "nan"], "--requests-per-minute"),
    (["run", "r.yaml", "--tokens-per-minute", "1e13"], "--tokens-per-minute"),
    (["run", "r.yaml", "--limit", "1000000001"], "--limit"),
    (["plan", "r.yaml", "--limit", "99999999999999999999999999"], "--limit"),
    (["preview", "r.yaml", "--product", "log", "--index", "1000000001"], "--index"),
    (["eval", "d", "--predictions", "p.jsonl", "--k", "100001"], "--k"),
    (["baseline", "recent", "d", "--output", "o.jsonl", "--k", "0"], "--k"),
    (["judge", "d", "--answers", "a.jsonl", "--max-concurrency", "0"], "--max-concurrency"),
    (["view", "d", "--port", "65536"], "--port"),
]


@pytest.mark.parametrize(("args", "option"), OUT_OF_RANGE, ids=[" ".join(args) for args, _ in OUT_OF_RANGE])
def test_a_number_outside_its_range_is_a_usage_error_naming_the_option(tmp_path, monkeypatch, capsys, args, option):
    monkeypatch.chdir(tmp_path)  # anything the command wrote would land here
    code, out, err = run_cli(args, capsys)
    assert code == 2
    assert f"Invalid value for '{option}'" in err and "Traceback" not in err + out
    assert not any(tmp_path.iterdir())


def test_the_command_line_has_the_recipes_own_ranges_for_concurrency_and_request_processes():
    from gen.cli.options import RANGES
    from gen.llm.config import MAX_REQUEST_PROCESSES, EndpointConfig

    metadata = EndpointConfig.model_fields["max_concurrency"].metadata
    low = next(m.ge for m in metadata if hasattr(m, "ge"))
    high = next(m.le for m in metadata if hasattr(m, "le"))
    assert RANGES["--max-concurrency"] == (low, high)
    assert RANGES["--request-processes"] == (0, MAX_REQUEST_PROCESSES)


def test_each_option_that_sets_a_python_setting_has_that_settings_range():
    """gen.RunOptions(workers=0) from Python and `gen run --workers 0` are refused alike."""
    from gen.cli.options import RANGES
    from gen.llm.config import RateLimits, RunSettings
    from gen.pipeline.options import RunOptions

    def bounds(model, name):
        metadata = model.model_fields[name].metadata
        return next(m.ge for m in metadata if hasattr(m, "ge")), next(m.le for m in metadata if hasattr(m, "le"))

    assert RANGES["--limit"] == bounds(RunOptions, "limit") == (0, 1_000_000_000)
    assert RANGES["--workers"] == bounds(RunOptions, "workers") == (1, 256)
    assert RANGES["--request-processes"] == bounds(RunSettings, "request_processes")
    assert RANGES["--max-concurrency"] == bounds(RateLimits, "max_concurrency")
    assert RANGES["--requests-per-minute"] == bounds(RateLimits, "requests_per_minute") == (0.001, 1e9)
    assert RANGES["--tokens-per-minute"] == bounds(RateLimits, "tokens_per_minute") == (1, 1e12)


def test_each_option_of_the_other_commands_has_its_options_fields_range():
    """gen.plan(recipe, gen.PlanOptions(limit=-1)) and `gen plan --limit -1` are refused alike; so are --k of gen
    eval and gen baseline, and --port of gen view."""
    import gen
    from gen.cli.options import RANGES

    def bounds(model, name):
        metadata = model.model_fields[name].metadata
        return next(m.ge for m in metadata if hasattr(m, "ge")), next(m.le for m in metadata if hasattr(m, "le"))

    assert RANGES["--limit"] == bounds(gen.PlanOptions, "limit")
    assert RANGES["--k"] == bounds(gen.EvalOptions, "k") == bounds(gen.BaselineOptions, "k") == (1, 100_000)
    assert RANGES["--port"] == bounds(gen.ViewOptions, "port") == (0, 65535)


def test_version_prints_the_installed_version():
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    code, out, err = gen("--version")
    assert (code, out.strip(), err) == (0, f"gen {project['version']}", "")


def test_debug_still_shows_the_traceback_of_a_user_error(tmp_path):
    code, _, err = gen("--debug", "validate", tmp_path / "missing.yaml")
    assert code != 0 and "Traceback" in err and "missing.yaml: no such file" in err.replace("\n", "")


NEVER_VALID = '''
import sys
from gen.products.base import ConfigSpec, ConversationProduct
from gen.products.schema import STRING, schema
from gen.products.registry import register
from gen.recipe import StrictModel
from gen.cli import main


class NeverValid(ConversationProduct[StrictModel]):
    """One record per conversation that its validator always refuses."""

    name = "never_valid"
    description = "fails validation"
    Options = StrictModel
    configs = (ConfigSpec("never_valid", "one row", schema({"conversation_id": STRING})),)

    def records(self, unit, ctx):
        yield "never_valid", {"conversation_id": unit.conversation.conversation_id}

    def validate(self, unit, records, checks, ctx):
        checks.check("never", False, unit.conversation.conversation_id)


register(NeverValid)
sys.argv[0] = "gen"
main()
'''


def test_a_user_error_exits_with_its_own_code(tmp_path):
    """A run that fails validation is a GenError with exit code 1: main() keeps that code (not always 2)."""
    driver = tmp_path / "gen_with_never_valid.py"
    driver.write_text(NEVER_VALID, encoding="utf-8")
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {"name": "nv", "sources": [{"format": "locomo", "path": str(SAMPLE)}], "products": [{"type": "never_valid"}]},
    )
    done = subprocess.run(
        [sys.executable, str(driver), "run", str(recipe), "--output-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "validation failed for never_valid" in done.stderr and "Traceback" not in done.stderr


SLOW_READ = """
import sys, time
from pathlib import Path
import gen.reading
from gen.cli import main


def waiting_read(path, *args, **kwargs):  # a recipe that takes forever to read, as a slow disk would
    Path(MARKER).write_text("reading")
    time.sleep(600)


gen.reading.read_text = waiting_read
sys.argv[0] = "gen"
main()
"""


def test_ctrl_c_while_reading_the_recipe_exits_130_in_one_line(tmp_path):
    """gen is stopped in the middle of reading the recipe (a driver makes the read wait) when Ctrl-C comes. (A
    named pipe no longer makes it wait: gen refuses one before opening it.)"""
    driver, marker = tmp_path / "gen_slow_read.py", tmp_path / "reading"
    driver.write_text(SLOW_READ.replace("MARKER", repr(str(marker))), encoding="utf-8")
    write_recipe(tmp_path / "r.yaml", {"name": "x"})
    running = subprocess.Popen(
        [sys.executable, str(driver), "validate", str(tmp_path / "r.yaml")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    deadline = time.monotonic() + 60
    while not marker.exists() and running.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert marker.exists(), running.communicate()
    running.send_signal(signal.SIGINT)
    out, err = running.communicate(timeout=60)
    assert running.returncode == 130, err
    assert err.strip() == "interrupted; nothing was written"
    assert out == ""


def test_a_named_pipe_given_as_the_recipe_is_refused_without_waiting(tmp_path):
    pipe = tmp_path / "recipe.yaml"
    os.mkfifo(pipe)
    code, out, err = gen("validate", pipe)
    assert code == 2 and out == ""
    assert err.strip() == f"error: {pipe}: this is a named pipe, not a file (expected a YAML recipe file (UTF-8 text))"


# --- 14. gen plan shows significant digits ---------------------------------------------------------------


@pytest.mark.parametrize(
    "amount, shown",
    [
        (0.0, "0.00"),
        (0.00042, "0.00042"),
        (0.000123456, "0.00012"),
        (0.0123, "0.012"),
        (0.05, "0.050"),
        (0.5, "0.50"),
        (0.999, "1.00"),
        (1.0, "1.00"),
        (12.345, "12.35"),
        (1234.5, "1,234.50"),
        (1234567.891, "1,234,567.89"),
    ],
)
def test_costs_show_cents_and_two_significant_digits_below_a_dollar(amount, shown):
    assert dollars(amount) == shown


def test_plan_shows_a_small_cost_instead_of_zero(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("GEN_CACHE_DIR", str(tmp_path / "cache"))
    write_json(
        tmp_path / "convs.json",
        [
            locomo_sample("c1", ("Ann", "Bob"), [("1:56 pm on 8 May, 2023", ["I went hiking in the hills today"] * 6)]),
            locomo_sample("c2", ("Cat", "Dan"), [("9:00 am on 9 May, 2023", ["We baked bread with my sister"] * 6)]),
        ],
    )
    price = {"input_per_million": 0.01, "output_per_million": 0.02}
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "cost",
            "sources": [{"format": "locomo", "path": "convs.json"}],
            "llm": {"main": {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None, "price": price}},
            "products": [{"type": "time_content_questions", "per_conversation": 1, "min_anchor_words": 3}],
        },
    )
    code, out, err = run_cli(["plan", recipe], capsys)
    assert code == 0, err
    row = next(line.split() for line in out.splitlines() if line.startswith("time_content_questions"))
    input_tokens, output_tokens, cost = int(row[5].replace(",", "")), int(row[6].replace(",", "")), row[7]
    expected = (input_tokens * 0.01 + output_tokens * 0.02) / 1_000_000  # a few thousand tokens: about $0.00004
    assert expected < 0.001 and cost != "0.00"
    assert re.fullmatch(r"0\.0+[1-9]\d", cost), cost  # two significant digits
    assert float(cost) == pytest.approx(expected, rel=0.06)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["validate", ""], "argument 2"),
        (["eval", "d", "--predictions", ""], "--predictions"),
        (["eval", "d", "--predictions="], "--predictions"),
        (["run", "r.yaml", "--output-dir", ""], "--output-dir"),
    ],
)
def test_an_empty_argument_is_refused_naming_it(tmp_path, monkeypatch, capsys, args, named):
    """To pathlib "" is ".": an empty value would make a command act on the current folder, never named."""
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(args, capsys)
    assert (code, err.strip()) == (2, f"error: {named}: '' is empty (expected a value)")
    assert not any(tmp_path.iterdir())


def test_an_empty_path_in_a_recipe_is_refused_naming_the_field(tmp_path, capsys):
    recipe = write_recipe(tmp_path / "r.yaml", {"name": "x", "sources": [{"format": "msc", "path": ""}]})
    code, _, err = run_cli(["validate", recipe], capsys)
    assert code == 2 and err.strip() == f'error: {recipe}: sources[0].path: an empty path, got ""'


# --- -h is --help, for gen, a command and a command group -------------------------------------------------------

HELP_PLACES = {"gen": [], "export": ["export"], "cache": ["cache"], "cache repair": ["cache", "repair"]}


def test_dash_h_prints_the_same_help_as_dash_dash_help():
    results = gen_all(
        {f"{name} {flag}": [*words, flag] for name, words in HELP_PLACES.items() for flag in ("-h", "--help")}
    )
    for name, words in HELP_PLACES.items():
        short, long = results[f"{name} -h"], results[f"{name} --help"]
        assert short[0] == long[0] == 0, short[2]
        assert short[1] == long[1] and long[1].startswith(f"Usage: {' '.join(['gen', *words])} ")
