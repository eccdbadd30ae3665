"""Reading a source file with the input limits (nesting, repeated keys, NaN): records per second and peak RSS for
locomo10 copied N times, as a JSON list (read item by item) and as JSON lines, against the plain standard-library
parse of the same bytes (no checks) as the reference.

    GEN_SHARED_DATA=../shared/data python bench/bench_source_read.py --copies 1 10 100

With --chat-logs N it instead writes a chat_logs file of N messages (conversations of 1,000 messages, sittings
of 50 a minute apart, a day between sittings) and runs `gen validate` and `gen run` (log and conversations) on
it, each in its own process: wall time, CPU time (user + system, which on a shared machine says more than wall
time), messages per CPU second and peak RSS.

    python bench/bench_source_read.py --chat-logs 1000000
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


def write_chat_logs(path: Path, messages: int, per_conversation: int = 1000, per_sitting: int = 50) -> None:
    from datetime import datetime, timedelta

    start = datetime(2023, 1, 2, 9, 0)
    with open(path, "w", encoding="utf-8") as out:
        for n in range(messages):
            conversation, k = divmod(n, per_conversation)
            sitting, m = divmod(k, per_sitting)
            when = start + timedelta(days=sitting, minutes=m)
            record = {
                "conversation": f"c{conversation}",
                "speaker": "Ann" if k % 2 == 0 else "Bob",
                "text": f"message {k} of conversation {conversation}: the river walk is at nine tomorrow",
                "time": f"{when:%Y-%m-%d %H:%M}",
            }
            out.write(json.dumps(record) + "\n")


def timed(command: list[str]) -> dict:
    """Wall and CPU seconds and peak RSS of one gen command run in its own process."""
    import os
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "gen", *command],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode:
        raise SystemExit(done.stderr)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall": wall, "cpu": cpu, "peak_mb": after.ru_maxrss / 1024}  # ru_maxrss: the largest child so far


def chat_logs_bench(messages: int) -> None:
    import yaml

    with tempfile.TemporaryDirectory() as folder:
        log, recipe = Path(folder) / "mine.jsonl", Path(folder) / "mine.yaml"
        write_chat_logs(log, messages)
        recipe.write_text(
            yaml.safe_dump(
                {
                    "name": "mine",
                    "sources": [{"format": "chat_logs", "path": str(log)}],
                    "timeline": {"padding": {"mode": "none"}},
                    "products": [{"type": "log"}, {"type": "conversations"}],
                }
            )
        )
        print(f"{messages:,} messages, {log.stat().st_size / 1e6:.0f} MB")
        for name, command in (
            ("validate", ["validate", str(recipe)]),
            ("run", ["run", str(recipe), "--output-dir", str(Path(folder) / "out")]),
        ):
            got = timed(command)
            print(
                f"gen {name:<8} wall {got['wall']:7.1f} s  cpu {got['cpu']:7.1f} s  "
                f"{messages / got['cpu']:9,.0f} messages per CPU second  peak RSS {got['peak_mb']:5.0f} MB"
            )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--chat-logs", type=int, metavar="MESSAGES")
    parser.add_argument("--child", nargs=2)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.chat_logs:
        chat_logs_bench(args.chat_logs)
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
