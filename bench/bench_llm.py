"""Throughput of the LLM engine against a fake OpenAI-compatible server that answers in a fixed time.

    .venv/bin/python bench/bench_llm.py [--requests 1000] [--concurrency 32] [--latency 0.05] [--trials 3]

The server runs in a subprocess (``tests/fakes/openai_server.py --fast``: every reply leaves exactly
``latency`` after its request arrived), so the CPU time measured here is the engine's own: openai client,
HTTP, flow control, cache writes, parsing — divided by the number of calls.

Ideal time = requests x latency / concurrency; target achieved/ideal >= 0.85. Each trial sends new prompts
(no cache hits). Timing on a shared machine is noisy, so every trial is printed along with the median and
the best. For reference, the same load is also sent through a bare ``AsyncOpenAI`` client (no engine) on
the same event loop: the gap between the two is what the engine itself costs. A last pass re-runs one
trial's tasks: fully cached, it must make zero requests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pydantic import BaseModel

from gen.llm import Engine, RunSettings, Task


class Answer(BaseModel):
    answer: str


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def bare_client_run(base_url: str, requests: int, concurrency: int, tag: str) -> None:
    """The same load through a bare AsyncOpenAI client: the floor the engine is compared with."""
    import httpx2 as http
    from openai import AsyncOpenAI, DefaultAioHttpClient  # (openai's own transport, not gen's)

    limits = http.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with AsyncOpenAI(
        api_key="sk-bench", base_url=base_url, max_retries=0, http_client=DefaultAioHttpClient(limits=limits)
    ) as client:
        pending = list(range(requests))

        async def worker() -> None:
            while pending:
                i = pending.pop()
                body = {"model": "fake-model", "messages": [{"role": "user", "content": f"{tag} {i}"}]}
                response = await client.post("/chat/completions", body=body, cast_to=http.Response)
                json.loads(response.content)

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--latency", type=float, default=0.05)
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    ideal = args.requests * args.latency / args.concurrency

    server = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "fakes" / "openai_server.py"),
            "--fast",
            "--delay",
            str(args.latency),
            "--content",
            json.dumps({"answer": "forty-two"}),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    trials, bare = [], []
    try:
        base_url = server.stdout.readline().strip()
        os.environ["GEN_BENCH_KEY"] = "sk-bench-not-a-real-key"
        with tempfile.TemporaryDirectory() as folder:
            endpoints = {
                "bench": {
                    "model": "fake-model",
                    "base_url": base_url,
                    "api_key_env": "GEN_BENCH_KEY",
                    "temperature": 0.7,
                    "max_tokens": 64,
                    "max_concurrency": args.concurrency,
                }
            }
            settings = RunSettings(cache_dir=folder, progress="off")
            with Engine(endpoints, settings) as engine:
                # warm-up (imports, client, connections), not measured
                warmup = [Task(f"w{i}", "bench", f"warm-up {i}", Answer) for i in range(args.concurrency)]
                engine.run_step("warmup", warmup)
                loop = engine._loop().loop
                for trial in range(args.trials):
                    tasks = [
                        Task(f"t{trial}-{i}", "bench", f"Trial {trial}, question {i}: what is the answer?", Answer)
                        for i in range(args.requests)
                    ]
                    cpu0, t0 = cpu_seconds(), time.perf_counter()
                    outcomes = engine.run_step(f"trial-{trial}", tasks)
                    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
                    trials.append(
                        {
                            "wall_s": round(wall, 3),
                            "ratio": round(ideal / wall, 3),
                            "cpu_ms_per_call": round(cpu / args.requests * 1000, 3),
                            "ok": sum(o.ok for o in outcomes),
                        }
                    )
                    cpu0, t0 = cpu_seconds(), time.perf_counter()
                    asyncio.run_coroutine_threadsafe(
                        bare_client_run(base_url, args.requests, args.concurrency, f"bare {trial}"), loop
                    ).result()
                    wall, cpu = time.perf_counter() - t0, cpu_seconds() - cpu0
                    bare.append(
                        {
                            "wall_s": round(wall, 3),
                            "ratio": round(ideal / wall, 3),
                            "cpu_ms_per_call": round(cpu / args.requests * 1000, 3),
                        }
                    )
                engine.cache.flush()
                t1 = time.perf_counter()
                cached = engine.run_step("warm-rerun", tasks)
                warm_wall = time.perf_counter() - t1
                report = engine.report()
    finally:
        server.stdin.close()
        server.wait(10)

    ratios = [t["ratio"] for t in trials]
    figures = {
        "requests": args.requests,
        "concurrency": args.concurrency,
        "latency_s": args.latency,
        "ideal_s": round(ideal, 3),
        "trials": trials,
        "achieved_over_ideal_median": statistics.median(ratios),
        "achieved_over_ideal_best": max(ratios),
        "engine_cpu_ms_per_call_median": statistics.median(t["cpu_ms_per_call"] for t in trials),
        "bare_client": bare,
        "bare_client_ratio_median": statistics.median(b["ratio"] for b in bare),
        "bare_client_cpu_ms_per_call_median": statistics.median(b["cpu_ms_per_call"] for b in bare),
        "warm_rerun_s": round(warm_wall, 3),
        "warm_rerun_requests": report["steps"]["warm-rerun"]["requests"],
        "warm_rerun_cached": sum(o.cached for o in cached),
    }
    if args.json:
        print(json.dumps(figures))
        return 0
    print(
        f"{args.requests} requests, max_concurrency {args.concurrency}, server latency {args.latency * 1000:.0f} ms, "
        f"ideal {ideal:.3f} s"
    )
    for i, (t, b) in enumerate(zip(trials, bare)):
        print(
            f"  trial {i}: engine {t['wall_s']:.3f} s  achieved/ideal {t['ratio']:.3f}  "
            f"CPU {t['cpu_ms_per_call']:.3f} ms/call  ({t['ok']} ok)   | bare client {b['wall_s']:.3f} s  "
            f"{b['ratio']:.3f}  CPU {b['cpu_ms_per_call']:.3f} ms/call"
        )
    print(
        f"  achieved / ideal     median {figures['achieved_over_ideal_median']:.3f}, "
        f"best {figures['achieved_over_ideal_best']:.3f}"
        f"   (target >= 0.85; bare openai client: median {figures['bare_client_ratio_median']:.3f})"
    )
    print(
        f"  engine CPU per call  {figures['engine_cpu_ms_per_call_median']:.3f} ms"
        f"   (bare openai client: {figures['bare_client_cpu_ms_per_call_median']:.3f} ms)"
    )
    print(
        f"  warm re-run          {warm_wall:.3f} s, {figures['warm_rerun_requests']} requests, "
        f"{figures['warm_rerun_cached']}/{len(cached)} cached"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
