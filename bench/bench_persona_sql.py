"""Benchmark: checking and executing persona_sql labels, with no model and no network.

1,000 synthetic episodes (3-8 persona facts a side, from a fixed seed) are labelled with scripted replies of the
kind a good model writes (an UPDATE that appends a fact to a facet of the speaker's row), one in ten of them
aimed at the wrong speaker. Two figures:

- label checks: each reply goes through what the build does with a model's reply (sqlglot parse, the sandbox
  with its authorizer and time limit, the row checks), pair after pair from the seeded table;
- validation: the validator over every episode's records (parse again, replay each label in a fresh sandbox,
  compare the tables).

    .venv/bin/python bench/bench_persona_sql.py [--episodes 1000]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gen import templating
from gen.conversation import Conversation
from gen.products.checks import Checks
from gen.products.persona import labels
from gen.products.persona.checking import Expected, check_episode
from gen.products.persona.dialogue import pairs as pairs_of
from gen.products.persona.dialogue import pseudo_dialogue
from gen.products.persona.persona_sql import Options, load_schema
from gen.products.persona.sandbox import dump, seeded_rows
from gen.templating import Templates

SPEAKERS = ("Speaker 1", "Speaker 2")
FACETS = ["pets", "hobbies", "likes", "dislikes", "occupation", "location", "family", "health", "other"]
WORDS = ["dogs", "cats", "chess", "hiking", "Oslo", "nurse", "baking", "jazz", "rain", "tea", "running", "spiders"]


def episodes(count: int, seed: int = 7) -> list[Conversation]:
    rng = random.Random(seed)
    out = []
    for number in range(count):
        personas = {s: [f"I like {rng.choice(WORDS)} {k}." for k in range(rng.randint(3, 8))] for s in SPEAKERS}
        out.append(Conversation(f"bench/{number}", SPEAKERS, (), personas, {"source_format": "bench"}))
    return out


def reply(rng: random.Random, speaker: str, text: str) -> str:
    """What the scripted model answers; one in ten names the other speaker (a label the checks refuse)."""
    target = speaker if rng.random() >= 0.1 else next(s for s in SPEAKERS if s != speaker)
    facet = rng.choice(FACETS)
    value = text.replace("'", "''")
    return f"UPDATE persona SET {facet} = COALESCE({facet} || '; ', '') || '{value}' WHERE speaker = '{target}';"


def label_all(conversations: list[Conversation], options: Options, schema) -> tuple[dict, int, int, float]:
    """Every pair's reply checked and executed in order; the records per episode, labels stored and refused."""
    rng = random.Random(11)
    schema_id = templating.template_id(options.schema_template)
    records: dict[str, list[dict]] = {}
    stored = refused = 0
    seconds = 0.0
    for conversation in conversations:
        lines = pseudo_dialogue(SPEAKERS, conversation.personas)
        rows = seeded_rows(schema, SPEAKERS, True)
        pairs = []
        for index, (first, second) in enumerate(pairs_of(lines)):
            text = reply(rng, second.speaker, second.text)
            started = time.perf_counter()
            try:
                label = labels.store(text, schema, rows, second.speaker, options.statement_time_limit_s, 6)
                statements, after, status = label.statements, label.rows_after, "stored"
                stored += 1
            except labels.LabelError:
                statements, after, status = [], rows, "rejected"
                refused += 1
            seconds += time.perf_counter() - started
            pairs.append(pair_record(conversation, index, (first, second), rows, statements, after, status, schema_id))
            rows = after
        records[conversation.conversation_id] = [pairs, episode_record(conversation, lines, pairs, rows, schema_id)]
    return records, stored, refused, seconds


def pair_record(conversation, index, pair, before, statements, after, status, schema_id) -> dict:
    first, second = pair
    return {
        "episode_id": conversation.conversation_id,
        "pair_index": index,
        "turns": [first.to_dict(), second.to_dict()],
        "target_speaker": second.speaker,
        "schema_ddl_id": schema_id,
        "table_before": dump(before),
        "label_sql": statements,
        "table_after": dump(after),
        "label_status": status,
        "reject_reason": None if status == "stored" else "refused",
        "model": "bench",
    }


def episode_record(conversation, lines, pairs, rows, schema_id) -> dict:
    return {
        "episode_id": conversation.conversation_id,
        "personas": [{"speaker": s, "facts": conversation.personas[s]} for s in SPEAKERS],
        "lines": [line.to_dict() for line in lines],
        "pairs": len(pairs),
        "rejected_pairs": [p["pair_index"] for p in pairs if p["label_status"] == "rejected"],
        "schema_ddl_id": schema_id,
        "final_table": dump(rows),
        "memory_question": None,
        "gold_answer": None,
        "retrieval_status": "none",
        "model": "bench",
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=1000)
    args = parser.parse_args()
    options = Options.model_validate({})
    schema = load_schema(options, Templates())
    conversations = episodes(args.episodes)
    load_before = os.getloadavg()[0]

    records, stored, refused, label_seconds = label_all(conversations, options, schema)
    labelled = stored + refused

    checks = Checks()
    schema_id = templating.template_id(options.schema_template)
    started = time.perf_counter()
    for conversation in conversations:
        pairs, episode = records[conversation.conversation_id]
        check_episode(conversation, pairs, [episode], Expected(schema, options, schema_id, "bench"), checks)
    validate_seconds = time.perf_counter() - started
    assert checks.passed, {k: v for k, v in checks.report().items() if v["failed"]}

    print(f"episodes {len(conversations):,}, pairs {labelled:,} ({stored:,} stored, {refused:,} refused)")
    print(f"label checks (parse, sandbox, rows): {label_seconds:.2f} s, {labelled / label_seconds:,.0f} labels/s")
    print(
        f"validation (replay of every episode): {validate_seconds:.2f} s, {labelled / validate_seconds:,.0f} labels/s"
    )
    print(f"load average before / after: {load_before:.2f} / {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
