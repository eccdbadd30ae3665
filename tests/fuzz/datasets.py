"""A small finished dataset and its harness exports, made once per process by gen itself, for the surfaces that
read one (predictions for `gen eval`, results for `gen import-predictions`, command-line values). Held as bytes
so each case lays out its own copy."""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.fuzz.runner import REPO

FORMATS = ("locomo", "longmemeval", "beir")


def gen(*args: str, cwd: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "GEN_CACHE_DIR": str(cwd / "cache")}
    subprocess.run(
        [sys.executable, "-m", "gen", "-q", *args], cwd=cwd, env=env, check=True, capture_output=True, timeout=300
    )


@functools.cache
def dataset_files() -> dict[str, bytes]:
    """`ds/` (the quickstart run over one conversation) and `exp-<format>/` (its exports), path → bytes."""
    with tempfile.TemporaryDirectory(prefix="gen-fuzz-dataset-") as tmp:
        work = Path(tmp)
        gen("run", str(REPO / "recipes" / "quickstart.yaml"), "--limit", "1", "--output-dir", "built", cwd=work)
        (work / "built" / "quickstart").rename(work / "ds")
        for name in FORMATS:
            gen("export", "ds", "--format", name, "--output", f"exp-{name}", cwd=work)
        return {
            path.relative_to(work).as_posix(): path.read_bytes()
            for folder in ("ds", *(f"exp-{name}" for name in FORMATS))
            for path in sorted((work / folder).rglob("*"))
            if path.is_file()
        }


def question_ids(config: str = "time_queries") -> list[str]:
    lines = dataset_files()[f"ds/{config}/test.jsonl"].decode().splitlines()
    return [json.loads(line)["question_id"] for line in lines if line.strip()]


def valid_predictions() -> list[dict]:
    """One prediction line per question of the dataset, as `gen eval --predictions` reads them."""
    return [
        {"question_id": question, "retrieved": [index, index + 1]}
        for config in ("time_queries", "ambiguous_time_queries")
        for index, question in enumerate(question_ids(config))
    ]


def valid_results(format_name: str) -> object:
    """A result file a harness could have written on the export, as parsed JSON (beir: a run dict)."""
    questions = question_ids()
    if format_name == "beir":
        return {question: {"0": 1.0, "3": 0.5} for question in questions}
    if format_name == "longmemeval":
        return [
            {"question_id": question, "retrieval_results": {"ranked_items": [{"corpus_id": "locomo-sample-1_s1"}]}}
            for question in questions
        ]
    samples = json.loads(dataset_files()["exp-locomo/time_queries.json"])
    for sample in samples:
        sample["conversation"] = {}  # the results only need the qa entries; keeps the case small
        for qa in sample["qa"]:
            qa["mine_context"] = ["D1:1", "D1:2"]
    return samples


@functools.cache
def own_dataset_files() -> dict[str, bytes]:
    """`own/`: a run of tests/fuzz/bases.py's chat_logs base with an observed clock (log, conversations,
    temporal_reasoning), made from people's own logs: what `gen eval --answers` and `gen push` read."""
    from tests.fuzz.bases import PERSONAL_BASES

    base = PERSONAL_BASES["chat_clock"]
    with tempfile.TemporaryDirectory(prefix="gen-fuzz-own-") as tmp:
        work = Path(tmp)
        for relative, content in base.files().items():
            (work / relative).parent.mkdir(parents=True, exist_ok=True)
            (work / relative).write_bytes(content)
        gen("run", "recipe.yaml", "--output-dir", "built", cwd=work)
        (work / "built" / base.recipe["name"]).rename(work / "own")
        return {
            path.relative_to(work).as_posix(): path.read_bytes()
            for path in sorted((work / "own").rglob("*"))
            if path.is_file()
        }


def valid_answers() -> list[dict]:
    """One written answer per temporal_reasoning question of `own/` (every other one the gold answer)."""
    lines = own_dataset_files()["own/temporal_reasoning/test.jsonl"].decode().splitlines()
    records = [json.loads(line) for line in lines if line.strip()]
    return [
        {"question_id": record["question_id"], "answer": record["answer"] if index % 2 else "1 May 2023"}
        for index, record in enumerate(records)
    ]
