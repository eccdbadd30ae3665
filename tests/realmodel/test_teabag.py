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

The free run rarely gets past the summaries, so a second run pins the summaries and questions endpoints to fixed
valid replies (a grammar makes the server write exactly them) and leaves the new sessions to the model.
"""

from __future__ import annotations

import json

import pytest

from tests.conftest import read_jsonl, require_shared, write_recipe
from tests.realmodel.test_products import assert_raw_replies, belongs_to, endpoint, gen_run

pytestmark = [pytest.mark.realmodel, pytest.mark.integration]

EPISODE = "cc/msc-episode-30"
SESSIONS = 2


def pinned(real_model, reply: dict) -> dict:
    """An endpoint whose every reply is `reply` (a grammar makes the server write exactly that JSON)."""
    text = json.dumps(reply)
    grammar = 'root ::= "' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    # "off": llama.cpp's server would replace the grammar with its own for a response_format
    # room for the whole reply however the model splits it into tokens (the grammar ends it at the last character)
    return endpoint(real_model, structured_output="off", extra_params={"grammar": grammar}, max_tokens=600)


SUMMARY = {"facts": ["Speaker A is saving up for an engagement ring.", "Speaker B loves the Harry Potter rides."]}
QUESTIONS = {
    "questions": [
        {
            "asker": "Speaker A",
            "question": "How was your first trip to Universal Studios?",
            "correct_answer": "I have been there before; it is you who never went.",
            "contradicted_fact": "Speaker B already knows the park well.",
        },
        {
            "asker": "Speaker B",
            "question": "Did your girlfriend say yes at the beach?",
            "correct_answer": "I have not proposed yet; I plan to do it at Universal Studios.",
            "contradicted_fact": "Speaker A has not proposed yet.",
        },
    ]
}


def run_episode(real_model, tmp_path, llm: dict, **steps: str):
    """`gen run` of teabag on the sample episode; (run.json, teabag rows, the episode record, teabag rejects)."""
    sample = require_shared("teabag/theanine_sample/sample_dialogue.json")
    path = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "realmodel",
            "seed": 13,
            "sources": [{"format": "cc", "path": str(sample), "default_interval": "A few days after"}],
            "llm": llm,
            "products": [
                {
                    "type": "teabag",
                    "sessions": SESSIONS,
                    "session6_turns": {"min": 2, "max": 6},
                    "retries": 0,
                    "coherence": "lexical",
                    "max_reject_rate": 1.0,  # a weak model: keep going
                    **steps,
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
    return report, rows, episode, rejects


def assert_every_item_accounted_for(real_model, report, rows, episode, rejects) -> None:
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


def test_a_run_of_one_episode_accounts_for_every_item_and_every_request(real_model, tmp_path):
    llm = {"main": endpoint(real_model, max_tokens=160)}  # short replies keep the run to minutes on two cores
    assert_every_item_accounted_for(real_model, *run_episode(real_model, tmp_path, llm))


def test_new_sessions_written_by_the_model_after_pinned_summaries_and_questions(real_model, tmp_path):
    # the summaries and questions endpoints answer with fixed valid replies, so the model writes the new sessions
    llm = {
        "main": endpoint(real_model, max_tokens=240),
        "summaries": pinned(real_model, SUMMARY),
        "questions": pinned(real_model, QUESTIONS),
    }
    report, rows, episode, rejects = run_episode(
        real_model, tmp_path, llm, summary_endpoint="summaries", question_endpoint="questions"
    )

    assert episode["summaries"] == [{"session": k, **SUMMARY} for k in range(1, SESSIONS + 1)]
    assert [q["question"] for q in episode["questions"]] == [q["question"] for q in QUESTIONS["questions"]]
    steps = report["llm"]["steps"]
    assert steps["teabag/session6"]["items"] == 2  # both new sessions were asked of the model
    assert all(r["step"] == "teabag/session6" for r in rejects)
    assert_every_item_accounted_for(real_model, report, rows, episode, rejects)
