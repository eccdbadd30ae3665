"""persona_sql run by `gen run` against a real model (SmolLM2-135M-Instruct on llama.cpp's server).

Two short episodes of MSC persona pairs (written here; 3 and 2 facts a side, so 5 + 3 = 8 pairs, worked out by
hand from the lines below). A 135M model rarely writes SQL that passes every check, so nothing here asserts how
many labels it gets right. What must hold whatever it writes: every planned pair ends in the output, stored or
rejected; every rejected pair is in rejects.jsonl with a reason and the model's raw reply (a reply the server
really sent); a rejected pair leaves the table as it was; the run's validators pass; and the requests that
reached the server (counted by a proxy, not by gen) are the requests run.json says were sent.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import read_jsonl, write_json, write_recipe
from tests.realmodel.test_products import assert_raw_replies, belongs_to, endpoint, gen_run

pytestmark = pytest.mark.realmodel

EPISODES = [
    {
        "Speaker 1": ["I have a dog named Rex.", "I work at a bakery.", "I live in Denver."],
        "Speaker 2": ["I am 30 years old.", "I love hiking.", "I have two sisters."],
    },
    {
        "Speaker 1": ["My name is Lena.", "I hate spiders."],
        "Speaker 2": ["I study chemistry.", "I play the violin."],
    },
]
PAIRS = (3 + 3 - 1) + (2 + 2 - 1)  # lines - 1 per episode


def test_a_run_of_two_episodes_accounts_for_every_pair_and_every_request(real_model, tmp_path):
    source = write_json(tmp_path / "personas.json", {"train": EPISODES})
    llm = endpoint(real_model, max_tokens=96, structured_output="off")  # the reply is SQL, not JSON
    path = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "realmodel",
            "seed": 13,
            "sources": [{"format": "msc_personas", "path": str(source)}],
            "llm": {"main": llm},
            "products": [{"type": "persona_sql", "max_reject_rate": 1.0}],  # a weak model: keep going
        },
    )

    result = gen_run(path, tmp_path / "out", tmp_path / "cache")

    assert result.returncode == 0, result.stderr
    folder = tmp_path / "out" / "realmodel"
    report = json.loads((folder / "run.json").read_text())
    assert report["validation"]["persona_sql"]["passed"]
    pairs = read_jsonl(folder / "persona_sql" / "test.jsonl")
    rejects = [r for r in read_jsonl(folder / "rejects.jsonl") if belongs_to(r, "persona_sql")]
    assert len(pairs) == PAIRS
    stored = [p for p in pairs if p["label_status"] == "stored"]
    rejected = [p for p in pairs if p["label_status"] == "rejected"]
    ids = {f"{p['episode_id']}/pair-{p['pair_index']:03d}" for p in rejected}
    assert ids == {r["item_id"] for r in rejects} and len(rejects) == len(rejected)
    assert all(p["table_after"] == p["table_before"] and p["label_sql"] == [] for p in rejected)
    assert all(p["label_sql"] and p["table_after"] != p["table_before"] for p in stored)
    assert_raw_replies(rejects, real_model.proxy.replies())
    # every request sent, a timed-out one included (calls_made leaves those out: no reply came back)
    assert real_model.proxy.count == report["llm"]["totals"]["requests"]
    assert real_model.proxy.count >= PAIRS  # every pair was asked at least once
    print(f"persona_sql on SmolLM2: {len(stored)} of {PAIRS} pairs stored, {len(rejected)} rejected")
