"""Anchor planning and question checks of time+content questions, without any LLM call: the part of a fully
cached `gen run` that gen itself spends on this product.

    .venv/bin/python bench/bench_anchors.py [--copies 100] [--repeats 3]

The corpus is the one bench_llm_run.py uses (renamed copies of the bundled sample, two conversations each,
every turn made unique by its copy number). Timelines are built first and not timed. Then the least CPU
time of `--repeats` runs (the modules' caches emptied before each, as in a fresh process):

* planning: anchors.select for every conversation with the product's default options (time per conversation);
* checks: question_rules.problems on one question per planned item, written from the item's speaker,
  reference phrase and the first words of its anchor (so the overlap and copied-run checks have work to do).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_llm_run import corpus

from gen.pipeline.shards import prepare
from gen.products.time_content import anchors, lexical, question_rules
from gen.products.time_content import steps as tcq
from gen.products.time_content.question_rules import problems
from gen.recipe import load_recipe
from gen.timeline import Timeline

SEED = 1


def timelines(copies: int, folder: Path) -> tuple[list[Timeline], tcq.Options]:
    recipe_path = folder / "recipe.yaml"
    data = {
        "name": "bench-anchors",
        "seed": SEED,
        "sources": [{"format": "locomo", "path": str(corpus(folder, copies))}],
        "timeline": {"padding": {"mode": "none"}},
        "llm": {"main": {"model": "none", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}},
        "products": [{"type": "time_content_questions", "per_conversation": 10}],
    }
    recipe_path.write_text(yaml.safe_dump(data))
    prepared = prepare(load_recipe(recipe_path))
    options = next(b.product.options for b in prepared.products if b.name == "time_content_questions")
    return [prepared.unit(i).stamped for i in range(len(prepared.conversations))], options


def plan(timeline: Timeline, options: tcq.Options) -> list[anchors.Slot]:
    return tcq.anchor_slots(timeline, options, random.Random(f"{SEED}/{timeline.conversation_id}/{tcq.NAME}"))


def question(item: tcq.Item) -> str:
    opening = " ".join(item.anchor.responses[0].text.split()[:6]).rstrip("?.!,")
    return f"What did {item.anchor.speaker} say {item.reference} about {opening}?"


def forget() -> None:
    """Empty the modules' caches, so that every repeat pays what a fresh `gen run` process pays."""
    for module in (anchors, question_rules):
        for value in vars(module).values():
            if callable(getattr(value, "cache_clear", None)):
                value.cache_clear()
    lexical.STEMS.clear()


def best_of(repeats: int, work) -> float:
    """The least CPU time of `repeats` runs (CPU time: on a shared machine it varies far less than wall time)."""
    times = []
    for _ in range(repeats):
        forget()
        started = time.process_time()
        work()
        times.append(time.process_time() - started)
    return min(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--copies", type=int, default=100, help="copies of the two-conversation sample")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        lines, options = timelines(args.copies, Path(tmp))
    items = [item for t in lines for item in tcq.items_for(t, options, SEED, None)]
    questions = [(question(item), item.facts) for item in items]
    planning = best_of(args.repeats, lambda: [plan(t, options) for t in lines])
    checking = best_of(
        args.repeats,
        lambda: [problems(q, facts, options.max_overlap, options.max_copied_words) for q, facts in questions],
    )
    responses = sum(len(t.responses) for t in lines)
    print(f"{len(lines)} conversations, {responses:,} responses, {len(items):,} planned questions")
    print(f"load average {os.getloadavg()[0]:.2f}; CPU seconds, best of {args.repeats}")
    print(f"planning: {planning:.2f} s, {planning / len(lines) * 1000:.1f} ms per conversation")
    print(f"checks:   {checking:.2f} s, {checking / len(questions) * 1e6:.0f} µs per question")
    return 0


if __name__ == "__main__":
    sys.exit(main())
