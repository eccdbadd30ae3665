"""teabag run by `gen run` against a real model (SmolLM2-135M-Instruct on llama.cpp's server).

The episode is the Theanine sample of the shared data (one MSC episode in the Conversation Chronicles layout),
with two sessions of history, so the run plans 2 summaries, then 1 questions call and 2 new sessions for
whatever the earlier steps accept. A 135M model rarely writes two questions with the right askers, let alone
a session that ends with one word for word, so nothing here asserts how many items pass. What must hold whatever
it writes: every summary item is in the episode record or in rejects.jsonl; the questions item is there exactly
when every summary was accepted, and is accepted or rejected; each new session is there exactly when the
questions were accepted, and is a record or a reject; every reject has a reason and the model's raw reply (a
reply the server really sent); the run's validators pass; and the requests that reached the server (counted by a
proxy, not by gen) are the requests run.json says were sent.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import read_jsonl, require_shared, write_recipe
from tests.realmodel.test_products import assert_raw_replies, belongs_to, endpoint, gen_run

pytestmark = [pytest.mark.realmodel, pytest.mark.integration]

EPISODE = "cc/msc-episode-30"
SESSIONS = 2


def test_a_run_of_one_episode_accounts_for_every_item_and_every_request(real_model, tmp_path):
    sample = require_shared("teabag/theanine_sample/sample_dialogue.json")
    llm = endpoint(real_model, max_tokens=160)  # short replies keep the run to minutes on two shared cores
    path = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "realmodel",
            "seed": 13,
            "sources": [{"format": "cc", "path": str(sample), "default_interval": "A few days after"}],
            "llm": {"main": llm},
            "products": [
                {
                    "type": "teabag",
                    "sessions": SESSIONS,
                    "session6_turns": {"min": 2, "max": 6},
                    "retries": 0,
                    "coherence": "lexical",
                    "max_reject_rate": 1.0,  # a weak model: keep going
                }
            ],
        },
    )

    result = gen_run(path, tmp_path / "out", tmp_path / "cache")

    assert result.returncode == 0, result.stderr
    folder = tmp_path / "out" / "realmodel"
    report = json.loads((folder / "run.json").read_text())
    assert report["validation"]["teabag"]["passed"], report["validation"]["teabag"]
    rows = read_jsonl(folder / "teabag" / "test.jsonl")
    [episode] = read_jsonl(folder / "teabag_summaries" / "test.jsonl")
    rejects = [r for r in read_jsonl(folder / "rejects.jsonl") if belongs_to(r, "teabag")]
    rejected = [r["item_id"] for r in rejects]
    assert len(set(rejected)) == len(rejected)

    summaries = [f"{EPISODE}/summary-{k}" for k in range(1, SESSIONS + 1)]
    summarised = len(episode["summaries"]) == SESSIONS
    assert summarised == (not set(summaries) & set(rejected))
    if not summarised:  # some summary was rejected; the others may be too
        assert episode["rejected_step"] == "summaries" and not rows
    asked = bool(episode["questions"])
    assert (f"{EPISODE}/questions" in rejected) == (summarised and not asked)
    written = [row["question_id"] for row in rows]
    staged = [f"{EPISODE}/teabag-{n}" for n in (1, 2)]
    if asked:
        assert sorted(written + [i for i in rejected if i in staged]) == staged
    else:
        assert not written and not set(staged) & set(rejected)
    assert episode["teabag_records"] == len(rows)
    assert_raw_replies(rejects, real_model.proxy.replies())
    # every request sent, a timed-out one included (calls_made leaves those out: no reply came back)
    assert real_model.proxy.count == report["llm"]["totals"]["requests"]
    assert real_model.proxy.count >= SESSIONS  # every summary was asked at least once
    print(
        f"teabag on SmolLM2: summaries {'accepted' if summarised else 'rejected'}, questions "
        f"{'accepted' if asked else 'not accepted'}, {len(rows)} of 2 new sessions written"
    )
