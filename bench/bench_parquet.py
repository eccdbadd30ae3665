"""Streaming a run folder into parquet (what `gen push` and `gen push --dry-run --export-dir` do): the export's
wall time and peak resident memory for locomo10 copied N times (log + time_queries), with the ratio to the
smallest run, to show memory stays flat as the run grows.

    GEN_SHARED_DATA=../shared/data python bench/bench_parquet.py --copies 10 100
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

import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bench.corpora import locomo10_path, write_synthetic_copy
from bench.procstat import peak_rss_mb


def child(run_dir: str, dest: str) -> None:
    from gen.export.hub_folder import build_export

    start = time.perf_counter()
    export = build_export(Path(run_dir), Path(dest))
    seconds = time.perf_counter() - start
    peak = peak_rss_mb()
    rows = sum(file.rows or 0 for file in export.files)
    print(json.dumps({"seconds": seconds, "peak_mb": peak, "rows": rows}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    raw = json.loads(locomo10_path().read_text())
    first = None
    with tempfile.TemporaryDirectory() as folder:
        for copies in args.copies:
            corpus = Path(folder) / f"corpus{copies}.json"
            write_synthetic_copy(raw, copies, corpus)
            recipe = Path(folder) / f"r{copies}.yaml"
            recipe.write_text(
                yaml.safe_dump(
                    {
                        "name": f"x{copies}",
                        "seed": 13,
                        "sources": [{"format": "locomo", "path": str(corpus)}],
                        "products": [{"type": "log"}, {"type": "time_queries"}],
                    }
                )
            )
            out = Path(folder) / "out"
            gen = [sys.executable, "-m", "gen", "run", str(recipe), "--output-dir", str(out), "--workers", "2"]
            subprocess.run(gen, check=True, capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO)})
            done = subprocess.run(
                [sys.executable, __file__, "--child", str(out / f"x{copies}"), str(Path(folder) / f"export{copies}")],
                capture_output=True,
                text=True,
                check=True,
            )
            figures = json.loads(done.stdout)
            first = first or figures
            print(
                f"{copies:>5}x  {figures['rows']:>11,} rows  export {figures['seconds']:7.1f} s  peak RSS "
                f"{figures['peak_mb']:6.0f} MB  (×{figures['peak_mb'] / first['peak_mb']:.2f} the memory for "
                f"×{figures['rows'] / first['rows']:.0f} the rows)"
            )


if __name__ == "__main__":
    main()
