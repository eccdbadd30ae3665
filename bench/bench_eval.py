"""Benchmark for scoring and the embedding baselines (issue 14) on locomo10.

    GEN_SHARED_DATA=../shared/data .venv/bin/python bench/bench_eval.py [--repeats 3] [--keep DIR]

Builds locomo10 (log, conversations, time_queries; seed 13, donor padding to 3,000 words) into a temporary
folder with `gen run`, then times, each as the median of --repeats runs in this process:

- scoring the whole time-query set: `evaluate()` end to end (reading the dataset and a predictions file of
  30 indices for every question, checking every line, recall and F2 per test and over tests), with the
  predictions of the `recent` baseline;
- embedding its log: all-MiniLM-L6-v2 (numpy, gen/embedding.py) over every distinct response text, no cache,
  batches of 64 (responses/s and tokens/s shown; the first of the repeats also loads the model).

The machine's 1-minute load average is printed before each part: other work slows both, roughly in
proportion on two cores.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gen.embedding import MiniLM, model_folder
from gen.eval.baselines import write_baseline
from gen.eval.dataset import open_dataset
from gen.eval.score import evaluate

RECIPE = """name: locomo10
seed: 13
sources:
  - format: locomo
    path: {path}
    longest: 12
timeline:
  seconds_per_word: 0.46
  session_gap_minutes: 20
  now_offset_minutes: 50
  padding: {{mode: donor, after_minutes: 60, target_words: 3000}}
products:
  - type: log
  - type: conversations
  - type: time_queries
    max_variants_per_group: all   # every wording, as docs/scoring.md's tables were measured
"""


def build(folder: Path) -> Path:
    shared = os.environ.get("GEN_SHARED_DATA")
    corpus = Path(shared or "") / "locomo" / "locomo10.json"
    if not shared or not corpus.is_file():
        sys.exit("set GEN_SHARED_DATA to a folder with locomo/locomo10.json")
    recipe = folder / "locomo10.yaml"
    recipe.write_text(RECIPE.format(path=corpus), encoding="utf-8")
    gen = ROOT / ".venv" / "bin" / "gen"
    subprocess.run([str(gen), "run", str(recipe), "--output-dir", str(folder / "out")], check=True)
    return folder / "out" / "locomo10"


def timed(repeats: int, work) -> tuple[float, object]:
    seconds, result = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        result = work()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds), result


def bench_scoring(dataset: Path, folder: Path, repeats: int) -> None:
    predictions = folder / "recent.jsonl"
    lines = write_baseline("recent", dataset, predictions, k=30)
    print(f"load {os.getloadavg()[0]:.2f}; scoring {lines:,} predictions ({predictions.stat().st_size / 1e6:.1f} MB)")
    seconds, result = timed(repeats, lambda: evaluate(dataset, predictions))
    questions = sum(config.questions for config in result.results)  # type: ignore[attr-defined]
    print(f"score the time-query set: {seconds:.2f} s for {questions:,} questions ({questions / seconds:,.0f}/s)")


def bench_embedding(dataset: Path, repeats: int) -> None:
    log = open_dataset(dataset).log()
    texts = list(dict.fromkeys(r["text"] for responses in log.values() for r in responses))
    start = time.perf_counter()
    model = MiniLM(model_folder())
    loading = time.perf_counter() - start
    tokens = sum(sum(e.attention_mask) for e in model.tokenizer.encode_batch(texts))  # without the padding
    print(f"load {os.getloadavg()[0]:.2f}; embedding {len(texts):,} distinct responses ({tokens:,} tokens)")
    print(f"model loaded in {loading:.1f} s")
    seconds, _ = timed(repeats, lambda: model.encode(texts))
    print(f"embed the log: {seconds:.1f} s ({len(texts) / seconds:,.0f} responses/s, {tokens / seconds:,.0f} tokens/s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build into this folder and keep it (default: a temporary one)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as temporary:
        folder = args.keep or Path(temporary)
        folder.mkdir(parents=True, exist_ok=True)
        dataset = build(folder)
        bench_scoring(dataset, folder, args.repeats)
        bench_embedding(dataset, args.repeats)


if __name__ == "__main__":
    main()
