"""Reading a source file with the input limits (nesting, repeated keys, NaN): records per second and peak RSS for
locomo10 copied N times, as a JSON list (read item by item) and as JSON lines, against the plain standard-library
parse of the same bytes (no checks) as the reference.

    GEN_SHARED_DATA=../shared/data python bench/bench_source_read.py --copies 1 10 100
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bench.corpora import locomo10_path, write_synthetic_copy
from bench.procstat import peak_rss_mb


def child(path: str, how: str) -> None:
    from gen.sources._io import stream_records

    start = time.perf_counter()
    if how == "checked":
        count = sum(1 for _ in stream_records(Path(path), "x"))
    else:
        text = Path(path).read_text(encoding="utf-8")
        count = (
            len(json.loads(text)) if text.startswith("[") else sum(1 for line in text.splitlines() if json.loads(line))
        )
    seconds = time.perf_counter() - start
    print(json.dumps({"records": count, "seconds": seconds, "peak_mb": peak_rss_mb()}))


def measure(path: Path, how: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", str(path), how], capture_output=True, text=True, check=True
    )
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    raw = json.loads(locomo10_path().read_text())
    with tempfile.TemporaryDirectory() as folder:
        for copies in args.copies:
            listed, lines = Path(folder) / f"x{copies}.json", Path(folder) / f"x{copies}.jsonl"
            size = write_synthetic_copy(raw, copies, listed)
            with open(lines, "w", encoding="utf-8") as out:
                for record in json.loads(listed.read_text()):
                    out.write(json.dumps(record) + "\n")
            for layout, path in (("list", listed), ("lines", lines)):
                checked, plain = measure(path, "checked"), measure(path, "plain")
                rate = checked["records"] / checked["seconds"]
                print(
                    f"{copies:>5}x {layout:<5} {size / 1e6:8.1f} MB  checked {rate:8.0f} rec/s "
                    f"{checked['peak_mb']:7.0f} MB peak | plain json {plain['records'] / plain['seconds']:8.0f} rec/s "
                    f"{plain['peak_mb']:7.0f} MB peak | time ratio {checked['seconds'] / plain['seconds']:.2f}"
                )


if __name__ == "__main__":
    main()
