"""Streamed runs: records reach the temporary run folder conversation by conversation, and a run killed in
the middle of streaming leaves the previous complete folder in place; the next run writes a complete one."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import REPO, write_json, write_recipe

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"


def many_conversations(path: Path, copies: int) -> Path:
    samples = json.loads(SAMPLE.read_text())
    return write_json(path, [{**s, "sample_id": f"{s['sample_id']}-{k}"} for k in range(copies) for s in samples])


def gen_run(recipe: Path, out: Path) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "gen", "run", str(recipe), "--output-dir", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )


def folder_bytes(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*.jsonl"))}


def test_a_run_killed_mid_stream_keeps_the_old_folder_and_the_next_run_completes(tmp_path):
    corpus = many_conversations(tmp_path / "corpus.json", copies=40)
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "stream",
            "seed": 2,
            "sources": [{"format": "locomo", "path": str(corpus)}],
            "timeline": {"padding": {"mode": "donor", "target_words": 300}},
            "products": [{"type": "log"}, {"type": "time_queries"}],
        },
    )
    out = tmp_path / "out"
    first = gen_run(recipe, out)
    assert first.wait(timeout=300) == 0, first.stderr.read()
    complete = folder_bytes(out / "stream")
    conversations = len(complete["conversations/test.jsonl"].splitlines())
    assert conversations == 80

    killed = gen_run(recipe, out)
    partial = out / f".stream.tmp-{killed.pid}" / "time_queries" / "test.jsonl"
    deadline = time.monotonic() + 120
    while not (partial.exists() and partial.stat().st_size > 0) and time.monotonic() < deadline:
        time.sleep(0.005)
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait(timeout=30)
    assert partial.exists(), "the run should have been streaming records when it was killed"
    streamed = partial.read_bytes().count(b"\n")
    assert 0 < streamed < complete["time_queries/test.jsonl"].count(b"\n")  # killed part-way through
    assert folder_bytes(out / "stream") == complete  # the previous run's folder is untouched

    again = gen_run(recipe, out)
    assert again.wait(timeout=300) == 0, again.stderr.read()
    assert folder_bytes(out / "stream") == complete
    assert json.loads((out / "stream" / "run.json").read_text())["validation"]["time_queries"]["passed"]
