"""Benchmark: building and validating `time_queries` and `ambiguous_time_queries` for locomo10 and for a
synthetic corpus 100× larger (renamed copies of locomo10, each padded from its own donors). Prints wall
time and questions per second for each product.

    GEN_SHARED_DATA=../shared/data .venv/bin/python bench/bench_time_queries.py [--copies 100]

The products are driven directly (not through `gen run`), one conversation at a time, so the 100× corpus
(millions of questions) never has to sit in memory at once; writing JSONL is left out (bench_log measures
the writer). Loading the source and building timelines is reported separately as "prepare", and building the
products they need (log, conversations) as "needed products".
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

from gen.pipeline.shards import config_names, prepare
from gen.products.base import BuildContext, Unit
from gen.products.checks import Checks
from gen.recipe import load_recipe

PRODUCTS = ("time_queries", "ambiguous_time_queries")


def measure(source: Path, workdir: Path, label: str) -> dict[str, float]:
    recipe_path = workdir / f"{label}.yaml"
    recipe_path.write_text(
        yaml.safe_dump(
            {
                "name": label,
                "seed": 13,
                "sources": [{"format": "locomo", "path": str(source)}],
                "products": [{"type": name} for name in PRODUCTS],
            }
        )
    )
    recipe = load_recipe(recipe_path)
    started = time.perf_counter()
    prepared = prepare(recipe)
    prepare_s = time.perf_counter() - started
    ctx = BuildContext(recipe)
    totals = {name: {"rows": 0, "build": 0.0, "validate": 0.0, "failed": 0} for name in PRODUCTS}
    needs_s = 0.0  # the products they need (log, conversations): built, not validated
    for position in range(len(prepared.conversations)):
        t0 = time.perf_counter()
        unit = prepared.unit(position)  # the timeline is built here
        prepare_s += time.perf_counter() - t0
        built: dict[str, list[dict]] = {}  # config → this conversation's records so far
        for bound in prepared.products:  # build order: every product after the ones it needs
            product = bound.product
            needed = {config: built[config] for need in product.needs.products for config in config_names(need)}
            inputs = Unit(unit.conversation, unit.timeline, needed)
            t0 = time.perf_counter()
            records = next(iter(product.build([inputs], ctx)))
            t1 = time.perf_counter()
            built.update(records)
            if product.name not in totals:
                needs_s += t1 - t0
                continue
            checks = Checks()
            product.validate(inputs, records, checks, ctx)
            t2 = time.perf_counter()
            total = totals[product.name]
            total["rows"] += len(records[product.name])
            total["build"] += t1 - t0
            total["validate"] += t2 - t1
            total["failed"] += not checks.passed
    print(
        f"{label}: {len(prepared.conversations):,} conversations, prepare {prepare_s:.2f} s "
        f"(sources and timelines), needed products {needs_s:.2f} s"
    )
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
