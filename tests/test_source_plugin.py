"""A source format from another package, through the `gen.sources` seam: tests/source_plugin_example (the format
docs/adding-a-source.md builds) is installed as a real wheel into a folder of its own, and gen, run in a
subprocess with that folder on PYTHONPATH, reads a recipe that names it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, gen_subprocess, read_jsonl, write_recipe

PLUGIN = REPO / "tests" / "source_plugin_example"
PIP_INSTALL = (sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index")
DIARY = """# walks
2024-05-01 08:00 | Ann | Shall we walk by the river?
2024-05-01 08:02 | Bob | Yes, at nine.
2024-05-03 19:00 | Ann | Same walk tomorrow?
2024-05-03 19:05 | Bob | Only if it is dry.
"""


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    done = subprocess.run([*PIP_INSTALL, "--target", str(folder), str(PLUGIN)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return folder


def recipe(tmp_path: Path, **source) -> Path:
    diary = tmp_path / "walks.txt"
    diary.write_text(DIARY, encoding="utf-8")
    return write_recipe(
        tmp_path / "diary.yaml",
        {
            "name": "diary",
            "sources": [{"format": "diary", "path": str(diary), **source}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [{"type": "log"}, {"type": "conversations"}],
        },
    )


def test_a_recipe_reads_the_plugins_format_with_its_times(site, tmp_path):
    done = gen_subprocess(
        "run", recipe(tmp_path), "--output-dir", tmp_path / "out", env={"PYTHONPATH": f"{site}:{REPO}"}
    )
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "out" / "diary"
    log = read_jsonl(folder / "log" / "test.jsonl")
    assert [(r["session_index"], r["speaker"], r["timestamp"]) for r in log] == [
        (1, "Ann", "2024-05-01T08:00:00"),
        (1, "Bob", "2024-05-01T08:02:00"),
        (2, "Ann", "2024-05-03T19:00:00"),
        (2, "Bob", "2024-05-03T19:05:00"),
    ]
    report = json.loads((folder / "run.json").read_text())
    assert report["sources"][0]["format"] == "diary" and report["validation"]["log"]["passed"]


def test_the_plugins_options_are_checked_by_its_model(site, tmp_path):
    path = recipe(tmp_path, options={"break_minutes": -1})
    done = gen_subprocess("validate", path, env={"PYTHONPATH": f"{site}:{REPO}"})
    assert done.returncode == 2 and "sources[0].options.break_minutes" in done.stderr, done.stderr


def test_without_the_plugin_the_format_is_unknown(tmp_path):
    done = gen_subprocess("validate", recipe(tmp_path))
    assert done.returncode == 2 and "unknown source format 'diary'" in done.stderr, done.stderr
