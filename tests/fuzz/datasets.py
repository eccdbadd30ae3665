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


WRITTEN_SAMPLE = "sample-2"  # three real sessions: three gold answers, one call each


def written_recipe(base_url: str, source: str = str(REPO / "gen" / "data" / "sample_locomo.json")) -> dict:
    """The log, time_queries of the session test and gold_answers over one conversation of the bundled sample,
    against the fake server at `base_url`: a dataset whose gold answers a model wrote."""
    return {
        "name": "written",
        "seed": 13,
        "sources": [{"format": "locomo", "path": source, "ids": [WRITTEN_SAMPLE]}],
        "timeline": {"padding": {"mode": "none"}},
        "llm": {"main": judge_endpoint(base_url)},
        "products": [{"type": "log"}, {"type": "time_queries", "tests": ["session"]}, {"type": "gold_answers"}],
    }


def judge_endpoint(base_url: str) -> dict:
    """An endpoint of the fake server with short timeouts and waits, so a misbehaving server ends a call in
    seconds."""
    return {
        "model": "fake-model",
        "base_url": base_url,
        "api_key_env": "GEN_FUZZ_KEY",
        "structured_output": "json_object",
        "timeout_s": 3,
        "max_wait_s": 4,
        "max_retries": 2,
    }


@functools.cache
def written_dataset_files() -> dict[str, bytes]:
    """`written/`: a run with gold_answers, its answers written by the fake server's good replies (what `gen eval
    --answers` with a judge reads)."""
    import yaml

    from tests.fuzz.server import ReplySpec, serving

    with tempfile.TemporaryDirectory(prefix="gen-fuzz-written-") as tmp, serving((ReplySpec(good=True),)) as url:
        work = Path(tmp)
        (work / "recipe.yaml").write_text(yaml.safe_dump(written_recipe(url)), encoding="utf-8")
        os.environ.setdefault("GEN_FUZZ_KEY", "sk-fuzz-SECRET-5f3a9c")
        gen("run", "recipe.yaml", "--output-dir", "built", cwd=work)
        (work / "built" / "written").rename(work / "written")
        return {
            path.relative_to(work).as_posix(): path.read_bytes()
            for path in sorted((work / "written").rglob("*"))
            if path.is_file()
        }


def written_answers() -> list[dict]:
    """One answer per time query of `written/`, each a claim of its gold answer or a wrong one in turn."""
    lines = written_dataset_files()["written/time_queries/test.jsonl"].decode().splitlines()
    ids = [json.loads(line)["question_id"] for line in lines if line.strip()]
    return [
        {"question_id": question, "answer": "they talked about their week" if index % 2 else "nothing at all"}
        for index, question in enumerate(ids)
    ]
