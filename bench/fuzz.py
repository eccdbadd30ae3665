"""The long fuzz run: the strategies of tests/fuzz/ with fresh seeds until the time is up.

    .venv/bin/python bench/fuzz.py --minutes 30                 # every surface in turn
    .venv/bin/python bench/fuzz.py --minutes 5 --surface replies --seed 7
    .venv/bin/python bench/fuzz.py --replay bench/results/fuzz/03-...  # run a saved reproducer again

Each example goes through the one runner (tests/fuzz/runner.py), which checks every promise. A failure class
(surface + broken promise + exit code + the exception's type and innermost frame in gen, or the message's
shape) is printed once, the first time it is met; Hypothesis then shrinks its case for a short while
(--shrink-seconds) and the smallest case is saved under bench/results/fuzz/NN-<class>/ (git-ignored):
case.pickle (for --replay), work/ (its files), repro.sh (the command line) and outcome.txt (what broke).
summary.json lists every class with how often it came up. One process at a time: the machine's two cores are
shared.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pickle
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from hypothesis import HealthCheck, Phase, given, seed, settings

from tests.fuzz.runner import Case, Outcome, execute, execute_in_process, shell_quote
from tests.fuzz.surfaces import SURFACES

RESULTS = REPO / "bench" / "results" / "fuzz"
BATCH = 10  # examples per seed
# surface → (strategy, how its cases run); "readers" are the source cases run in this process (many, cheap)
RUNS: dict[str, tuple[object, Callable[[Case], Outcome]]] = {
    "readers": (SURFACES["sources"], execute_in_process),
    "own_readers": (SURFACES["own_sources"], execute_in_process),
    **{name: (strategy, execute) for name, strategy in SURFACES.items()},
}


class Found(Exception):
    """Raised while shrinking, for the class being shrunk."""


@dataclass
class Tally:
    first: dict[str, Outcome] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=dict)
    saved: dict[str, str] = field(default_factory=dict)
    examples: int = 0


def options(examples: int, phases: tuple[Phase, ...]) -> settings:
    return settings(
        max_examples=examples,
        database=None,
        deadline=None,
        phases=phases,
        suppress_health_check=list(HealthCheck),
        print_blob=False,
        report_multiple_bugs=False,
    )


def run_batch(name: str, seed_value: int, until: float, tally: Tally) -> list[str]:
    """BATCH examples of one surface from one seed; returns the classes met for the first time."""
    strategy, runner = RUNS[name]
    new: list[str] = []

    @options(BATCH, (Phase.generate,))
    @seed(seed_value)
    @given(strategy)
    def batch(case: Case) -> None:
        if time.monotonic() > until:
            return
        outcome = runner(case)
        tally.examples += 1
        for found in outcome.classes():
            tally.counts[found] = tally.counts.get(found, 0) + 1
            if found not in tally.first:
                tally.first[found] = outcome
                new.append(found)
                print(f"NEW  {found}\n     {case.what[:200]}\n     {case.command_line()[:200]}", flush=True)

    batch()
    return new


def shrink(name: str, seed_value: int, target: str, seconds: float) -> Outcome | None:
    """The smallest case Hypothesis finds for `target` within `seconds`, replaying the batch's seed."""
    strategy, runner = RUNS[name]
    deadline = time.monotonic() + seconds
    smallest: list[Outcome] = []

    @options(BATCH, (Phase.generate, Phase.shrink))
    @seed(seed_value)
    @given(strategy)
    def probe(case: Case) -> None:
        if time.monotonic() > deadline:
            return
        outcome = runner(case)
        if target in outcome.classes():
            smallest.append(outcome)
            raise Found(target)

    with contextlib.suppress(Exception):  # Found, or Hypothesis's flaky-failure group once the deadline passed
        probe()
    return smallest[-1] if smallest else None  # shrinking tries only smaller cases: the last one is the smallest


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:90]


def save(outcome: Outcome, found: str, number: int) -> Path:
    """The case laid out as files, with the command to run it, what broke, and a pickle for --replay."""
    case = outcome.case
    folder = RESULTS / f"{number:02d}-{slug(found)}"
    work = folder / "work"
    work.mkdir(parents=True, exist_ok=True)
    for relative, content in case.files.items():
        (work / relative).parent.mkdir(parents=True, exist_ok=True)
        (work / relative).write_bytes(content)
    setup = [f"mkfifo {shell_quote(path)}" for path in case.fifos]
    setup += [f"ln -s {shell_quote(target)} {shell_quote(path)}" for path, target in case.links]
    lines = [
        "#!/usr/bin/env bash",
        f"# class: {found}",
        f"# case: {case.what[:500]}",
        "# cases with a fake-server plan or a signal: python bench/fuzz.py --replay <this folder>",
        'cd "$(dirname "$0")/work"',
        *setup,
        f'PYTHONPATH={shell_quote(str(REPO))} GEN_CACHE_DIR="$PWD/cache" python -m {case.module} '
        + " ".join(shell_quote(arg) for arg in case.args),
    ]
    (folder / "repro.sh").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "outcome.txt").write_text(outcome.report() + "\n", encoding="utf-8")
    (folder / "case.pickle").write_bytes(pickle.dumps(case))
    return folder


def replay(folder: Path) -> int:
    case = pickle.loads((folder / "case.pickle").read_bytes())
    runner = execute_in_process if "(in process)" in (folder / "outcome.txt").read_text() else execute
    outcome = runner(case)
    print(outcome.report())
    return 1 if outcome.violations else 0


def write_summary(tally: Tally, started: float) -> None:
    summary = {
        "examples": tally.examples,
        "minutes": round((time.monotonic() - started) / 60, 1),
        "classes": [
            {"class": found, "count": tally.counts[found], "reproducer": tally.saved.get(found, "")}
            for found in sorted(tally.first)
        ],
    }
    (RESULTS / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=30.0, help="how long to run (default 30)")
    parser.add_argument("--surface", action="append", choices=sorted(RUNS), help="only this surface (repeatable)")
    parser.add_argument("--seed", type=int, default=None, help="the first seed (default: from the clock)")
    parser.add_argument("--shrink-seconds", type=float, default=40.0, help="time to shrink each new class")
    parser.add_argument("--replay", type=Path, help="run one saved reproducer folder again and report")
    args = parser.parse_args(argv)
    if args.replay:
        return replay(args.replay)
    RESULTS.mkdir(parents=True, exist_ok=True)
    surfaces = args.surface or sorted(RUNS)
    started = time.monotonic()
    until = started + args.minutes * 60
    seed_value = args.seed if args.seed is not None else int(time.time()) % 1_000_000
    tally = Tally()
    print(f"fuzzing {', '.join(surfaces)} for {args.minutes:g} min from seed {seed_value} (pid {os.getpid()})")
    while time.monotonic() < until:
        for name in surfaces:
            if time.monotonic() >= until:
                break
            for found in run_batch(name, seed_value, until, tally):
                smallest = shrink(name, seed_value, found, args.shrink_seconds) or tally.first[found]
                folder = save(smallest, found, len(tally.saved) + 1)
                if name in ("readers", "own_readers"):  # --replay runs it the same way
                    with (folder / "outcome.txt").open("a", encoding="utf-8") as file:
                        file.write("(in process)\n")
                tally.saved[found] = str(folder.relative_to(REPO))
                print(f"     saved {tally.saved[found]}", flush=True)
            seed_value += 1
        write_summary(tally, started)
    write_summary(tally, started)
    print(f"\n{tally.examples} examples, {len(tally.first)} failure classes:")
    for found in sorted(tally.first):
        print(f"  {tally.counts[found]:>4}×  {found}\n         {tally.saved.get(found, '')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
