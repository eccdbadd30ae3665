"""Calls that ask for log-probabilities: a one-token chat answer with its alternatives (how a label's
probabilities are read), and a text scored by /completions with echo (how a language model rates a text). Both
come back in the outcome, are cached with the reply, and replay offline with no request."""

from __future__ import annotations

import json
import sqlite3

from gen.llm import Task
from gen.llm.cache.store import Cache, CachedReply
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.llm.test_engine import make_engine

LABEL_LOGPROBS = {
    "content": [
        {
            "token": "contradiction",
            "logprob": -0.1,
            "top_logprobs": [{"token": "contradiction", "logprob": -0.1}, {"token": "neutral", "logprob": -2.4}],
        }
    ]
}
ECHO_LOGPROBS = {"tokens": ["I", " fix", " cars"], "token_logprobs": [None, -3.0, -1.5], "text_offset": [0, 1, 5]}


def script(request):
    if "prompt" in request.body:
        return Reply(request.body["prompt"] + ".", finish_reason="length", logprobs=ECHO_LOGPROBS)
    return Reply("contradiction", finish_reason="length", logprobs=LABEL_LOGPROBS)


def tasks() -> list[Task]:
    return [
        Task("label", "main", "premise / hypothesis", logprobs=5, max_tokens=1),
        Task("fluency", "main", "I fix cars", logprobs=1, max_tokens=1, score_text=True),
    ]


def test_logprobs_come_back_are_cached_and_replay_offline(api_key, cache_dir):
    with FakeOpenAI(script) as server:
        with make_engine(server, cache_dir, max_tokens=300, temperature=0.0) as engine:
            label, fluency = engine.run_step("quality", tasks())
        bodies = [r.body for r in server.requests]
        paths_hit = server.count
        with make_engine(server, cache_dir, max_tokens=300, temperature=0.0, offline=True) as engine:
            again = engine.run_step("quality", tasks())
        assert server.count == paths_hit == 2  # the replay asked nothing
    chat, completion = sorted(bodies, key=lambda body: "prompt" in body)
    # the task's own cap wins over the endpoint's 300, and reaching it is not a truncation
    assert chat == {
        "model": "fake-model",
        "messages": [{"role": "user", "content": "premise / hypothesis"}],
        "logprobs": True,
        "top_logprobs": 5,
        "temperature": 0.0,
        "max_tokens": 1,
    }
    assert completion == {
        "model": "fake-model",
        "prompt": "I fix cars",
        "echo": True,
        "logprobs": 1,
        "temperature": 0.0,
        "max_tokens": 1,
    }
    assert (label.ok, label.text, label.logprobs) == (True, "contradiction", LABEL_LOGPROBS)
    assert (fluency.ok, fluency.text, fluency.logprobs) == (True, "I fix cars.", ECHO_LOGPROBS)
    assert [(o.cached, o.logprobs) for o in again] == [(True, LABEL_LOGPROBS), (True, ECHO_LOGPROBS)]


def test_a_cache_written_before_logprobs_were_kept_gains_the_column(tmp_path):
    path = tmp_path / "llm.sqlite"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE replies (key TEXT PRIMARY KEY, text TEXT NOT NULL, finish_reason TEXT, input_tokens INTEGER, "
        "output_tokens INTEGER, model TEXT, created REAL) WITHOUT ROWID"
    )
    old.execute("INSERT INTO replies VALUES ('k', 'old reply', 'stop', 3, 2, 'm', 0)")
    old.commit()
    old.close()
    cache = Cache(path)
    cache.put("new", CachedReply("new reply", "stop", 1, 1, "m", {"content": []}))
    cache.flush()
    assert cache.get("k") == CachedReply("old reply", "stop", 3, 2, "m", None)
    assert cache.get("new") == CachedReply("new reply", "stop", 1, 1, "m", {"content": []})
    cache.close()
    stored = sqlite3.connect(path).execute("SELECT logprobs FROM replies WHERE key = 'new'").fetchone()[0]
    assert json.loads(stored) == {"content": []}


def test_a_reply_cut_at_the_endpoint_cap_is_still_truncated(api_key, cache_dir):
    cut = FakeOpenAI(lambda request: Reply("cut", finish_reason="length"))
    with cut as server, make_engine(server, cache_dir, max_tokens=3) as engine:
        (outcome,) = engine.run_step("plain", [Task("t", "main", "say", logprobs=2)], max_reject_rate=None)
    assert (outcome.ok, outcome.kind) == (False, "truncated")
