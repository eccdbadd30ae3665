"""The LLM stage's batches of conversations: sized from the items per conversation seen so far, so each engine
step holds several times what may be in flight; and whatever the batches, the same records."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from gen.errors import Stopped
from gen.llm.config import RunSettings
from gen.llm.engine import Engine
from gen.pipeline import executors
from gen.pipeline.executors import llm_batch_size
from gen.pipeline.options import RunOptions
from gen.pipeline.runner import run
from gen.pipeline.shards import prepare, process_batch
from gen.products.registry import load
from gen.products.time_content.time_content_questions import TimeContentQuestions
from tests.conftest import REPO, write_recipe
from tests.fakes.openai_server import FakeOpenAI, tcq_question

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"


def test_the_next_batch_holds_about_eight_rounds_of_the_concurrency():
    # 64 conversations gave 640 items (10 each); at 256 in flight, 8 rounds are 2,048 items: 205 conversations
    assert llm_batch_size(640, 64, 256) == 205
    assert llm_batch_size(640, 64, 2048) == executors.LLM_BATCH_MAX  # 1,639 wanted, capped: memory
    assert llm_batch_size(640, 64, 64) == executors.LLM_BATCH  # 52 wanted, but never fewer than the first
    assert llm_batch_size(0, 64, 256) == executors.LLM_BATCH_MAX  # no item: conversations are cheap


def copies_recipe(
    tmp_path, base_url: str, name: str, copies: int = 12, per_conversation: int = 2, garbage: bool = False
):
    """log + time_content_questions over `copies` copies of the sample (2 conversations each), 2 requests at a
    time; `garbage`: only the questions, no padding, one request at a time, replies asked as JSON objects."""
    samples = json.loads(SAMPLE.read_text())
    corpus = tmp_path / "copies.json"
    corpus.write_text(json.dumps([{**s, "sample_id": f"{s['sample_id']}-{k}"} for k in range(copies) for s in samples]))
    endpoint = {"model": "fake-model", "base_url": base_url, "api_key_env": None}
    questions = {"type": "time_content_questions", "per_conversation": per_conversation}
    data = {"name": name, "seed": 5, "sources": [{"format": "locomo", "path": str(corpus)}]}
    if garbage:
        data["timeline"] = {"padding": {"mode": "none"}}
        data["llm"] = {"main": {**endpoint, "structured_output": "json_object", "max_concurrency": 1}}
        data["products"] = [questions]
    else:
        data["llm"] = {"main": {**endpoint, "structured_output": "json_schema", "max_concurrency": 2}}
        data["products"] = [{"type": "log"}, questions]
    return load(write_recipe(tmp_path / f"{name}.yaml", data))[0]


def test_batches_follow_the_items_and_change_no_record(tmp_path, monkeypatch):
    batches: list[tuple[int, int]] = []  # (first conversation, conversations) of each LLM batch
    process_batch = executors.process_batch

    def recording(prepared, positions, products, engine):
        batches.append((positions[0], len(positions)))  # (two batches start together, in either order)
        return process_batch(prepared, positions, products, engine)

    monkeypatch.setattr(executors, "process_batch", recording)
    written = {}
    with FakeOpenAI(tcq_question) as server:
        for name, first, most in (("one-batch", 64, 256), ("small-batches", 5, 7), ("sized-batches", 5, 20)):
            monkeypatch.setattr(executors, "LLM_BATCH", first)
            monkeypatch.setattr(executors, "LLM_BATCH_MAX", most)
            recipe = copies_recipe(tmp_path, server.base_url, name)
            folder = run(
                recipe,
                RunOptions(output_dir=tmp_path / "out", llm=RunSettings(cache_dir=tmp_path / name, progress="off")),
            )
            written[name] = {
                config: (folder / config / "test.jsonl").read_bytes() for config in ("log", "time_content_questions")
            }
    # 24 conversations, 2 items each, 2 in flight. Two batches start at once, both of the first size (5); once
    # the first has finished (5 conversations, 10 items) the next wants 8 x 2 x 5 / 10 = 8 conversations, capped
    # at 7, and so does the one after (10 conversations, 20 items): 5, 5, 7, then the last 7.
    # With at most 20, the size comes from the items alone: 8 conversations after the first batch (5 asked 10),
    # and 8 again after the second (10 asked 20), then the last 6
    assert sorted(batches) == [(0, 5), (0, 5), (0, 24), (5, 5), (5, 5), (10, 7), (10, 8), (17, 7), (18, 6)]
    assert written["one-batch"] == written["small-batches"] == written["sized-batches"]
    assert written["one-batch"]["time_content_questions"].count(b"\n") == 48


def test_batches_one_at_a_time_follow_the_items_too(tmp_path, monkeypatch):
    """Products that count over the whole run take their batches one after another, sized the same way."""
    batches: list[tuple[int, int]] = []
    process_batch = executors.process_batch

    def recording(prepared, positions, products, engine):
        batches.append((positions[0], len(positions)))
        return process_batch(prepared, positions, products, engine)

    monkeypatch.setattr(executors, "process_batch", recording)
    monkeypatch.setattr(TimeContentQuestions, "concurrent_batches", False)
    monkeypatch.setattr(executors, "LLM_BATCH", 5)
    monkeypatch.setattr(executors, "LLM_BATCH_MAX", 20)
    with FakeOpenAI(tcq_question) as server:
        recipe = copies_recipe(tmp_path, server.base_url, "one-at-a-time")
        run(
            recipe,
            RunOptions(output_dir=tmp_path / "out", llm=RunSettings(cache_dir=tmp_path / "cache", progress="off")),
        )
    # 5 conversations asked 10 items: 8 x 2 x 5 / 10 = 8 conversations next, and 8 again, then the last 3
    assert batches == [(0, 5), (5, 8), (13, 8), (21, 3)]


def test_a_batch_writes_each_conversation_then_the_llm_products(tmp_path):
    """In one stage, a batch gives each conversation's products that need no LLM as soon as they are built (so a
    batch never holds every product's records), then the LLM products' records of the whole batch."""
    with FakeOpenAI(tcq_question) as server:
        recipe = copies_recipe(tmp_path, server.base_url, "batch")
        prepared = prepare(recipe)
        with Engine(recipe.llm, RunSettings(cache_dir=tmp_path / "cache", progress="off")) as engine:
            results = list(process_batch(prepared, range(3), prepared.products, engine))
    assert [sorted(result.lines) for result in results] == [["conversations", "log"]] * 3 + [["time_content_questions"]]
    for position, result in enumerate(results[:3]):
        conversation_id = prepared.conversations[position].conversation_id
        rows = [json.loads(line) for line in result.lines["log"].splitlines()]
        assert rows and {row["conversation_id"] for row in rows} == {conversation_id}
        [row] = [json.loads(line) for line in result.lines["conversations"].splitlines()]
        assert row["conversation_id"] == conversation_id and row["num_responses"] == len(rows)
    questions = [json.loads(line) for line in results[3].lines["time_content_questions"].splitlines()]
    assert [q["conversation_id"] for q in questions] == [
        prepared.conversations[position].conversation_id for position in range(3) for _ in range(2)
    ]


def garbage_recipe(tmp_path, base_url: str, name: str):
    """time_content_questions over 6 conversations, 5 questions each, one request at a time."""
    return copies_recipe(tmp_path, base_url, name, copies=3, per_conversation=5, garbage=True)


def cached_keys(cache_dir) -> set[str]:
    with contextlib.closing(sqlite3.connect(cache_dir / "llm.sqlite")) as conn:
        return {key for (key,) in conn.execute("SELECT key FROM replies")}


def test_a_reject_limit_stop_with_two_batches_in_flight_leaves_the_rejects_of_one_batch_at_a_time(
    tmp_path, monkeypatch
):
    # every reply is unparsable: each item fails after its correction round. One conversation per batch, one
    # request at a time: batch 0's 5 items allow floor(0.2 x 5) = 1 reject, so the run stops at its second
    # reject, its items in order. With two batches in flight, batch 1 runs beside batch 0 (its calls are
    # cached), but the stop is batch 0's and only its rejects are kept, as when batch 1 never started.
    monkeypatch.setattr(executors, "LLM_BATCH", 1)
    monkeypatch.setattr(executors, "LLM_BATCH_MAX", 1)
    kept, caches = {}, {}
    with FakeOpenAI(lambda request: "not JSON at all", delay=0.05) as server:  # (batch 1 plans meanwhile)
        for name, at_once in (("sequential", False), ("overlapped", True)):
            monkeypatch.setattr(TimeContentQuestions, "concurrent_batches", at_once)
            recipe = garbage_recipe(tmp_path, server.base_url, name)
            settings = RunSettings(cache_dir=tmp_path / name, progress="off")
            with pytest.raises(Stopped, match="more than max_reject_rate 20% allows"):
                run(recipe, RunOptions(output_dir=tmp_path / "out", llm=settings))
            stopped = tmp_path / "out" / f".{name}.stopped"
            kept[name] = (stopped / "rejects.jsonl").read_bytes(), json.loads((stopped / "run.json").read_text())
            caches[name] = cached_keys(tmp_path / name)
    rejects = [json.loads(line) for line in kept["sequential"][0].splitlines()]
    assert len(rejects) == 2 and {r["kind"] for r in rejects} == {"parse"}
    first = f"locomo/{json.loads(SAMPLE.read_text())[0]['sample_id']}-0"  # the first batch's conversation
    assert [r["item_id"] for r in rejects] == [f"{first}/tcq-001", f"{first}/tcq-002"]  # in order: one at a time
    assert kept["overlapped"][0] == kept["sequential"][0]
    assert kept["overlapped"][1]["stopped"] == kept["sequential"][1]["stopped"]
    assert caches["overlapped"] > caches["sequential"]  # batch 1 did run beside: its calls stay cached


def test_ctrl_c_with_two_batches_in_flight_stops_both_and_keeps_the_run(tmp_path):
    samples = json.loads(SAMPLE.read_text())
    corpus = tmp_path / "copies.json"  # 80 conversations: two batches of 64 and 16
    corpus.write_text(json.dumps([{**s, "sample_id": f"{s['sample_id']}-{k}"} for k in range(40) for s in samples]))
    with FakeOpenAI(tcq_question, delay=1.0) as server:  # slow replies: calls are in flight at the interrupt
        recipe = write_recipe(
            tmp_path / "r.yaml",
            {
                "name": "big",
                "sources": [{"format": "locomo", "path": str(corpus)}],
                "timeline": {"padding": {"mode": "none"}},
                "llm": {
                    "main": {
                        "model": "fake-model",
                        "base_url": server.base_url,
                        "api_key_env": None,
                        "structured_output": "json_object",  # no probe: every request is an item's
                    }
                },
                "products": [{"type": "time_content_questions", "per_conversation": 1}],
            },
        )
        out = tmp_path / "out"
        running = subprocess.Popen(
            [sys.executable, "-m", "gen", "run", str(recipe), "--output-dir", str(out), "--cache-dir", str(tmp_path)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches it
        )
        deadline = time.monotonic() + 120
        while server.count < 8 and time.monotonic() < deadline and running.poll() is None:
            time.sleep(0.01)
        os.killpg(running.pid, signal.SIGINT)
        stderr = running.communicate(timeout=60)[1]  # (a batch thread left running would hold the exit)
    assert running.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr and "LaneCancelled" not in stderr
    kept = out / ".big.stopped"
    report = json.loads((kept / "run.json").read_text())
    assert report["stopped"] == {"reason": "interrupted (Ctrl-C)", "exit_code": 130}
    assert (kept / "rejects.jsonl").read_bytes() == b""  # every reply was a good question: nothing rejected
    assert not (out / "big").exists()
