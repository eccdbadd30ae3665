"""When a step reads the cache: its items' keys once when it starts, then only the keys that can have come since
(a key put by this run meanwhile, a correction round's key), never once more per request it sends."""

from __future__ import annotations

from gen.llm import Task
from gen.llm.cache.store import CachedReply, Recent
from tests.fakes.openai_server import FakeOpenAI
from tests.llm.test_engine import Summary, make_engine, run_twice, summary_script, tasks_for


def counting_reads(engine, monkeypatch):
    reads: list[str] = []
    get = engine.cache.get

    def counted(key):
        reads.append(key)
        return get(key)

    monkeypatch.setattr(engine.cache, "get", counted)
    return reads


def test_recent_knows_the_keys_put_after_a_count_and_says_so_when_it_forgot():
    recent = Recent(size=3)
    recent.add("a")
    count = recent.count
    assert not recent.since(count, "a") and not recent.since(count, "b")
    recent.add("b")
    assert recent.since(count, "b") and not recent.since(count, "a")
    recent.add("a")  # put again: after the count now
    assert recent.since(count, "a")
    for key in "cde":  # "b" and "a" leave the window, with puts after the count among them
        recent.add(key)
    assert recent.since(count, "b") and recent.since(count, "never put")
    assert not recent.since(recent.count, "e")


def test_a_step_of_misses_does_not_read_the_cache_again_for_each_request(api_key, cache_dir, monkeypatch):
    texts = [f"topic{i} words" for i in range(30)]
    with FakeOpenAI(summary_script) as server, make_engine(server, cache_dir) as engine:
        reads = counting_reads(engine, monkeypatch)
        outcomes = engine.run_step("s", tasks_for(texts))
        assert server.count == 30
    assert reads == []
    assert [o.value.topic for o in outcomes] == [f"topic{i}" for i in range(30)]


def test_a_key_stored_while_the_step_runs_is_read_from_the_cache(api_key, cache_dir, monkeypatch):
    """One request at a time: the second of two identical tasks starts after the first was stored."""
    with FakeOpenAI(summary_script) as server, make_engine(server, cache_dir, max_concurrency=1) as engine:
        reads = counting_reads(engine, monkeypatch)
        outcomes = engine.run_step("s", [Task(f"dup-{i}", "main", "topicQ same", Summary) for i in range(2)])
        assert server.count == 1
    assert len(reads) == 1 and [o.cached for o in outcomes] == [False, True]
    assert engine.report()["steps"]["s"]["calls_cached"] == 1


def test_a_key_another_step_stored_after_this_one_started_is_found(api_key, cache_dir):
    """A key put between a step's start and its request (here by hand, as another lane would) is not sent."""
    with FakeOpenAI(summary_script) as server, make_engine(server, cache_dir, max_concurrency=1) as engine:
        tasks = tasks_for(["topicA one", "topicB two"])
        first_request = engine._attempts.answer

        async def answer_then_store(run, ep, body, **kw):
            if server.count == 0:  # while the first item is on its way, another step stores the second's reply
                second = next(p for p in run.prepared if p.index == 1)
                engine.cache.put(second.key, CachedReply('{"topic": "stored", "words": 2}', "stop", 1, 1))
            return await first_request(run, ep, body, **kw)

        engine._attempts.answer = answer_then_store
        outcomes = engine.run_step("s", tasks)
        assert server.count == 1
    assert [o.value.topic for o in outcomes] == ["topicA", "stored"]


def test_correction_rounds_are_read_from_the_cache_on_a_re_run(api_key, cache_dir):
    def script(request):
        return {"topic": "fixed", "words": 1} if request.is_correction else "not json"

    texts = ["topicC one", "topicD two"]
    with FakeOpenAI(script) as server:
        first, again, _, (calls, _) = run_twice(server, cache_dir, tasks_for(texts))
        assert calls == 4 and server.count == calls
    assert [o.value for o in again] == [o.value for o in first] and all(o.corrected and o.cached for o in again)
