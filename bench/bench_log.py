"""Benchmark: building the `log` product (load, timeline, records, validation) for locomo10 and for a
synthetic corpus 100× larger made of renamed copies of it. Prints wall time and responses per second.

    GEN_SHARED_DATA=../shared/data .venv/bin/python bench/bench_log.py [--copies 100]
"""

from __future__ import annotations

import json
import resource
import time
from pathlib import Path

import yaml
from corpora import run_small_and_large  # bench/corpora.py

from gen.pipeline.options import RunOptions
from gen.pipeline.runner import run
from gen.recipe import load_recipe


def measure(source: Path, workdir: Path, label: str) -> float:
    recipe_path = workdir / f"{label}.yaml"
    recipe_path.write_text(
        yaml.safe_dump(
            {
                "name": label,
                "seed": 13,
                "sources": [{"format": "locomo", "path": str(source)}],
                "products": [{"type": "log"}, {"type": "conversations"}],
            }
        )
    )
    started = time.perf_counter()
    folder = run(load_recipe(recipe_path), RunOptions(output_dir=workdir / "out"))
    elapsed = time.perf_counter() - started
    report = json.loads((folder / "run.json").read_text())
    responses = report["configs"]["log"]["records"]
    log_timing = report["timings_s"]["log"]
    print(
        f"{label:>14}: {report['configs']['conversations']['records']:>5} conversations, {responses:>9,} responses, "
        f"wall {elapsed:7.2f} s, {responses / elapsed:>9,.0f} responses/s "
        f"(prepare {report['timings_s']['prepare']:.2f} s, log build {log_timing['build']:.2f} s, "
        f"validate {log_timing['validate']:.2f} s, encode {log_timing['encode']:.2f} s)"
    )
    return elapsed


def main() -> None:
    small, big, copies = run_small_and_large(__doc__, measure)
    print(
        f"ratio: {big / small:.1f}× the time for {copies}× the data; "
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB"
    )


if __name__ == "__main__":
    main()
