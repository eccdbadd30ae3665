"""Throughput of the LLM engine against a fake OpenAI-compatible server that answers in a fixed time.

    .venv/bin/python bench/bench_llm.py [--requests 1000] [--concurrency 32] [--latency 0.05]

The server runs in a subprocess, so the CPU time measured here is the engine's own (openai client, HTTP,
flow control, cache writes, parsing) divided by the number of calls. Ideal time = requests x latency /
concurrency; the target is achieved/ideal >= 0.85. A second pass over the same tasks measures a fully
cached run (zero requests).
"""

from __future__ import annotations

import argparse
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

from pydantic import BaseModel  # noqa: E402

from gen.llm import Engine, RunSettings, Task  # noqa: E402


class Answer(BaseModel):
    answer: str


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)

    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "fakes" / "openai_server.py"), "--delay", str(args.latency),
         "--content", json.dumps({"answer": "forty-two"})],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        base_url = server.stdout.readline().strip()
        os.environ["GEN_BENCH_KEY"] = "sk-bench-not-a-real-key"
        with tempfile.TemporaryDirectory() as folder:
            endpoints = {"bench": {"model": "fake-model", "base_url": base_url, "api_key_env": "GEN_BENCH_KEY",
                                   "temperature": 0.7, "max_tokens": 64, "max_concurrency": args.concurrency}}
            settings = RunSettings(cache_dir=folder, progress="off")
            tasks = [Task(f"item-{i}", "bench", f"Question number {i}: what is the answer?", Answer)
                     for i in range(args.requests)]
            with Engine(endpoints, settings) as engine:
                # warm-up: imports, client, one connection (not measured)
                engine.run_step("warmup", [Task("w", "bench", "warm-up", Answer)])
                cpu0, t0 = cpu_seconds(), time.perf_counter()
                outcomes = engine.run_step("bench", tasks)
                wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
                engine.cache.flush()
                t1 = time.perf_counter()
                cached = engine.run_step("bench-warm", tasks)
                warm_wall = time.perf_counter() - t1
                report = engine.report()
        ok = sum(o.ok for o in outcomes)
        ideal = args.requests * args.latency / args.concurrency
        figures = {
            "requests": args.requests,
            "concurrency": args.concurrency,
            "latency_s": args.latency,
            "ok": ok,
            "wall_s": round(wall, 3),
            "ideal_s": round(ideal, 3),
            "achieved_over_ideal": round(ideal / wall, 3),
            "engine_cpu_ms_per_call": round(cpu / args.requests * 1000, 3),
            "warm_rerun_s": round(warm_wall, 3),
            "warm_rerun_requests": report["steps"]["bench-warm"]["requests"],
            "warm_rerun_cached": sum(o.cached for o in cached),
        }
    finally:
        server.stdin.close()
        server.wait(10)
    if args.json:
        print(json.dumps(figures))
    else:
        print(f"{args.requests} requests, max_concurrency {args.concurrency}, server latency {args.latency * 1000:.0f} ms")
        print(f"  ok replies           {ok}/{args.requests}")
        print(f"  wall time            {wall:.3f} s   (ideal {ideal:.3f} s)")
        print(f"  achieved / ideal     {ideal / wall:.3f}   (target >= 0.85)")
        print(f"  engine CPU per call  {cpu / args.requests * 1000:.3f} ms")
        print(f"  warm re-run          {warm_wall:.3f} s, {figures['warm_rerun_requests']} requests, "
              f"{figures['warm_rerun_cached']} cached")
    return 0


if __name__ == "__main__":
    sys.exit(main())
