"""The LLM path as users meet it: `gen run` with time+content questions against a fake server that answers
every request exactly `latency` seconds after it arrived, beside a bare AsyncOpenAI loop and curator
(bespokelabs-curator) sending as many requests in the same session, at each concurrency asked.

    .venv/bin/python bench/bench_llm_run.py [--items 10000] [--points 256:0.5,1024:2]

The server (tests/fakes/openai_server.py --fast --tcq) runs in its own process and writes a valid question and answer
from regular expressions over each prompt, so its cost per request is small and outside gen. The bound is
calls x latency / concurrency: no client can finish sooner. Per point (concurrency:latency) the script prints

  gen run      bound / the seconds gen's LLM steps ran (run.json; steps of two batches in flight counted
               once), and bound / (wall of the cold run - wall of the same run from a full cache): the time
               the calls added to the whole run; then the LLM steps again with --request-processes 2
               (gen/llm/calls/senders.py: the openai client's work per request in two worker processes)
  bare loop    bound / wall of the same number of requests through one AsyncOpenAI client (bench_llm)
  curator      bound / wall of curator's LLM call over as many prompts (bench/curator_run.py, in the virtual
               environment .venv-curator; skipped, and said so, when it is absent)

with the goal for gen (issue 28: 0.92 at 256, 0.85 at 1,024) and gen's figure over each peer's. Each run
also shows its CPU seconds (gen's process and its children), `other CPU`: the cores the rest of the machine
kept busy meanwhile (/proc/stat less the measured processes' and the fake server's own time; Linux only), and
the fake server's CPU seconds (`server s`): on 2 cores, what the server and the other work take, the client
cannot have. Read those columns before trusting a figure.
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


def gen_run(recipe_path: Path, out: Path, cache: Path, *options: str) -> dict:
    """One `gen run`; its run.json."""
    command = [
        sys.executable,
        "-m",
        "gen",
        "run",
        str(recipe_path),
        "--output-dir",
        str(out),
        "--cache-dir",
        str(cache),
    ]
    done = subprocess.run(
        [*command, *options],
        capture_output=True,
        text=True,
        env={**os.environ, "GEN_BENCH_KEY": "sk-bench", "PYTHONPATH": str(ROOT)},
    )
    if done.returncode != 0:
        raise SystemExit(f"gen run failed:\n{done.stderr}")
    return json.loads((out / "llm-run" / "run.json").read_text())


GOALS = {256: 0.92, 1024: 0.85}  # issue 28, target 3: fraction of the bound at these concurrencies
CURATOR_PYTHON = ROOT / ".venv-curator" / "bin" / "python"
REQUEST_PROCESSES = ("--request-processes", "2")  # gen/llm/calls/senders.py: the openai client's work in 2 processes


def fake_server(latency: float) -> tuple[subprocess.Popen, str]:
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "tests/fakes/openai_server.py"), "--fast", "--tcq", "--delay", str(latency)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    return server, server.stdout.readline().strip()


def measured(run, server_pid: int) -> tuple[float, float, float, object, float]:
    """(wall s, CPU s of this process and its children, other CPU in cores, what `run` returned, the fake
    server's CPU s)."""
    tick = os.sysconf("SC_CLK_TCK")
    busy, served, cpu = busy_ticks(), process_ticks(server_pid), own_cpu()
    started = time.perf_counter()
    value = run()
    wall = time.perf_counter() - started
    used, server = own_cpu() - cpu, (process_ticks(server_pid) - served) / tick
    other = (busy_ticks() - busy) / tick - server - used
    return wall, used, max(other, 0.0) / wall, value, server


def own_cpu() -> float:
    mine, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return mine.ru_utime + mine.ru_stime + children.ru_utime + children.ru_stime


def curator_run(base_url: str, requests: int, concurrency: int) -> float | None:
    """Seconds of curator's run, or None when its virtual environment is absent."""
    if not CURATOR_PYTHON.exists():
        return None
    done = subprocess.run(
        [str(CURATOR_PYTHON), str(ROOT / "bench" / "curator_run.py"), base_url, str(requests), str(concurrency)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(f"curator's run failed:\n{done.stderr[-2000:]}")
    figures = json.loads(done.stdout.strip().splitlines()[-1])
    if figures["ok"] != requests:
        raise SystemExit(f"curator answered {figures['ok']} of {requests} requests")
    return figures["seconds"]


def measure_point(
    folder: Path, items: int, per_conversation: int, concurrency: int, latency: float, with_curator: bool = True
) -> list[tuple]:
    """Rows (name, seconds, bound, CPU s, other CPU, the server's CPU s, note) for one concurrency."""
    server, base_url = fake_server(latency)
    try:
        out, cache = folder / f"out-{concurrency}", folder / f"cache-{concurrency}"
        copies = -(-items // (2 * per_conversation))  # the sample has two conversations
        path = recipe(folder, corpus(folder, copies), base_url, per_conversation, concurrency)
        cold = measured(lambda: gen_run(path, out, cache), server.pid)
        full = measured(lambda: gen_run(path, out, cache), server.pid)
        report = cold[3]
        step, calls = report["llm"]["steps"][STEP], report["llm"]["steps"][STEP]["calls_made"]
        bound = calls * latency / concurrency
        note = f"{report['configs'][STEP]['records']:,} items, {calls:,} calls"
        rows = [
            ("gen run: LLM steps", step["seconds"], bound, cold[1], cold[2], cold[4], note),
            (
                "gen run: cold - cached wall",
                cold[0] - full[0],
                bound,
                cold[1] - full[1],
                cold[2],
                cold[4] - full[4],
                f"{cold[0]:.1f} - {full[0]:.1f} s",
            ),
        ]
        spread = measured(
            lambda: gen_run(path, folder / "out-p", folder / f"cache-p-{concurrency}", *REQUEST_PROCESSES), server.pid
        )
        seconds = spread[3]["llm"]["steps"][STEP]["seconds"]
        name = f"gen run {' '.join(REQUEST_PROCESSES)}"
        rows.append((name, seconds, bound, spread[1], spread[2], spread[4], "LLM steps"))
        bare = measured(lambda: asyncio.run(bare_client_run(base_url, calls, concurrency, "bench-run")), server.pid)
        rows.append(("bare AsyncOpenAI loop", bare[0], bound, bare[1], bare[2], bare[4], ""))
        curator = measured(lambda: curator_run(base_url, calls, concurrency) if with_curator else None, server.pid)
        if curator[3] is None:
            absent = f"not measured: no {CURATOR_PYTHON.relative_to(ROOT)}" if with_curator else "--no-curator"
            rows.append(("curator", None, bound, None, None, None, absent))
        else:
            rows.append(("curator", curator[3], bound, curator[1], curator[2], curator[4], "its LLM call, own process"))
        return rows
    finally:
        server.stdin.close()
        server.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--points", default="256:0.5,1024:2", help="concurrency:latency pairs, comma-separated")
    parser.add_argument("--per-conversation", type=int, default=10)
    parser.add_argument("--no-curator", action="store_true", help="leave curator out (while iterating)")
    args = parser.parse_args(argv)
    points = [(int(c), float(lat)) for c, lat in (p.split(":") for p in args.points.split(","))]
    print(f"{os.cpu_count()} cores; fake server answering each request after exactly the latency")
    for concurrency, latency in points:
        with tempfile.TemporaryDirectory() as tmp:
            rows = measure_point(
                Path(tmp), args.items, args.per_conversation, concurrency, latency, not args.no_curator
            )
        goal = GOALS.get(concurrency)
        print(f"\nconcurrency {concurrency}, {latency * 1000:.0f} ms per request, bound {rows[0][2]:.2f} s")
        print(f"{'run':<28} {'seconds':>8} {'of bound':>9} {'CPU s':>7} {'other CPU':>10} {'server s':>9}  note")
        fractions = {}
        for name, seconds, bound, cpu, other, server, note in rows:
            if seconds is None:
                print(f"{name:<28} {'-':>8} {'-':>9} {'-':>7} {'-':>10} {'-':>9}  {note}")
                continue
            fractions[name] = bound / seconds
            figures = f"{seconds:>8.2f} {bound / seconds:>9.3f} {cpu:>7.2f} {other:>10.2f} {server:>9.2f}"
            print(f"{name:<28} {figures}  {note}")
        ours = max(fractions["gen run: LLM steps"], fractions[f"gen run {' '.join(REQUEST_PROCESSES)}"])
        goal_text = f"goal {goal:.2f}, ratio {ours / goal:.3f}" if goal else "no goal at this concurrency"
        print(f"gen run (LLM steps, the better of the two) {ours:.3f} of the bound: {goal_text}", end="")
        for peer in ("bare AsyncOpenAI loop", "curator"):
            if peer in fractions:
                print(f"; over {peer.split()[0]} {ours / fractions[peer]:.3f}", end="")
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
