"""Benchmark for streamed, parallel runs (issue 17): the real CLI on K renamed copies of locomo10.

    GEN_SHARED_DATA=../shared/data .venv/bin/python bench/bench_scale.py \\
        [--copies 1,10,100] [--workers 1,2] [--executor ray] [--gen PATH] [--timeout S] [--markdown]

Every run is `gen run RECIPE --output-dir DIR [--workers N] [--executor E]` as a subprocess, on a recipe with
the products `log` and `time_queries` (`conversations` is always written), donor padding to 3,000 words,
seed 13, over a LoCoMo-layout corpus made of K renamed copies of locomo10 (written once per K, streaming).

One row per run: copies, workers/executor, conversations, records written (the sum of run.json
configs[*].records), wall seconds, records per second of wall time, peak RSS of the whole process tree
(VmRSS of the gen process and all its descendants, read from /proc every ~50 ms and summed: pages shared
between forked workers are counted once per process, so this is an upper bound), peak PSS of the tree (the
same samples, each shared page counted 1/n in each of the n processes that share it: the memory the run
occupies; read once a second, as reading it slows the process down), the output folder's size
on disk, the CPU the run used (cores: CPU seconds of the tree / wall; the larger of what gen reaped and the
sum over every process seen in the tree, since an executor's daemons, e.g. Ray's workers, are not reaped by
gen), the CPU other work on the machine used during the run (all busy CPU from /proc/stat minus the
tree's, / wall) and the 1-minute load average when the run started. Timing on a shared machine is noisy:
read the last two columns before trusting a figure.

After the table, each run of more than one worker and each Ray run is set against issue 28's goals (figure, goal,
ratio, the machine's core count): `--workers 2` at 1,000× under 480 s (pro rata at other K) and 400 MB of peak
RSS; Ray within 1.2× the wall time of the same number of local workers and under 1 GB.

`--gen PATH` chooses the executable (default: this checkout's .venv/bin/gen), e.g. a pristine copy's, to
measure before/after. Whether it takes `--workers` / `--executor` is read from its `gen run --help`; a gen
without `--workers` runs once per K, labelled so. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from corpora import write_synthetic_copy  # bench/corpora.py

ROOT = Path(__file__).resolve().parents[1]
SAMPLE_S = 0.25
PSS_EVERY = 4  # samples: PSS is read once a second
MB = 1024 * 1024
CLK_TCK = os.sysconf("SC_CLK_TCK")
# Output of one copy of locomo10 (log + time_queries + conversations + card): ~33 MB on disk; used to check
# free space before a K whose size is not known yet.
OUTPUT_MB_PER_COPY = 35


# ---------------------------------------------------------------------------------------------- /proc helpers


def process_tree(root: int) -> list[int]:
    """root and all its live descendants (one scan of /proc/*/stat)."""
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, ()))
    return tree


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0  # gone, or a zombie (no VmRSS line)


def pss_kb(pid: int) -> int:
    """Proportional set size: each page shared by n processes counts 1/n in each, so the sum over a tree of
    forked workers is the memory the run really occupies."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as rollup:
            for line in rollup:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        pass
    return 0


def own_cpu_s(pid: int) -> float:
    """CPU seconds (user + system) a live process has used itself, its reaped children not included."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime, stime
    except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
        return 0.0


def busy_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy (not idle or iowait) since boot."""
    with open("/proc/stat") as stat:
        values = [int(v) for v in stat.readline().split()[1:]]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (values + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def mem_available_mb() -> float:
    with open("/proc/meminfo") as meminfo:
        for line in meminfo:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    return float("inf")


def load1() -> float:
    with open("/proc/loadavg") as loadavg:
        return float(loadavg.read().split()[0])


def disk_usage_bytes(folder: Path) -> int:
    total = 0
    for dirpath, _dirs, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.lstat(os.path.join(dirpath, name)).st_blocks * 512
    return total


def kill_tree(root: int, known: set[int]) -> None:
    """SIGKILL the run's process group and every descendant seen (a worker may have left the group)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(root, signal.SIGKILL)
    for pid in set(process_tree(root)) | known:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


# ---------------------------------------------------------------------------------------------- one run


@dataclass
class Row:
    copies: int
    label: str  # workers / executor
    workers: int | None
    executor: str | None
    status: str = "ok"  # ok | timeout | exit N | killed: ...
    conversations: int | None = None
    records: int | None = None
    wall_s: float | None = None
    peak_rss_mb: float | None = None
    peak_pss_mb: float | None = None
    output_mb: float | None = None
    cpu_cores: float | None = None
    other_cores: float | None = None
    load_start: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def records_per_s(self) -> float | None:
        return self.records / self.wall_s if self.records is not None and self.wall_s else None


def run_once(
    gen: str, recipe: Path, out_dir: Path, row: Row, timeout: float | None, min_free_mb: float, log_dir: Path
) -> Row:
    command = [gen, "run", str(recipe), "--output-dir", str(out_dir)]
    if row.workers is not None:
        command += ["--workers", str(row.workers)]
    if row.executor is not None:
        command += ["--executor", row.executor]
    row.notes.append(" ".join(command))
    stdout_path, stderr_path = log_dir / "stdout.txt", log_dir / "stderr.txt"
    row.load_start = load1()
    cpu_children_0, cpu_self_0, busy_0 = cpu_s(resource.RUSAGE_CHILDREN), cpu_s(resource.RUSAGE_SELF), busy_cpu_s()
    started = time.perf_counter()
    with open(stdout_path, "wb") as stdout, open(stderr_path, "wb") as stderr:
        proc = subprocess.Popen(command, stdout=stdout, stderr=stderr, stdin=subprocess.DEVNULL, start_new_session=True)
        peak_kb, peak_pss_kb, samples, seen = 0, 0, 0, set()
        cpu_seen: dict[int, float] = {}  # pid → its own CPU seconds when last sampled in the tree
        try:
            while True:
                tree = process_tree(proc.pid)
                seen.update(tree)
                peak_kb = max(peak_kb, sum(rss_kb(pid) for pid in tree))
                if samples % PSS_EVERY == 0:  # reading smaps_rollup locks the process's memory map: not too often
                    peak_pss_kb = max(peak_pss_kb, sum(pss_kb(pid) for pid in tree))
                samples += 1
                for pid in tree:
                    cpu_seen[pid] = max(cpu_seen.get(pid, 0.0), own_cpu_s(pid))
                if proc.poll() is not None:
                    break
                elapsed = time.perf_counter() - started
                if timeout is not None and elapsed > timeout:
                    row.status = "timeout"
                elif mem_available_mb() < min_free_mb:
                    row.status = f"killed: MemAvailable < {min_free_mb:.0f} MB"
                if row.status != "ok":
                    kill_tree(proc.pid, seen)
                    proc.wait()
                    break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=SAMPLE_S)
        except BaseException:
            kill_tree(proc.pid, seen)
            proc.wait()
            raise
    wall = time.perf_counter() - started
    # Whatever the gen process started and did not reap (daemons of an executor) goes now.
    leftovers = [pid for pid in seen if pid != proc.pid and is_leftover(pid, seen)]
    if leftovers:
        row.notes.append(f"{len(leftovers)} descendant process(es) still alive after gen exited; killed")
        for pid in leftovers:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    row.wall_s = wall
    row.peak_rss_mb = peak_kb / 1024
    row.peak_pss_mb = peak_pss_kb / 1024
    # What gen reaped (its own CPU and its waited-for descendants'), or, when larger, the sum over every process
    # sampled in the tree: daemons reparented away from gen (Ray's workers) never reach RUSAGE_CHILDREN.
    tree_cpu = max(cpu_s(resource.RUSAGE_CHILDREN) - cpu_children_0, sum(cpu_seen.values()))
    own_cpu = cpu_s(resource.RUSAGE_SELF) - cpu_self_0  # this script's sampling: neither gen nor other work
    row.cpu_cores = tree_cpu / wall
    row.other_cores = max(0.0, busy_cpu_s() - busy_0 - tree_cpu - own_cpu) / wall
    row.output_mb = disk_usage_bytes(out_dir) / MB if out_dir.exists() else 0.0
    if row.status == "ok" and proc.returncode != 0:
        row.status = f"exit {proc.returncode}"
    if row.status == "ok":
        reports = list(out_dir.glob("*/run.json"))
        if len(reports) != 1:
            row.status = f"{len(reports)} run.json"
        else:
            report = json.loads(reports[0].read_text())
            row.records = sum(config["records"] for config in report["configs"].values())
            row.conversations = report["configs"].get("conversations", {}).get("records")
    else:
        tail = stderr_path.read_text(errors="replace").strip().splitlines()[-5:]
        row.notes.extend(f"stderr: {line}" for line in tail)
    return row


def is_leftover(pid: int, seen: set[int]) -> bool:
    """A pid seen in the run's tree that is still alive (not a zombie) and still in a session the run
    created (so not the pid reused by an unrelated process)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        return fields[0] != b"Z" and int(fields[3]) in seen  # fields[3] = session id = the gen process's pid
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False


# ---------------------------------------------------------------------------------------------- table

COLUMNS = (
    "copies",
    "workers/executor",
    "conversations",
    "records",
    "wall s",
    "records/s",
    "peak RSS MB",
    "peak PSS MB",
    "output MB",
    "CPU cores",
    "other CPU",
    "load1",
)


def cells(row: Row) -> list[str]:
    def num(value: float | None, spec: str) -> str:
        return "—" if value is None else format(value, spec)

    wall = num(row.wall_s, ".1f") if row.status == "ok" else f"{row.status} ({num(row.wall_s, '.0f')} s)"
    return [
        f"{row.copies}×",
        row.label,
        num(row.conversations, ","),
        num(row.records, ","),
        wall,
        num(row.records_per_s, ",.0f"),
        num(row.peak_rss_mb, ",.0f"),
        num(row.peak_pss_mb, ",.0f"),
        num(row.output_mb, ",.0f"),
        num(row.cpu_cores, ".2f"),
        num(row.other_cores, ".2f"),
        num(row.load_start, ".2f"),
    ]


WIDTHS = (7, 26, 13, 12, 12, 10, 11, 11, 9, 9, 9, 6)


def plain_line(values: list[str]) -> str:
    return "  ".join(v.rjust(w) if i not in (1,) else v.ljust(w) for i, (v, w) in enumerate(zip(values, WIDTHS)))


def markdown_table(rows: list[Row]) -> str:
    lines = [
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---:" if i != 1 else "---" for i in range(len(COLUMNS))) + "|",
    ]
    lines += ["| " + " | ".join(cells(row)) + " |" for row in rows]
    return "\n".join(lines)


def ratio(top: float | None, bottom: float | None) -> float:
    return top / bottom if top is not None and bottom else float("nan")


def ratios(rows: list[Row], copies: list[int]) -> list[str]:
    """Peak RSS and wall of each K against the previous K (same workers/executor); N workers against 1."""
    ok = {(r.copies, r.label): r for r in rows if r.status == "ok"}
    labels = list(dict.fromkeys(r.label for r in rows))
    lines = []
    for small, big in itertools.pairwise(copies):
        for label in labels:
            a, b = ok.get((small, label)), ok.get((big, label))
            if a and b:
                lines.append(
                    f"{label}: {big}× vs {small}× ({big / small:g}× the data): "
                    f"peak RSS {ratio(b.peak_rss_mb, a.peak_rss_mb):.2f}×, "
                    f"peak PSS {ratio(b.peak_pss_mb, a.peak_pss_mb):.2f}×, "
                    f"wall {ratio(b.wall_s, a.wall_s):.1f}×"
                )
    for row in rows:
        if row.status != "ok" or row.workers in (None, 1):
            continue
        base = next(
            (
                r
                for r in rows
                if r.copies == row.copies and r.executor == row.executor and r.workers == 1 and r.status == "ok"
            ),
            None,
        )
        if base:
            lines.append(
                f"{row.copies}× {row.label}: wall {ratio(row.wall_s, base.wall_s):.2f}× that of 1 worker "
                f"(speed-up {ratio(base.wall_s, row.wall_s):.2f}), "
                f"peak RSS {ratio(row.peak_rss_mb, base.peak_rss_mb):.2f}×, "
                f"peak PSS {ratio(row.peak_pss_mb, base.peak_pss_mb):.2f}×"
            )
    return lines


# ---------------------------------------------------------------------------------------------- goals

# Issue 28's goals. `--workers 2` at 1,000×: under 480 s of wall time and 400 MB of peak RSS summed over the
# processes (at 100× and more; at other K the wall goal is taken pro rata, K/1,000 of it, and the memory goal
# stays; below 100× starting the run weighs too much for a pro rata goal to mean anything). Ray on a local
# instance with as many CPUs: within 1.2× the wall time of the same worker count, under 1 GB summed over gen's and
# Ray's processes.
WORKERS_WALL_GOAL_S_AT_1000 = 480.0
WORKERS_RSS_GOAL_MB = 400.0
RAY_WALL_GOAL_RATIO = 1.2
RAY_RSS_GOAL_MB = 1000.0


def goal_lines(rows: list[Row]) -> list[str]:
    """Each run's figures against its goal: figure, goal and ratio (figure / goal; at most 1 meets it)."""
    cores = os.cpu_count()
    ok = [r for r in rows if r.status == "ok" and r.wall_s is not None and r.peak_rss_mb is not None]
    lines = []
    for row in ok:
        if row.executor is None and row.workers is not None and row.workers > 1 and row.copies >= 100:
            goal = WORKERS_WALL_GOAL_S_AT_1000 * row.copies / 1000
            pro_rata = "" if row.copies == 1000 else f" (pro rata: {row.copies}/1,000 of 480 s)"
            lines.append(
                f"{row.copies}× {row.label}, {cores} cores: wall {row.wall_s:.1f} s, goal < {goal:.1f} s{pro_rata}: "
                f"ratio {row.wall_s / goal:.2f}; peak RSS {row.peak_rss_mb:,.0f} MB, goal < {WORKERS_RSS_GOAL_MB:.0f} "
                f"MB: ratio {row.peak_rss_mb / WORKERS_RSS_GOAL_MB:.2f} (PSS {row.peak_pss_mb or 0:,.0f} MB)"
            )
        if row.executor == "ray":
            peer = next(
                (r for r in ok if r.copies == row.copies and r.executor is None and r.workers == row.workers), None
            )
            versus = (
                f"wall {row.wall_s:.1f} s against {peer.wall_s:.1f} s for {peer.label}: "
                f"{row.wall_s / peer.wall_s:.2f}×, goal ≤ {RAY_WALL_GOAL_RATIO}×"
                if peer is not None and peer.wall_s
                else f"wall {row.wall_s:.1f} s (no local run of {row.workers} workers to compare with)"
            )
            lines.append(
                f"{row.copies}× {row.label}, {cores} cores: {versus}; peak RSS {row.peak_rss_mb:,.0f} MB, goal < "
                f"{RAY_RSS_GOAL_MB:,.0f} MB: ratio {row.peak_rss_mb / RAY_RSS_GOAL_MB:.2f} "
                f"(PSS {row.peak_pss_mb or 0:,.0f} MB: ratio {(row.peak_pss_mb or 0) / RAY_RSS_GOAL_MB:.2f})"
            )
    return lines


# ---------------------------------------------------------------------------------------------- main


def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected integers >= 1, got {text!r}")
    return values


def default_gen() -> str:
    local = ROOT / ".venv" / "bin" / "gen"
    return str(local) if local.exists() else (shutil.which("gen") or "gen")


def write_recipe(path: Path, name: str, source: Path) -> None:
    path.write_text(
        json.dumps(
            {  # JSON is YAML
                "name": name,
                "seed": 13,
                "sources": [{"format": "locomo", "path": str(source)}],
                "timeline": {"padding": {"mode": "donor", "target_words": 3000}},
                "products": [
                    {"type": "log"},
                    {"type": "time_queries", "max_variants_per_group": "all"},
                ],  # as measured before
            },
            indent=2,
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int_list, default=[1, 10, 100], help="K values (default 1,10,100)")
    parser.add_argument("--workers", type=int_list, default=[1, 2], help="worker counts (default 1,2)")
    parser.add_argument(
        "--executor",
        action="append",
        default=[],
        help="also run with `--executor E` (e.g. ray), for each worker count; repeatable",
    )
    parser.add_argument("--gen", default=default_gen(), help="the gen executable (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=None, help="seconds per run; the tree is then killed")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown at the end")
    parser.add_argument(
        "--workdir",
        type=Path,
        default=None,
        help="where corpora and outputs go (default: a temporary folder under $TMPDIR or /tmp)",
    )
    parser.add_argument(
        "--min-free-mb",
        type=float,
        default=1024,
        help="kill a run when the machine's MemAvailable falls below this (default 1024)",
    )
    args = parser.parse_args()
    copies = sorted(set(args.copies))
    workers = sorted(set(args.workers))

    data = Path(os.environ.get("GEN_SHARED_DATA", "../shared/data")) / "locomo" / "locomo10.json"
    if not data.exists():
        sys.exit(f"locomo10.json not found at {data}; set GEN_SHARED_DATA")
    gen = shutil.which(args.gen) or args.gen
    try:
        help_text = subprocess.run([gen, "run", "--help"], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as error:
        sys.exit(f"cannot run `{gen} run --help`: {error}")
    has_workers, has_executor = "--workers" in help_text, "--executor" in help_text

    configs: list[tuple[str, int | None, str | None]] = []  # (label, workers, executor)
    if has_workers:
        configs += [(f"{n} worker{'s' * (n != 1)}", n, None) for n in workers]
    else:
        configs.append(("1 (gen has no --workers)", None, None))
    skipped = []
    for executor in args.executor:
        if not has_executor:
            skipped.append(f"executor {executor}: rows skipped: `{gen} run --help` lists no --executor")
            continue
        if has_workers:
            configs += [(f"{executor}, {n} worker{'s' * (n != 1)}", n, executor) for n in workers]
        else:
            configs.append((f"{executor} (no --workers)", None, executor))

    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="bench-scale-"))
    workdir.mkdir(parents=True, exist_ok=True)
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    free = shutil.disk_usage(workdir).free
    print(f"gen: {gen} (--workers: {'yes' if has_workers else 'no'}, --executor: {'yes' if has_executor else 'no'})")
    print(
        f"corpus: K × {data} ; work folder {workdir} ({free / 2**30:.1f} GB free) ; "
        f"{os.cpu_count()} CPUs, MemAvailable {mem_available_mb():,.0f} MB"
    )
    print(f"uptime: {uptime}")
    for line in skipped:
        print(line)
    sys.stdout.flush()

    raw = json.loads(data.read_text())
    corpus_bytes_per_copy = len(json.dumps(raw).encode())
    output_mb_per_copy = OUTPUT_MB_PER_COPY
    rows: list[Row] = []
    print(plain_line(list(COLUMNS)), flush=True)
    try:
        for k in copies:
            need = k * (corpus_bytes_per_copy + output_mb_per_copy * MB * 1.1)
            free = shutil.disk_usage(workdir).free
            if need > free - 2**30:
                print(
                    f"{k}×: skipped: needs ~{need / 2**30:.1f} GB on disk (corpus + one output), "
                    f"{free / 2**30:.1f} GB free in {workdir}",
                    flush=True,
                )
                continue
            source = workdir / f"locomo10x{k}.json"
            t0 = time.perf_counter()
            size = write_synthetic_copy(raw, k, source)
            if k >= 100:
                print(f"({k}× corpus: {size / MB:,.0f} MB written in {time.perf_counter() - t0:.0f} s)", flush=True)
            recipe = workdir / f"scale-x{k}.yaml"
            write_recipe(recipe, f"scale-x{k}", source)
            for label, n, executor in configs:
                out_dir = workdir / "out"
                shutil.rmtree(out_dir, ignore_errors=True)
                row = run_once(
                    gen, recipe, out_dir, Row(k, label, n, executor), args.timeout, args.min_free_mb, workdir
                )
                rows.append(row)
                if row.status == "ok" and row.output_mb:
                    output_mb_per_copy = max(output_mb_per_copy, row.output_mb / k)
                shutil.rmtree(out_dir, ignore_errors=True)
                print(plain_line(cells(row)), flush=True)
                for note in row.notes[1:]:
                    print(f"    {note}", flush=True)
            source.unlink()
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    finally:
        if args.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)

    print()
    for line in ratios(rows, copies):
        print(line)
    goals = goal_lines(rows)
    if goals:
        print("\ngoals (issue 28):")
    for line in goals:
        print(f"  {line}")
    if rows:
        print(f"command of the last run: {rows[-1].notes[0]}")
    print(f"uptime: {subprocess.run(['uptime'], capture_output=True, text=True).stdout.strip()}")
    if args.markdown:
        print()
        print(
            f"`{gen}`, {os.cpu_count()} CPUs; peak RSS = sum of VmRSS over the process tree, sampled every "
            f"{SAMPLE_S * 1000:.0f} ms; peak PSS = the same with shared pages divided among their processes; "
            "other CPU = cores busy with other work during the run.\n"
        )
        print(markdown_table(rows))


if __name__ == "__main__":
    main()
