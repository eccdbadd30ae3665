"""Benchmark: building the `log` product (load, timeline, records, validation) for locomo10 and for a
synthetic corpus 100× larger made of renamed copies of it. Prints wall time and responses per second.

    GEN_SHARED_DATA=../shared/data .venv/bin/python bench/bench_log.py [--copies 100]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import yaml

from gen.recipe import load_recipe
from gen.runner import run


def synthetic_copy(raw: list[dict], copies: int) -> list[dict]:
    return [{**sample, "sample_id": f"{sample['sample_id']}-copy{k}"} for k in range(copies) for sample in raw]


def measure(source: Path, workdir: Path, label: str) -> None:
    recipe_path = workdir / f"{label}.yaml"
    recipe_path.write_text(yaml.safe_dump({
        "name": label, "seed": 13, "sources": [{"format": "locomo", "path": str(source)}],
        "products": [{"type": "log"}, {"type": "conversations"}]}))
    started = time.perf_counter()
    folder = run(load_recipe(recipe_path), output_dir=workdir / "out")
    elapsed = time.perf_counter() - started
    report = json.loads((folder / "run.json").read_text())
    responses = report["configs"]["log"]["records"]
    log_timing = report["timings_s"]["log"]
    print(f"{label:>14}: {report['configs']['conversations']['records']:>5} conversations, {responses:>9,} responses, "
          f"wall {elapsed:7.2f} s, {responses / elapsed:>9,.0f} responses/s "
          f"(prepare {report['timings_s']['prepare']:.2f} s, log build {log_timing['build']:.2f} s, "
          f"validate {log_timing['validate']:.2f} s, write {log_timing['write']:.2f} s)")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--copies", type=int, default=100)
    args = parser.parse_args()
    data = Path(os.environ.get("GEN_SHARED_DATA", "../shared/data")) / "locomo" / "locomo10.json"
    if not data.exists():
        sys.exit(f"locomo10.json not found at {data}; set GEN_SHARED_DATA")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        small = measure(data, workdir, "locomo10")
        big_source = workdir / "synthetic.json"
        big_source.write_text(json.dumps(synthetic_copy(json.loads(data.read_text()), args.copies)))
        big = measure(big_source, workdir, f"locomo10x{args.copies}")
        print(f"ratio: {big / small:.1f}× the time for {args.copies}× the data; "
              f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
