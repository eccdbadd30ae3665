"""A fully cached re-run of a time+content recipe against the same recipe's log alone: wall time of each `gen run`
(separate processes, imports included), their ratio against the goal (1.5), and where the cached run's time
goes, phase by phase, measured in this process.

    .venv/bin/python bench/bench_cached_rerun.py [--copies 100] [--per-conversation 10]

The corpus is `copies` renamed copies of the bundled sample (2 conversations each), so 100 copies and 10 questions
per conversation are 2,000 items. The first run fills the cache from the fake server (tests/fakes/openai_server.py
--tcq); every later run is --offline, so no request can be made.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import yaml
from bench_llm_run import corpus, recipe

from tests.fakes.openai_server import FakeOpenAI, tcq_question

GOAL = 1.5
ENV = {**os.environ, "GEN_BENCH_KEY": "sk-bench", "PYTHONPATH": str(ROOT)}


def gen_run(recipe_path: Path, folder: Path, offline: bool) -> float:
    args = ["-q", "run", str(recipe_path), "--output-dir", str(folder / "out"), "--cache-dir", str(folder / "cache")]
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gen", *args, *(["--offline"] if offline else [])], env=ENV, check=True)
    return time.perf_counter() - started


def phases(recipe_path: Path, cache: Path) -> dict[str, float]:
    """Seconds of each part of the cached time+content build, in this process (imports already done)."""
    from gen.llm.config import RunSettings
    from gen.llm.engine import Engine
    from gen.products.checks import Checks
    from gen.products.time_content import steps
    from gen.recipe import load_recipe
    from tests.harness import Harness

    os.environ["GEN_BENCH_KEY"] = "sk-bench"
    loaded = load_recipe(recipe_path)
    found: dict[str, float] = {}
    started = time.perf_counter()
    engine = Engine(loaded.llm, RunSettings(cache_dir=cache, progress="off", offline=True))
    harness = Harness.from_recipe(loaded, engine=engine)
    product = harness.product("time_content_questions")
    units = harness.inputs(product)
    found["read, place on the clock, build the log"] = time.perf_counter() - started
    started = time.perf_counter()
    items = steps.plan_items(units, harness.ctx, product.options)
    found["choose anchors (plan_items)"] = time.perf_counter() - started
    step = steps.question_step(product.options, harness.ctx.templates_dir)
    started = time.perf_counter()
    tasks = [step.task(item, 0) for item in items]
    found["render prompts"] = time.perf_counter() - started
    started = time.perf_counter()
    engine.run_step("bench", tasks)
    found["engine: keys, cache reads, parse"] = time.perf_counter() - started
    started = time.perf_counter()
    built = list(product.build(units, harness.ctx))
    found["whole build (anchors again, warm)"] = time.perf_counter() - started
    started = time.perf_counter()
    checks = Checks()
    for unit, records in zip(units, built):
        product.validate(unit, records, checks, harness.ctx)
    found["validate"] = time.perf_counter() - started
    engine.close()
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=100)
    parser.add_argument("--per-conversation", type=int, default=10)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI(tcq_question) as server:
        folder = Path(tmp)
        source = corpus(folder, args.copies)
        questions = recipe(folder, source, server.base_url, args.per_conversation, 64)
        log_only = folder / "log.yaml"
        data = yaml.safe_load(questions.read_text())
        log_only.write_text(yaml.safe_dump({**data, "name": "log-only", "products": [{"type": "log"}]}))
        gen_run(questions, folder, offline=False)  # fills the cache
        cached = min(gen_run(questions, folder, offline=True) for _ in range(3))
        log_s = min(gen_run(log_only, folder, offline=True) for _ in range(3))
        parts = phases(questions, folder / "cache")
    items = args.copies * 2 * args.per_conversation
    print(f"{os.cpu_count()} cores; {items:,} time+content items over {args.copies * 2} conversations")
    print(f"fully cached time+content run: {cached:.2f} s; log alone: {log_s:.2f} s (best of 3 each)")
    print(f"ratio {cached / log_s:.2f} (goal <= {GOAL})")
    for name, seconds in parts.items():
        print(f"  {name:<40} {seconds:6.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
