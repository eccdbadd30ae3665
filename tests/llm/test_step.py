"""gen.llm.step against the fake OpenAI-compatible server: rounds, samples, rejects, verify, reject rate, plan.

The "product" here asks for one word that starts with the same letter as a topic word. The fake model's
answers are scripted per (topic, sample index); every expectation below is worked out by hand from those
tables. The endpoint has max_concurrency 1, so the server sees the requests in the order the step sends them.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from pydantic import BaseModel

from gen.errors import GenError, Stopped
from gen.llm import Engine, RunSettings, Task
from gen.llm.step import Accepted, CheckedStep, Problem, StepPolicy, Verify, most_calls, plan, run
from tests.fakes.openai_server import FakeOpenAI

SEED = 100  # the endpoint's seed: the engine sends seed + sample, so the script can tell the rounds apart


class Word(BaseModel):
    word: str


class Verdict(BaseModel):
    ok: bool
    why: str = ""


@dataclass(frozen=True)
class Topic:
    id: str
    name: str


class Model:
    """The fake model: a word per (topic, sample); verdicts per word (yes unless listed); a log of requests."""

    def __init__(self, words: dict[str, list[str]], verdicts: dict[str, str] | None = None, broken=()) -> None:
        self.words, self.verdicts, self.broken = words, verdicts or {}, set(broken)
        self.seen: list[tuple[str, object]] = []

    def __call__(self, request):
        prompt = request.messages[0]["content"]
        if prompt.startswith("Check the word: "):
            word = prompt.removeprefix("Check the word: ")
            self.seen.append(("verify", word))
            why = self.verdicts.get(word)
            return {"ok": why is None, "why": why or ""}
        topic = prompt.split()[-1]
        self.seen.append((topic, request.body["seed"] - SEED))
        if topic in self.broken:
            return "Here is a nice word for you!"  # never JSON, not even in the correction round
        return {"word": self.words[topic][request.body["seed"] - SEED]}


def word_task(topic: Topic, sample: int) -> Task:
    return Task(topic.id, "main", f"Write one word that starts like {topic.name}", Word, sample=sample)


def word_problems(topic: Topic, word: str) -> list[Problem]:
    problems = []
    if word != word.lower():
        problems.append(Problem("not lowercase", repr(word)))
    if word[:1].lower() != topic.name[0]:
        problems.append(Problem("wrong letter", f"{word!r} does not start with {topic.name[0]!r}"))
    return problems


def words_step(verify: bool = False, **changes) -> CheckedStep[Topic]:
    checker = Verify(
        "words/verify",
        task=lambda topic, word: Task(topic.id, "main", f"Check the word: {word}", Verdict),
        judge=lambda topic, verdict: None if verdict.ok else Problem("verifier disagrees", verdict.why),
    )
    fields = dict(
        name="words",
        task=word_task,
        check=word_problems,
        item_id=lambda topic: topic.id,
        prepare=lambda topic, reply: reply.word,
        verify=checker if verify else None,
    )
    return CheckedStep(**{**fields, **changes})


def engine_for(server, cache_dir, plan_only=False):
    endpoint = {
        "model": "fake-model",
        "base_url": server.base_url,
        "api_key_env": "GEN_TEST_API_KEY",
        "max_concurrency": 1,
        "seed": SEED,
        "max_retries": 0,
        "timeout_s": 5,
        "structured_output": "json_schema",
    }
    return Engine({"main": endpoint}, RunSettings(cache_dir=cache_dir, progress="off"), plan_only=plan_only)


def topics(*names: str) -> list[Topic]:
    return [Topic(f"t-{name}", name) for name in names]


def test_good_words_are_kept_bad_ones_written_again_with_the_next_sample_and_the_rest_rejected(api_key, cache_dir):
    model = Model(
        {
            "apple": ["avocado"],
            "banana": ["kiwi", "berry"],
            "cherry": ["plum", "Peach", "fig"],
            "date": ["fig", "Lime", "durian"],
        }
    )
    with FakeOpenAI(model) as server, engine_for(server, cache_dir) as engine:
        policy = StepPolicy(retries=2, max_reject_rate=0.25)  # floor(0.25 × 4 items) = 1 reject allowed
        result = run(words_step(), engine, topics("apple", "banana", "cherry", "date"), policy)
        requests = server.count
        stats = engine.report()["steps"]["words"]
        engine_rejects = list(engine.rejects)

    assert result.accepted == {
        "t-apple": Accepted("avocado", 0, '{"word": "avocado"}'),
        "t-banana": Accepted("berry", 1, '{"word": "berry"}'),
        "t-date": Accepted("durian", 2, '{"word": "durian"}'),
    }
    assert list(result.accepted) == ["t-apple", "t-banana", "t-date"]  # item order, not the order accepted
    # round 0 for all four, round 1 for the three that failed, round 2 for the two still failing
    assert model.seen == [
        ("apple", 0),
        ("banana", 0),
        ("cherry", 0),
        ("date", 0),
        ("banana", 1),
        ("cherry", 1),
        ("date", 1),
        ("cherry", 2),
        ("date", 2),
    ]
    # four items, one rejected (cherry), whatever the nine calls it took; no call failed
    assert requests == 9 and (stats["items"], stats["ok"], stats["rejected"]) == (4, 3, 1)
    assert (stats["calls"], stats["calls_ok"], stats["calls_rejected"]) == (9, 9, 0)
    assert result.rejects == [
        {
            "item_id": "t-cherry",
            "reason": "wrong letter: 'fig' does not start with 'c' (after 3 attempts)",
            "raw_text": '{"word": "fig"}',
            "attempts": [
                {"sample": 0, "value": "plum", "problems": ["wrong letter: 'plum' does not start with 'c'"]},
                {
                    "sample": 1,
                    "value": "Peach",
                    "problems": ["not lowercase: 'Peach'", "wrong letter: 'Peach' does not start with 'c'"],
                },
                {"sample": 2, "value": "fig", "problems": ["wrong letter: 'fig' does not start with 'c'"]},
            ],
        }
    ]
    assert result.failed == [] and engine_rejects == []


def test_fewer_retries_give_up_sooner(api_key, cache_dir):
    model = Model({"banana": ["kiwi", "berry"], "apple": ["avocado"]})
    with FakeOpenAI(model) as server, engine_for(server, cache_dir) as engine:
        result = run(words_step(), engine, topics("banana", "apple"), StepPolicy(retries=0, max_reject_rate=0.5))
    assert model.seen == [("banana", 0), ("apple", 0)]
    assert list(result.accepted) == ["t-apple"]
    assert [r["reason"] for r in result.rejects] == ["wrong letter: 'kiwi' does not start with 'b' (after 1 attempt)"]


def test_a_call_that_fails_in_the_engine_is_left_to_the_engine(api_key, cache_dir):
    model = Model(
        {"apple": ["avocado"], "banana": ["kiwi", "bean"], "cherry": [], "date": ["dill"], "elder": ["elm"]},
        broken={"cherry"},
    )
    with FakeOpenAI(model) as server, engine_for(server, cache_dir) as engine:
        result = run(words_step(), engine, topics("apple", "banana", "cherry", "date", "elder"))
        engine_rejects = list(engine.rejects)
        requests = server.count
    assert list(result.accepted) == ["t-apple", "t-banana", "t-date", "t-elder"]
    assert result.failed == ["t-cherry"] and result.rejects == []
    # cherry: its call and the engine's one correction round, then nothing more; banana: rounds 0 and 1
    assert model.seen == [
        ("apple", 0),
        ("banana", 0),
        ("cherry", 0),
        ("cherry", 0),
        ("date", 0),
        ("elder", 0),
        ("banana", 1),
    ]
    assert requests == 7
    assert [(r["step"], r["item_id"], r["kind"]) for r in engine_rejects] == [("words", "t-cherry", "parse")]


def test_verify_confirms_or_sends_the_item_round_again(api_key, cache_dir):
    model = Model(
        {"apple": ["apricot", "avocado"], "banana": ["Bagel", "berry"], "cherry": ["cod", "corn", "cress"]},
        verdicts={"apricot": "too sour", "cod": "a fish", "corn": "a grain", "cress": "a herb"},
    )
    step = words_step(verify=True, describe=lambda word: {"word": word})
    with FakeOpenAI(model) as server, engine_for(server, cache_dir) as engine:
        result = run(step, engine, topics("apple", "banana", "cherry"), StepPolicy(retries=2, max_reject_rate=0.5))
        report = engine.report()["steps"]
        requests = server.count
    # every round: the generations, then the verify calls for the words that passed the checks; the next
    # round takes the items back in item order (banana failed a check, apple and cherry the verifier)
    assert model.seen == [
        ("apple", 0),
        ("banana", 0),
        ("cherry", 0),
        ("verify", "apricot"),
        ("verify", "cod"),
        ("apple", 1),
        ("banana", 1),
        ("cherry", 1),
        ("verify", "avocado"),
        ("verify", "berry"),
        ("verify", "corn"),
        ("cherry", 2),
        ("verify", "cress"),
    ]
    assert requests == 13 and (report["words"]["calls"], report["words/verify"]["calls"]) == (7, 6)
    # the verify calls serve the items of "words": three items, one rejected; the verify step has none
    assert [report["words"][k] for k in ("items", "ok", "rejected")] == [3, 2, 1]
    assert [report["words/verify"][k] for k in ("items", "ok", "rejected")] == [0, 0, 0]
    assert {item: (a.value, a.sample) for item, a in result.accepted.items()} == {
        "t-apple": ("avocado", 1),
        "t-banana": ("berry", 1),
    }
    assert result.rejects == [
        {
            "item_id": "t-cherry",
            "reason": "verifier disagrees: a herb (after 3 attempts)",
            "raw_text": '{"word": "cress"}',
            "attempts": [
                {"sample": 0, "word": "cod", "problems": ["verifier disagrees: a fish"]},
                {"sample": 1, "word": "corn", "problems": ["verifier disagrees: a grain"]},
                {"sample": 2, "word": "cress", "problems": ["verifier disagrees: a herb"]},
            ],
        }
    ]


def test_a_stop_during_verify_keeps_a_reject_for_every_item_it_left_unconfirmed(api_key, cache_dir):
    # every word passes its checks; two of the five verify replies are not JSON, twice (correction included):
    # their failed calls end 2 of the 5 items, past floor(0.2 × 5) = 1, so the engine stops the run inside the
    # verify round (the endpoint takes one request at a time: apple, banana, cherry, date; elder never)
    words = {"apple": ["avocado"], "banana": ["berry"], "cherry": ["cress"], "date": ["dill"], "elder": ["elm"]}

    class BrokenVerifier(Model):
        def __call__(self, request):
            if request.messages[0]["content"] in ("Check the word: berry", "Check the word: dill"):
                return "I think so!"
            return super().__call__(request)

    step = words_step(verify=True, describe=lambda word: {"word": word})
    with FakeOpenAI(BrokenVerifier(words)) as server, engine_for(server, cache_dir) as engine:
        with pytest.raises(Stopped) as info:
            run(step, engine, topics(*words), StepPolicy(retries=2))
        engine_rejects = [(r["step"], r["item_id"], r["kind"]) for r in engine.rejects]
        fates = engine.report()["steps"]["words"]
    # one line per item: the two whose verify call failed are the engine's, the three left unconfirmed the step's
    assert engine_rejects == [("words/verify", "t-banana", "parse"), ("words/verify", "t-date", "parse")]
    step_rejects = {r["item_id"]: r for r in info.value.rejects if "attempts" in r}
    assert sorted(step_rejects) == ["t-apple", "t-cherry", "t-elder"]
    assert [fates[k] for k in ("items", "ok", "rejected")] == [5, 0, 5]
    assert step_rejects["t-apple"]["reason"] == (
        "passed its checks; the run stopped before it was verified (after 1 attempt)"
    )
    assert step_rejects["t-apple"]["attempts"] == [{"sample": 0, "word": "avocado", "problems": []}]


def test_check_rejects_count_toward_max_reject_rate_with_the_engine_wording(api_key, cache_dir):
    # five items, no retries: five generation calls allow floor(0.2 × 5) = 1 item given up on
    words = {"apple": ["avocado"], "banana": ["kiwi"], "cherry": ["carrot"], "date": ["lime"], "elder": ["elm"]}
    with (
        FakeOpenAI(Model(words)) as server,
        engine_for(server, cache_dir / "a") as engine,
        pytest.raises(GenError) as info,
    ):
        run(words_step(), engine, topics(*words), StepPolicy(retries=0))
    assert str(info.value) == (
        "step words: max_reject_rate: stopped: 2 of 5 items rejected, more than max_reject_rate 20% allows; by kind: "
        "wrong letter ×2; see the run's rejects for reasons and raw replies (expected fewer failures (check the "
        "prompt, the parser and the endpoint), or a higher max_reject_rate)"
    )

    # an engine failure and a check reject are two items given up on just the same
    fixed = {**words, "date": ["dill"]}
    with (
        FakeOpenAI(Model(fixed, broken={"cherry"})) as server,
        engine_for(server, cache_dir / "b") as engine,
        pytest.raises(GenError, match="2 of 5 items rejected") as info,
    ):
        run(words_step(), engine, topics(*words), StepPolicy(retries=0))
    assert "by kind: parse ×1, wrong letter ×1;" in str(info.value)

    # within the limit, or without one, the step returns its rejects
    with FakeOpenAI(Model({**fixed, "fig": ["grape"]})) as server, engine_for(server, cache_dir / "c") as engine:
        within = run(words_step(), engine, topics(*words), StepPolicy(retries=0))
        unlimited = run(
            words_step(name="again"), engine, topics(*words, "fig"), StepPolicy(retries=0, max_reject_rate=None)
        )
    assert [r["item_id"] for r in within.rejects] == ["t-banana"]
    assert [r["item_id"] for r in unlimited.rejects] == ["t-banana", "t-fig"]  # 2 of 6: past 20%, no limit


def test_the_policy_rate_also_reaches_the_engine_which_stops_a_round_early(api_key, cache_dir):
    words = {"apple": ["avocado"], "banana": [], "cherry": [], "date": ["dill"], "elder": ["elm"]}
    broken = {"banana", "cherry"}
    with (
        FakeOpenAI(Model(words, broken=broken)) as server,
        engine_for(server, cache_dir / "a") as engine,
        pytest.raises(GenError, match="2 of 5 items rejected"),
    ):
        run(words_step(), engine, topics(*words), StepPolicy(retries=0))
    assert server.count == 1 + 2 + 2  # apple, then banana and cherry with their correction rounds: stopped there
    with FakeOpenAI(Model(words, broken=broken)) as server, engine_for(server, cache_dir / "b") as engine:
        result = run(words_step(), engine, topics(*words), StepPolicy(retries=0, max_reject_rate=None))
    assert result.failed == ["t-banana", "t-cherry"] and list(result.accepted) == ["t-apple", "t-date", "t-elder"]


def test_plan_gives_the_first_round_and_a_bound_over_every_round(api_key, cache_dir):
    model = Model({"apple": ["avocado"], "banana": ["kiwi", "berry"], "cherry": ["corn"]})
    items = topics("apple", "banana", "cherry")
    with FakeOpenAI(model) as server:
        with engine_for(server, cache_dir) as engine:
            before, bound = plan(words_step(), engine, items, StepPolicy(retries=2))
            assert server.count == 0  # planning calls nothing
            run(words_step(), engine, items[:1])
            after, _ = plan(words_step(), engine, items, StepPolicy(retries=2))
        with engine_for(server, cache_dir, plan_only=True) as engine:
            planned = run(words_step(), engine, items)  # uncached items end, but are no failures
    assert (before.items, before.calls_needed, before.calls_cached) == (3, 3, 0)
    assert (after.calls_needed, after.calls_cached) == (2, 1)
    assert bound == 3 * 3 * 2  # 3 items × 3 rounds × (1 call + 1 correction round)
    assert most_calls(words_step(verify=True), 3, StepPolicy(retries=2)) == 3 * 3 * 2 * 2
    assert most_calls(words_step(), 10, StepPolicy(retries=0)) == 10 * 1 * 2
    assert list(planned.accepted) == ["t-apple"] and planned.failed == ["t-banana", "t-cherry"]
    assert planned.rejects == []


def test_policy_and_item_ids_are_checked(api_key, cache_dir):
    with pytest.raises(ValueError, match="retries"):
        StepPolicy(retries=-1)
    with pytest.raises(ValueError, match="max_reject_rate"):
        StepPolicy(max_reject_rate=1.5)
    with (
        FakeOpenAI(Model({})) as server,
        engine_for(server, cache_dir) as engine,
        pytest.raises(ValueError, match="'t-apple' appears twice"),
    ):
        run(words_step(), engine, [*topics("apple"), *topics("apple")])
    assert str(Problem("wrong letter", "'x'")) == "wrong letter: 'x'"
