"""Benchmark for `gen view` (issue 26) on a large run: K renamed copies of locomo10 (default 100), products `log`
and `time_queries` with every wording kept (as bench_scale.py builds them: about 5.8 million records, 3.1 GB of
JSON lines at 100×).

    GEN_SHARED_DATA=../shared/data .venv/bin/python bench/bench_view.py [--copies 100] [--folder RUN] [--turns 20]

The run is built once with `gen run --workers 2` (or `--folder` reuses one). Then `gen view RUN --port 0` starts
as a subprocess and the script, over plain HTTP on loopback, measures:

- time from starting the process to its URL, to the overview, and to the first page of each config's records
  (served from the file while the index is still being built);
- how long the background index takes to be ready;
- per page turn (wall time of the request, median and worst): following "next" through the first pages, jumping
  to random pages, a filtered table (f.test=dates), a sorted one (num_relevant descending), a text search, a
  question's page and a conversation's page;
- the server's peak RSS (VmHWM of the process, which holds DuckDB's threads too).

Goals: first page < 2 s, page turn < 200 ms, peak RSS < 300 MB; each figure is printed with its ratio to the goal
(below 1 meets it). Timing on a shared machine is noisy: the load average is printed with the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from urllib.parse import quote

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpora import locomo10_path, write_synthetic_copy  # bench/corpora.py
from procstat import busy_ticks, process_ticks  # bench/procstat.py

ROOT = Path(__file__).resolve().parents[1]
GOAL_FIRST_PAGE_S = 2.0
GOAL_TURN_S = 0.2
GOAL_RSS_MB = 300.0


def gen_command() -> list[str]:
    """`python -m gen` of this checkout (PYTHONPATH below), whatever is installed."""
    return [sys.executable, "-m", "gen"]


def build_run(workdir: Path, copies: int) -> Path:
    raw = json.loads(locomo10_path().read_text())
    source = workdir / f"locomo10x{copies}.json"
    write_synthetic_copy(raw, copies, source)
    recipe = workdir / "view-bench.yaml"
    recipe.write_text(
        json.dumps(
            {
                "name": f"view-x{copies}",
                "seed": 13,
                "sources": [{"format": "locomo", "path": str(source)}],
                "timeline": {"padding": {"mode": "donor", "target_words": 3000}},
                "products": [{"type": "log"}, {"type": "time_queries", "max_variants_per_group": "all"}],
            }
        )
    )
    started = time.perf_counter()
    subprocess.run(
        [*gen_command(), "-q", "run", str(recipe), "--output-dir", str(workdir / "out"), "--workers", "2"],
        check=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    source.unlink()
    print(f"built the {copies}× run in {time.perf_counter() - started:.0f} s", flush=True)
    return workdir / "out" / f"view-x{copies}"


FAILURES: list[str] = []  # pages that did not answer 200 (printed at the end)


def get(url: str) -> tuple[float, str]:
    started = time.perf_counter()
    try:
        with urllib.request.urlopen(url, timeout=600) as response:
            body = response.read().decode("utf-8")
    except urllib.error.HTTPError as error:
        FAILURES.append(f"{url}: HTTP {error.code}")
        body = error.read().decode("utf-8")
    return time.perf_counter() - started, body


def peak_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        line = next(line for line in status if line.startswith("VmHWM"))
    return int(line.split()[1]) / 1024


def first_line(process: subprocess.Popen[str]) -> str:
    line = process.stdout.readline() if process.stdout else ""
    if not line:
        raise RuntimeError(f"gen view ended: {process.communicate()[1]}")
    return line


def line(label: str, seconds: float, goal: float) -> str:
    return f"{label:<52} {seconds * 1000:>9.1f} ms   goal {goal * 1000:>6.0f} ms   ratio {seconds / goal:5.2f}"


def turns(base: str, paths: list[str]) -> list[float]:
    return [get(base + path)[0] for path in paths]


def summary(label: str, times: list[float]) -> str:
    median, worst = statistics.median(times), max(times)
    return (
        f"{label:<52} median {median * 1000:7.1f} ms  worst {worst * 1000:7.1f} ms  (n={len(times)})  "
        f"ratio to {GOAL_TURN_S * 1000:.0f} ms: median {median / GOAL_TURN_S:.2f}, worst {worst / GOAL_TURN_S:.2f}"
    )


def start_viewer(folder: Path, cache: Path) -> tuple[subprocess.Popen[str], str, float]:
    started = time.perf_counter()
    process = subprocess.Popen(
        [*gen_command(), "view", str(folder), "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), "GEN_CACHE_DIR": str(cache)},
    )
    base = next(w for w in first_line(process).split() if w.startswith("http://")).rstrip("/")
    return process, base, started


def rss_line(label: str, pid: int) -> str:
    rss = peak_rss_mb(pid)
    return f"{label:<52} {rss:9.0f} MB   goal {GOAL_RSS_MB:.0f} MB   ratio {rss / GOAL_RSS_MB:.2f}"


TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def cpu_line(label: str, pid: int, since_busy: int, since: float) -> str:
    """The server's CPU time so far, and how busy the whole machine was meanwhile (other sessions share it)."""
    server = process_ticks(pid) * TICK_S
    wall = time.perf_counter() - since
    machine = (busy_ticks() - since_busy) * TICK_S
    return (
        f"{label:<52} {server:9.1f} s CPU of the server in {wall:.1f} s; the machine was busy "
        f"{machine:.1f} CPU-s of {wall * (os.cpu_count() or 1):.1f}"
    )


def stop(process: subprocess.Popen[str]) -> None:
    """Ctrl-C, then what the server said of pages that failed inside it (the bench prints them)."""
    process.send_signal(2)
    _, said = process.communicate(timeout=120)
    FAILURES.extend(line for line in said.splitlines() if line.startswith("gen view:") and "(Ctrl-C" not in line)


def wait_ready(base: str) -> None:
    while "Indexing" in get(base + "/")[1]:
        time.sleep(0.5)


def ends_of_a_sort(base: str, config: str, query: str, total: int) -> None:
    """Middle, first and last page of one order: the first request of each, then the median of three more. The
    middle page is asked first, so its first request is the order's first (no index of the order, nothing
    building); the first and last pages' first requests meet the order's index being built in the background,
    which the middle page's request started."""
    last = max(1, -(-total // 50))
    for label, page in (("middle", (last + 1) // 2), ("first", 1), ("last", last)):
        url = f"{base}/records/{config}?{query}&page={page}"
        once = get(url)[0]
        again = statistics.median(turns(url, [""] * 3))
        print(
            f"{config}?{query} {label} page: first request {once * 1000:8.1f} ms, then {again * 1000:7.1f} ms",
            flush=True,
        )


def count_of(base: str, path: str) -> int:
    import re

    found = re.search(r'data-count="(\d+)"', get(base + path)[1])
    return int(found[1]) if found else 0


PARTIAL_SEARCH = "The word index of"  # the note of a search answered while a word index is built


def sortable_columns(base: str, config: str) -> list[str]:
    """The fields the records table offers to sort by (its column headers' links)."""
    import re

    found = re.findall(r'href="/records/[^"?]+\?[^"]*?sort=([^&"]+)', get(f"{base}/records/{config}")[1])
    return list(dict.fromkeys(found))


def wait_searchable(base: str, configs: list[str]) -> None:
    """Until a search of each config is answered from its whole word index (no partial note)."""
    for config in configs:
        while PARTIAL_SEARCH in get(f"{base}/records/{config}?q=the")[1]:
            time.sleep(1)


def search_line(base: str, config: str, word: str) -> str:
    import re

    took, page = get(f"{base}/records/{config}?q={word}")
    hits = re.search(r'data-count="(\d+)"', page)
    looked = re.search(r"looked at its first ([\d,]+) records", page)
    what = f"partial: among the first {looked[1]} records" if looked else "whole"
    if PARTIAL_SEARCH in page and not looked:
        what = "partial: the word index has not begun"
    return f"search {config} for {word!r}: {took * 1000:8.1f} ms, {int(hits[1]) if hits else 0:,} matches ({what})"


def measure_scaling(folder: Path, counts: dict[str, int]) -> None:
    """Issue 41's figures: every order's first, middle and last page (each order's first requests cold: its sort
    index is not built), filters, search while the word indexes are built and after, a cached start."""
    with tempfile.TemporaryDirectory(prefix="bench-view-cache-") as cache:
        busy = busy_ticks()
        process, base, started = start_viewer(folder, Path(cache))
        try:
            get(f"{base}/records/time_queries")
            print(line("fresh start → first page of time_queries", time.perf_counter() - started, GOAL_FIRST_PAGE_S))
            wait_ready(base)
            print(f"{'fresh start → every config indexed':<52} {time.perf_counter() - started:9.1f} s")
            for config, word in (("log", "marathon"), ("time_queries", "dates")):  # cold: word indexes being built
                print("cold " + search_line(base, config, word))
            wait_searchable(base, [name for name in counts if name != "conversations"])
            print(f"{'fresh start → every search index built':<52} {time.perf_counter() - started:9.1f} s")
            tq = counts["time_queries"]
            for column in sortable_columns(base, "time_queries"):
                for query in (f"sort={column}", f"sort={column}&desc=1"):
                    ends_of_a_sort(base, "time_queries", query, tq)
            dates = count_of(base, "/records/time_queries?f.test=dates")
            ends_of_a_sort(base, "time_queries", "f.test=dates", dates)
            ends_of_a_sort(base, "time_queries", "f.test=dates&sort=num_relevant", dates)
            ends_of_a_sort(base, "time_queries", "f.test=dates&sort=question&desc=1", dates)
            for config, word in (("time_queries", "dates"), ("time_queries", "marathon"), ("log", "marathon")):
                url = f"/records/{config}?q={word}"
                hits = count_of(base, url)
                print(summary(f"search {config} for {word!r} ({hits:,} match), first page", turns(base, [url] * 5)))
                if hits > 100:
                    deep = f"{url}&page={hits // 100}"
                    print(summary(f"search {config} for {word!r}, middle page", turns(base, [deep] * 5)))
            print(rss_line("peak RSS, fresh start", process.pid))
            print(cpu_line("CPU, fresh start", process.pid, busy, started))
        finally:
            stop(process)
        busy = busy_ticks()
        process, base, started = start_viewer(folder, Path(cache))
        try:
            get(f"{base}/records/time_queries?sort=question&page={tq // 100}")
            print(line("cached start → a middle page of a sort", time.perf_counter() - started, GOAL_FIRST_PAGE_S))
            wait_ready(base)
            print(f"{'cached start → every config indexed':<52} {time.perf_counter() - started:9.1f} s")
            print(rss_line("peak RSS, cached start", process.pid))
            print(cpu_line("CPU, cached start", process.pid, busy, started))
        finally:
            stop(process)
    for failure in FAILURES:
        print("NOT 200:", failure)


def measure(folder: Path, pages: int) -> None:
    report = json.loads((folder / "run.json").read_text())
    counts = {name: info["records"] for name, info in report["configs"].items()}
    size_mb = sum((folder / info["path"]).stat().st_size for info in report["configs"].values()) / 1e6
    print(f"run: {folder} — {sum(counts.values()):,} records ({counts}), {size_mb:,.0f} MB of JSON lines")
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    rng = random.Random(13)
    cache = Path(tempfile.mkdtemp(prefix="bench-view-cache-"))
    process, base, started = start_viewer(folder, cache)
    try:
        url_s = time.perf_counter() - started
        get(base + "/")
        overview_s = time.perf_counter() - started
        first_pages = {}
        for name in ("time_queries", "log"):
            get(f"{base}/records/{name}")
            first_pages[name] = time.perf_counter() - started
        print(line("process start → URL printed", url_s, GOAL_FIRST_PAGE_S))
        print(line("process start → overview", overview_s, GOAL_FIRST_PAGE_S))
        for name, seconds in first_pages.items():
            print(line(f"process start → first page of {name}", seconds, GOAL_FIRST_PAGE_S))
        early = turns(base, [f"/records/log?page={n}" for n in range(2, 2 + pages)])
        print(summary("page turns while indexing (log, from the file)", early))
        while "Indexing" in get(base + "/")[1]:
            time.sleep(0.5)
        print(f"{'index ready (all configs) after':<52} {time.perf_counter() - started:9.1f} s")

        tq = counts["time_queries"]
        print(
            summary(
                "next page, time_queries", turns(base, [f"/records/time_queries?page={n}" for n in range(2, 2 + pages)])
            )
        )
        jumps = [f"/records/time_queries?page={rng.randint(1, tq // 50)}" for _ in range(pages)]
        print(summary("random page, time_queries", turns(base, jumps)))
        print(summary("next page, log", turns(base, [f"/records/log?page={n}" for n in range(2, 2 + pages)])))
        filtered = [f"/records/time_queries?f.test=dates&page={n}" for n in range(1, 1 + pages)]
        print(summary("filtered (f.test=dates), next page", turns(base, filtered)))
        far = [f"/records/time_queries?f.test=dates&page={rng.randint(1, 10_000)}" for _ in range(pages)]
        print(summary("filtered (f.test=dates), random page", turns(base, far)))
        ordered = [f"/records/time_queries?sort=num_relevant&desc=1&page={n}" for n in range(1, 1 + pages)]
        print(summary("sorted (num_relevant desc), next page", turns(base, ordered)))
        print(
            summary(
                "text search (q=marathon), first pages",
                turns(base, [f"/records/log?q=marathon&page={n}" for n in range(1, 4)]),
            )
        )
        questions = [json.loads(line) for line in _lines(folder / "time_queries" / "test.jsonl", tq, rng, pages)]
        print(summary("question page", turns(base, [f"/questions/time_queries/{q['question_id']}" for q in questions])))
        conversations = sorted({q["conversation_id"] for q in questions})
        print(summary("conversation page", turns(base, [f"/conversations/{quote(c)}" for c in conversations])))
        rss = peak_rss_mb(process.pid)
        print(
            f"{'server peak RSS (VmHWM)':<52} {rss:9.0f} MB   goal {GOAL_RSS_MB:.0f} MB   ratio {rss / GOAL_RSS_MB:.2f}"
        )
    finally:
        stop(process)
        shutil.rmtree(cache, ignore_errors=True)


def _lines(path: Path, count: int, rng: random.Random, wanted: int) -> list[str]:
    """`wanted` lines of a large file at random positions (each the line after a random byte offset)."""
    size = path.stat().st_size
    found = []
    with path.open("rb") as handle:
        for _ in range(wanted):
            handle.seek(rng.randrange(size))
            handle.readline()
            text = handle.readline()
            if text:
                found.append(text.decode("utf-8"))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=100)
    parser.add_argument("--folder", type=Path, help="an existing run of log + time_queries (skips building one)")
    parser.add_argument("--turns", type=int, default=20, help="requests per kind of page turn (default 20)")
    parser.add_argument(
        "--scaling", action="store_true", help="only issue 41's figures: sorts, filters, search, cached start"
    )
    args = parser.parse_args()
    if args.folder and args.scaling:
        report = json.loads((args.folder / "run.json").read_text())
        measure_scaling(args.folder, {name: info["records"] for name, info in report["configs"].items()})
        return
    if args.folder:
        measure(args.folder, args.turns)
        return
    with tempfile.TemporaryDirectory(prefix="bench-view-") as tmp:
        measure(build_run(Path(tmp), args.copies), args.turns)


if __name__ == "__main__":
    main()
