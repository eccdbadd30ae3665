"""Benchmark: building and validating `time_queries` and `ambiguous_time_queries` for locomo10 and for a
synthetic corpus 100× larger (renamed copies of locomo10, each padded from its own donors). Prints wall
time and questions per second for each product.

    GEN_SHARED_DATA=../shared/data .venv/bin/python bench/bench_time_queries.py [--copies 100]

The products are driven directly (not through `gen run`), one conversation at a time, so the 100× corpus
(millions of questions) never has to sit in memory at once; writing JSONL is left out (bench_log measures
the writer). Loading the source and building timelines is reported separately as "prepare".
"""

from __future__ import annotations

import resource
import sys
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from corpora import run_small_and_large  # bench/corpora.py

from gen.products import BuildContext, ambiguous_time_queries, time_queries
from gen.recipe import load_recipe
from gen.runner import prepare

PRODUCTS = (time_queries, ambiguous_time_queries)


def measure(source: Path, workdir: Path, label: str) -> dict:
    recipe_path = workdir / f"{label}.yaml"
    recipe_path.write_text(
        yaml.safe_dump(
            {
                "name": label,
                "seed": 13,
                "sources": [{"format": "locomo", "path": str(source)}],
                "products": [{"type": "time_queries"}, {"type": "ambiguous_time_queries"}],
            }
        )
    )
    recipe = load_recipe(recipe_path)
    started = time.perf_counter()
    prepared = prepare(recipe)
    prepare_s = time.perf_counter() - started
    options = dict(recipe.product_options())
    totals = {p.NAME: {"rows": 0, "build": 0.0, "validate": 0.0, "failed": 0} for p in PRODUCTS}
    for timeline in prepared.timelines:
        ctx = BuildContext(recipe=recipe, conversations=[timeline.conversation], timelines=[timeline])
        for product in PRODUCTS:  # time_queries first: the ambiguous validator compares with its groups
            t0 = time.perf_counter()
            rows = list(product.build(ctx, options[product.NAME]))
            t1 = time.perf_counter()
            checks = product.validate(rows, ctx, options[product.NAME])
            t2 = time.perf_counter()
            total = totals[product.NAME]
            total["rows"] += len(rows)
            total["build"] += t1 - t0
            total["validate"] += t2 - t1
            total["failed"] += not checks.passed
    print(f"{label}: {len(prepared.timelines):,} conversations, prepare {prepare_s:.2f} s")
    for name, total in totals.items():
        verdict = "passed" if not total["failed"] else f"FAILED for {total['failed']} conversations"
        wall = total["build"] + total["validate"]
        print(
            f"  {name:>22}: {total['rows']:>10,} questions | build {total['build']:7.2f} s "
            f"({total['rows'] / total['build']:>9,.0f} q/s) | validate {total['validate']:7.2f} s | "
            f"build+validate {wall:7.2f} s ({total['rows'] / wall:>9,.0f} q/s) | "
            f"validation {verdict}"
        )
    return {name: total["build"] + total["validate"] for name, total in totals.items()}


def main() -> None:
    small, big, copies = run_small_and_large(__doc__, measure)
    for name in small:
        print(f"{name}: {big[name] / small[name]:.1f}× the time for {copies}× the data")
    print(f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
