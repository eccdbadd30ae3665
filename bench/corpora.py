"""Shared by the benchmarks: locomo10 from GEN_SHARED_DATA and a synthetic corpus of renamed copies of it."""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path


def synthetic_copy(raw: list[dict], copies: int) -> list[dict]:
    return [{**sample, "sample_id": f"{sample['sample_id']}-copy{k}"} for k in range(copies) for sample in raw]


def write_synthetic_copy(raw: list[dict], copies: int, path: Path) -> int:
    """The same corpus as synthetic_copy, written to `path` one sample at a time (1000× locomo10 is ~2.8 GB of
    JSON: never built as one string). Returns the number of bytes written."""
    with open(path, "w", encoding="utf-8") as out:
        out.write("[")
        for k in range(copies):
            for i, sample in enumerate(raw):
                if k or i:
                    out.write(", ")
                out.write(json.dumps({**sample, "sample_id": f"{sample['sample_id']}-copy{k}"}))
        out.write("]")
        return out.tell()


def locomo10_path() -> Path:
    """locomo10.json under GEN_SHARED_DATA (default ../shared/data), or exit saying where it was looked for."""
    data = Path(os.environ.get("GEN_SHARED_DATA", "../shared/data")) / "locomo" / "locomo10.json"
    if not data.exists():
        sys.exit(f"locomo10.json not found at {data}; set GEN_SHARED_DATA")
    return data


def run_small_and_large(description: str, measure: Callable[[Path, Path, str], object]) -> tuple[object, object, int]:
    """measure(source, workdir, label) on locomo10 and on `--copies` (default 100) times it; returns both results."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--copies", type=int, default=100)
    copies = parser.parse_args().copies
    data = locomo10_path()
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(tmp)
        small = measure(data, workdir, "locomo10")
        big_source = workdir / "synthetic.json"
        big_source.write_text(json.dumps(synthetic_copy(json.loads(data.read_text()), copies)))
        big = measure(big_source, workdir, f"locomo10x{copies}")
    return small, big, copies
