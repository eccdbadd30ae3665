"""A fully cached re-run of a time+content recipe against the same recipe's log alone: wall time of each `gen run`
(separate processes, imports included), their ratio against the goal (1.5), and where the cached run's time
goes, phase by phase, measured in this process. Each kind of run also shows its CPU seconds (user + system of
the `gen run` process, in the run with the best wall time: steadier than wall time on a shared machine) and
`other CPU`, the cores the rest of the machine kept busy meanwhile (/proc/stat less gen's own time, averaged
over every run; Linux only): read it before trusting a figure.

    .venv/bin/python bench/bench_cached_rerun.py [--copies 100] [--per-conversation 10] [--repeats 5]

The corpus is `copies` renamed copies of the bundled sample (2 conversations each), so 100 copies and 10 questions
per conversation are 2,000 items. The first run fills the cache from the fake server (tests/fakes/openai_server.py
--tcq): the replies (llm.sqlite) and the plans (plans.sqlite); every later run is --offline, so no request can be
made. "Without the plans" runs the re-run with plans.sqlite removed first: the anchors are chosen again, as
before plans were kept.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import yaml
from bench_llm_run import corpus, recipe
from procstat import busy_ticks

from tests.fakes.openai_server import FakeOpenAI, tcq_question

GOAL = 1.5
ENV = {**os.environ, "GEN_BENCH_KEY": "sk-bench", "PYTHONPATH": str(ROOT)}


@dataclass
class Timed:
    """One `gen run`: wall seconds, its CPU seconds, and the cores the rest of the machine kept busy."""

    wall: float
    cpu: float
    other: float


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def gen_run(recipe_path: Path, folder: Path, offline: bool, forget_plans: bool = False) -> Timed:
    args = ["-q", "run", str(recipe_path), "--output-dir", str(folder / "out"), "--cache-dir", str(folder / "cache")]
    if forget_plans:
        (folder / "cache" / "plans.sqlite").unlink(missing_ok=True)
    busy, cpu = busy_ticks(), children_cpu()
    started = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gen", *args, *(["--offline"] if offline else [])], env=ENV, check=True)
    wall = time.perf_counter() - started
    own = children_cpu() - cpu
    other = (busy_ticks() - busy) / os.sysconf("SC_CLK_TCK") - own
    return Timed(wall, own, max(other, 0.0) / wall)


def best(runs: list[Timed]) -> Timed:
    """The run with the best wall time, with the other CPU averaged over every run of its kind."""
    fastest = min(runs, key=lambda run: run.wall)
    return Timed(fastest.wall, fastest.cpu, sum(run.other for run in runs) / len(runs))


def timed(found: dict[str, float], name: str, work):
    gc.collect()  # each phase pays for its own garbage, not for the phase before
    started = time.perf_counter()
    result = work()
    found[name] = time.perf_counter() - started
    return result


def phases(recipe_path: Path, cache: Path) -> dict[str, float]:
    """Seconds of each part of the cached time+content build, in this process (imports already done)."""
    from gen.llm.config import RunSettings
    from gen.llm.engine import Engine
    from gen.products.checks import Checks
    from gen.products.time_content import steps
    from gen.recipe import load_recipe

    os.environ["GEN_BENCH_KEY"] = "sk-bench"
    loaded = load_recipe(recipe_path)
    found: dict[str, float] = {}
    engine = Engine(loaded.llm, RunSettings(cache_dir=cache, progress="off", offline=True))
    harness, product, units = timed(found, "read, place on the clock, build the log", lambda: inputs(loaded, engine))
    ctx, options = harness.ctx, product.options
    book = steps.PhraseBook(ctx.templates)  # as plan_items shares one, without the kept plans
    timed(found, "plan from scratch", lambda: [fresh(steps, u.stamped, options, ctx.seed, book) for u in units])
    items = timed(found, "plan: read the kept plans", lambda: steps.plan_items(units, ctx, options))
    step = steps.question_step(options, ctx.templates)
    tasks = timed(found, "render prompts", lambda: [step.task(item, 0) for item in items])
    outcomes = timed(found, "engine: keys, cache reads, parse", lambda: engine.run_step("bench", tasks))
    assert step.prepare is not None
    values = [step.prepare(item, outcome.value) for item, outcome in zip(items, outcomes)]
    timed(found, "question checks", lambda: [step.check(item, value) for item, value in zip(items, values)])
    built = timed(found, "whole build (plans kept)", lambda: list(product.build(units, ctx)))
    checks = Checks()
    timed(found, "validate", lambda: [product.validate(u, r, checks, ctx) for u, r in zip(units, built)])
    engine.close()
    return found


def fresh(steps, timeline, options, seed, book):
    return steps.items_of(timeline, steps.choose(timeline, options, seed, book), options, book)


def inputs(loaded, engine):
    from tests.harness import Harness

    harness = Harness.from_recipe(loaded, engine=engine)
    product = harness.product("time_content_questions")
    return harness, product, harness.inputs(product)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=100)
    parser.add_argument("--per-conversation", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5, help="runs of each kind; the best counts")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, FakeOpenAI(tcq_question) as server:
        folder = Path(tmp)
        source = corpus(folder, args.copies)
        questions = recipe(folder, source, server.base_url, args.per_conversation, 64)
        log_only = folder / "log.yaml"
        data = yaml.safe_load(questions.read_text())
        log_only.write_text(yaml.safe_dump({**data, "name": "log-only", "products": [{"type": "log"}]}))
        gen_run(questions, folder, offline=False)  # fills the cache
        cached, log_s, unplanned = [], [], []
        for _ in range(args.repeats):  # interleaved, so a busy moment of the machine weighs on every kind alike
            cached.append(gen_run(questions, folder, offline=True))
            log_s.append(gen_run(log_only, folder, offline=True))
            unplanned.append(gen_run(questions, folder, offline=True, forget_plans=True))
        gen_run(questions, folder, offline=True)  # the plans are kept again
        parts = phases(questions, folder / "cache")
    items = args.copies * 2 * args.per_conversation
    fastest, log_best, unplanned_best = best(cached), best(log_s), best(unplanned)
    print(f"{os.cpu_count()} cores; {items:,} time+content items over {args.copies * 2} conversations")
    print(f"{'best of ' + str(args.repeats):<34} {'wall s':>7} {'CPU s':>7} {'other CPU':>10}")
    for name, run in (
        ("fully cached time+content run", fastest),
        ("log alone", log_best),
        ("cached, without the kept plans", unplanned_best),
    ):
        print(f"{name:<34} {run.wall:7.2f} {run.cpu:7.2f} {run.other:10.2f}")
    print(
        f"ratio {fastest.wall / log_best.wall:.2f} (goal <= {GOAL}; CPU {fastest.cpu / log_best.cpu:.2f}); without "
        f"the kept plans {unplanned_best.wall / log_best.wall:.2f}"
    )
    for name, seconds in parts.items():
        print(f"  {name:<42} {seconds:6.2f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
