"""The LLM path as users meet it: `gen run` with time+content questions against a fake server that answers
every request exactly `latency` seconds after it arrived, then the same run again from a full cache.

    .venv/bin/python bench/bench_llm_run.py [--items 2000] [--concurrency 256] [--latency 0.5]

The server (tests/fakes/openai_server.py --fast --tcq) runs in its own process and writes a valid question
from two regular expressions over each prompt, so its cost per request is small and outside gen. Ideal
time = items x latency / concurrency. The step's own seconds come from run.json; the same number of requests
through a bare AsyncOpenAI loop (bench_llm.bare_client_run) is measured in the same session for reference.
Each run also shows gen's CPU seconds (user + system of the `gen run` process: steadier than wall time on a
shared machine) and `other CPU`: the cores the rest of the machine kept busy meanwhile (/proc/stat less gen's
and the fake server's own time; Linux only). Read that column before trusting a figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import yaml
from bench_llm import bare_client_run
from procstat import busy_ticks, process_ticks

SAMPLE = ROOT / "gen" / "data" / "sample_locomo.json"
STEP = "time_content_questions"


def corpus(folder: Path, copies: int) -> Path:
    """`copies` renamed copies of the sample whose turns differ by a copy number, so that no two prompts are
    the same (identical prompts would be answered once and then from the cache)."""
    samples = json.loads(SAMPLE.read_text())
    copied = []
    for k in range(copies):
        for sample in samples:
            conversation = {
                key: [{**turn, "text": f"{turn['text']} ({k})"} for turn in value] if isinstance(value, list) else value
                for key, value in sample["conversation"].items()
            }
            copied.append({**sample, "sample_id": f"{sample['sample_id']}-{k}", "conversation": conversation})
    path = folder / "corpus.json"
    path.write_text(json.dumps(copied))
    return path


def recipe(folder: Path, source: Path, base_url: str, per_conversation: int, concurrency: int) -> Path:
    path = folder / "recipe.yaml"
    data = {
        "name": "llm-run",
        "seed": 1,
        "sources": [{"format": "locomo", "path": str(source)}],
        "timeline": {"padding": {"mode": "none"}},
        "llm": {
            "main": {
                "model": "fake-model",
                "base_url": base_url,
                "api_key_env": "GEN_BENCH_KEY",
                "structured_output": "json_object",  # no probe: every request is an item's
                "max_concurrency": concurrency,
            }
        },
        "products": [{"type": "time_content_questions", "per_conversation": per_conversation}],
    }
    path.write_text(yaml.safe_dump(data))
    return path


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def gen_run(recipe_path: Path, out: Path, cache: Path, server_pid: int) -> tuple[float, float, float, dict]:
    """(wall s, gen's CPU s, other CPU in cores, run.json) of one `gen run`."""
    tick = os.sysconf("SC_CLK_TCK")
    busy, served, cpu = busy_ticks(), process_ticks(server_pid), children_cpu()
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gen", "run", str(recipe_path), "--output-dir", str(out), "--cache-dir", str(cache)],
        capture_output=True,
        text=True,
        env={**os.environ, "GEN_BENCH_KEY": "sk-bench", "PYTHONPATH": str(ROOT)},
    )
    wall = time.perf_counter() - started
    own = children_cpu() - cpu
    other = (busy_ticks() - busy - (process_ticks(server_pid) - served)) / tick - own
    if done.returncode != 0:
        raise SystemExit(f"gen run failed:\n{done.stderr}")
    return wall, own, max(other, 0.0) / wall, json.loads((out / "llm-run" / "run.json").read_text())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=256)
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--per-conversation", type=int, default=10)
    args = parser.parse_args(argv)
    copies = -(-args.items // (2 * args.per_conversation))  # the sample has two conversations
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/fakes/openai_server.py"), "--fast", "--tcq", "--delay", str(args.latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        base_url = server.stdout.readline().strip()
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            path = recipe(folder, corpus(folder, copies), base_url, args.per_conversation, args.concurrency)
            rows = []
            for label in ("cold cache", "full cache"):
                wall, cpu, other, report = gen_run(path, folder / "out", folder / "cache", server.pid)
                step = report["llm"]["steps"][STEP]
                items = report["configs"][STEP]["records"]
                ideal = step["calls_made"] * args.latency / args.concurrency
                rows.append((label, items, step["calls_made"], step["seconds"], wall, ideal, cpu, other))
            started = time.perf_counter()
            asyncio.run(bare_client_run(base_url, rows[0][2], args.concurrency, "bench-run"))
            bare = time.perf_counter() - started
    finally:
        server.stdin.close()
        server.wait()
    print(f"{args.concurrency} concurrent requests, {args.latency * 1000:.0f} ms each")
    print(
        f"{'run':<12} {'items':>6} {'calls':>6} {'step s':>7} {'wall s':>7} {'ideal s':>8} {'step/ideal':>11}"
        f" {'gen CPU s':>10} {'other CPU':>10}"
    )
    for label, items, calls, seconds, wall, ideal, cpu, other in rows:
        ratio = f"{ideal / seconds:.2f}" if calls else "-"
        print(
            f"{label:<12} {items:>6,} {calls:>6,} {seconds:>7.2f} {wall:>7.2f} {ideal:>8.2f} {ratio:>11}"
            f" {cpu:>10.2f} {other:>10.2f}"
        )
    ideal = rows[0][2] * args.latency / args.concurrency
    print(f"bare AsyncOpenAI loop, {rows[0][2]:,} requests: {bare:.2f} s, ideal/actual {ideal / bare:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
