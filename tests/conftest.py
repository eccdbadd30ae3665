"""Shared test helpers: write small fixture files, call the CLI in-process, find the real corpora."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.fakes.hub import hub, no_network  # noqa: F401 - fixtures for the tests that publish or download

REPO = Path(__file__).resolve().parent.parent


def shared_data() -> Path | None:
    value = os.environ.get("GEN_SHARED_DATA")
    return Path(value) if value and Path(value).is_dir() else None


def require_shared(relative: str) -> Path:
    """The path of a real corpus file under GEN_SHARED_DATA, or skip the test saying why."""
    base = shared_data()
    if base is None:
        pytest.skip("GEN_SHARED_DATA is not set to the shared data folder (.ci/run sets it to ../shared/data)")
    path = base / relative
    if not path.exists():
        pytest.skip(f"{path} is absent")
    return path


def extra_marks(extra: str, *modules: str) -> list[pytest.MarkDecorator]:
    """The marks of a test that needs an optional extra (`pip install -e '.[EXTRA]'`, or a package the extra's
    notes name): it skips with the reason where a module is missing, and carries the `extras` marker so .ci/run
    can run exactly this group again once it has installed every extra."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    reason = f"needs {', '.join(missing)}, not installed here (.ci/run installs the {extra} extra and its packages)"
    return [pytest.mark.extras, pytest.mark.skipif(bool(missing), reason=reason)]


def requires_extra(extra: str, *modules: str):
    """extra_marks as one decorator."""
    marks = extra_marks(extra, *modules)

    def mark(test):
        for each in marks:
            test = each(test)
        return test

    return mark


def write_json(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def write_recipe(path: Path, recipe: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(recipe, sort_keys=False), encoding="utf-8")
    return path


def tcq_recipe(path: Path, base_url: str) -> Path:
    """A recipe of the log and two time+content questions per conversation of the bundled sample, asked of the
    fake server at `base_url` (key in GEN_TEST_KEY, JSON mode): with a server that never answers JSON, a run
    stopped by its reject limit."""
    sample = REPO / "gen" / "data" / "sample_locomo.json"
    llm = {
        "model": "fake-model",
        "base_url": base_url,
        "api_key_env": "GEN_TEST_KEY",
        "structured_output": "json_object",
    }
    return write_recipe(
        path,
        {
            "name": "tcq",
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(sample)}],
            "timeline": {"padding": {"mode": "donor", "target_words": 800}},
            "llm": {"main": llm},
            "products": [{"type": "log"}, {"type": "time_content_questions", "per_conversation": 2}],
        },
    )


def gen_subprocess(
    *args, cwd: Path | None = None, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`python -m gen ARGS` in a real process, as a user meets it (exit code, stderr, no terminal on stdin);
    `env` is added to this process's environment. The timeout guards against a hung run and measures nothing."""
    return subprocess.run(
        [sys.executable, "-m", "gen", *map(str, args)],
        capture_output=True,
        text=True,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        timeout=timeout,
    )


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    """Run `gen ARGS` in this process; returns (exit code, stdout, stderr)."""
    from gen.cli import main

    argv = sys.argv
    sys.argv = ["gen", *map(str, args)]
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    finally:
        sys.argv = argv
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def locomo_sample(sample_id: str, speakers=("Ann", "Bob"), sessions=None) -> dict:
    """A LoCoMo-layout sample; `sessions` is a list of (date_time string, [texts]) with speakers alternating."""
    conversation = {"speaker_a": speakers[0], "speaker_b": speakers[1]}
    for number, (when, texts) in enumerate(sessions or [], start=1):
        conversation[f"session_{number}_date_time"] = when
        conversation[f"session_{number}"] = [
            {"speaker": speakers[i % 2], "dia_id": f"D{number}:{i + 1}", "text": text} for i, text in enumerate(texts)
        ]
    return {"sample_id": sample_id, "conversation": conversation}


@pytest.fixture(autouse=True, scope="session")
def private_cache(tmp_path_factory):
    """Runs that name no cache folder use one of this session's (LLM cache, run logs), never ~/.cache/gen."""
    previous = os.environ.get("GEN_CACHE_DIR")
    os.environ["GEN_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    yield
    if previous is None:
        os.environ.pop("GEN_CACHE_DIR", None)
    else:
        os.environ["GEN_CACHE_DIR"] = previous


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory) -> Path:
    """The quickstart recipe run into a temporary folder (once per test module that asks for it)."""
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from gen.recipe import load_recipe

    return run(load_recipe(REPO / "recipes" / "quickstart.yaml"), RunOptions(output_dir=tmp_path_factory.mktemp("out")))


@pytest.fixture(scope="module")
def exports(quickstart, tmp_path_factory) -> dict[str, Path]:
    """The quickstart run exported in each harness layout: format name → its export folder."""
    from gen.export.harness.exporter import export

    base = tmp_path_factory.mktemp("exports")
    for name in ("locomo", "longmemeval", "beir"):
        export(quickstart, name, base / name)
    return {name: base / name for name in ("locomo", "longmemeval", "beir")}
