"""The run every viewer test opens: the quickstart, made as the README has it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO, gen_subprocess


@pytest.fixture(scope="package")
def run_folder(tmp_path_factory) -> Path:
    """`gen run recipes/quickstart.yaml --output-dir TMP` (the viewer only reads it)."""
    out = tmp_path_factory.mktemp("runs")
    done = gen_subprocess("run", REPO / "recipes" / "quickstart.yaml", "--output-dir", out)
    assert done.returncode == 0, done.stderr
    return out / "quickstart"


from tests.view.product_runs import persona_folder, quality_folder, teabag_folders  # noqa: F401
