"""Batch mode against online, for the same step of N requests on the fake server (default 10,000).

    python bench/bench_batch.py [--requests 10000] [--concurrency 64]

The fake server (tests/fakes/openai_server.py, its /v1/files and /v1/batches beside /v1/chat/completions) runs
in its own process, so its CPU is not gen's. Each mode runs in a fresh process of its own, with a fresh cache,
and reports gen's CPU seconds per request (user + system of that process: building bodies and keys, the
request file, the upload, the output file read line by line, the cache writes and the step's passes), the
wall time, and the process's peak resident memory, against a baseline process that only builds the same
tasks — so the difference is what the request and output files and the replies cost (goal: streamed,
< 200 MB whatever the batch size).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.procstat import peak_rss_mb


def one_mode(base_url: str, mode: str, requests: int, concurrency: int) -> dict:
    from gen.llm import Engine, RunSettings, Task

    prompt = "Summarize what the two speakers said about the trip to the coast, in one sentence. " * 6
    tasks = [Task(f"item-{i}", "bench", f"{i}: {prompt}", None) for i in range(requests)]
    endpoint = {
        "model": "fake-model",
        "base_url": base_url,
        "api_key_env": None,
        "max_tokens": 64,
        "max_concurrency": concurrency,
        "mode": "batch" if mode == "batch" else "online",
        "batch_poll_s": 0.2,
    }
    with tempfile.TemporaryDirectory() as folder:
        start_cpu, start = time.process_time(), time.monotonic()
        outcomes = []
        if mode != "tasks-only":
            with Engine({"bench": endpoint}, RunSettings(cache_dir=folder, progress="off")) as engine:
                outcomes = engine.run_step("bench", tasks, max_reject_rate=None)
        cpu, wall = time.process_time() - start_cpu, time.monotonic() - start
    ok = sum(outcome.ok for outcome in outcomes)
    return {"mode": mode, "ok": ok, "cpu_s": cpu, "wall_s": wall, "peak_rss_mb": peak_rss_mb()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--child", nargs=2, metavar=("BASE_URL", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(one_mode(args.child[0], args.child[1], args.requests, args.concurrency)))
        return 0

    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "fakes" / "openai_server.py"), "--content", "The trip went well."],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    results = {}
    try:
        base_url = server.stdout.readline().strip()
        for mode in ("tasks-only", "online", "batch"):
            child = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--requests",
                    str(args.requests),
                    "--concurrency",
                    str(args.concurrency),
                    "--child",
                    base_url,
                    mode,
                ],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            results[mode] = json.loads(child.stdout.strip().splitlines()[-1])
    finally:
        server.stdin.close()
        server.wait(30)
    n = args.requests
    print(f"{n:,} requests, {os.cpu_count()} cores, fake server in its own process")
    print(f"{'mode':<13} {'ok':>7} {'cpu s':>7} {'cpu ms/req':>10} {'wall s':>7} {'peak MB':>8} {'MB over tasks':>15}")
    base = results["tasks-only"]["peak_rss_mb"]
    for mode, r in results.items():
        per = 1000 * r["cpu_s"] / n
        print(
            f"{mode:<13} {r['ok']:>7,} {r['cpu_s']:>7.2f} {per:>10.3f} {r['wall_s']:>7.2f} {r['peak_rss_mb']:>8.0f} "
            f"{r['peak_rss_mb'] - base:>15.0f}"
        )
    online, batch = results["online"], results["batch"]
    print(f"batch/online gen CPU: {batch['cpu_s'] / online['cpu_s']:.2f}")
    print(f"batch memory over building the tasks: {batch['peak_rss_mb'] - base:.0f} MB (goal < 200 MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
