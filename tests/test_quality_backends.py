"""quality_labels' model-backed parts: R1 from an NLI endpoint's label log-probabilities, R3.1 from a language
model's log-probabilities of the reply's own tokens (/completions with echo), PC over the reply-fact pairs; each
worked out by hand against a fake OpenAI-compatible server, replayed offline with no request, and a tampered
probability caught by the validator. The stand-in encoder of test_quality_labels keeps the run light."""

from __future__ import annotations

import json
import math
import re

import pytest

from gen.llm.config import RunSettings
from gen.products.quality.signals import nli_counts, pc, persona_consistency, relative_pc
from gen.products.quality.steps import label_probabilities, mean_logprob
from tests.conftest import read_jsonl, write_recipe
from tests.fakes.openai_server import FakeOpenAI, Reply
from tests.test_quality_labels import bag_of_words  # noqa: F401  (the fixture)

# --- the arithmetic ------------------------------------------------------------------------------------


def test_the_table_4_shares_give_pc_96_36_and_rpc_is_relative_to_the_human_replies():
    # 11.14 % entailed, 1.82 % contradicted, 87.04 % neutral reply-fact pairs (out of 10,000)
    assert pc(1114, 182, 8704) == pytest.approx(96.36)
    assert nli_counts(["entailment", "neutral", "neutral", "contradiction"]) == (1, 1, 2)
    assert pc(0, 0, 0) is None
    # rPC: 1 is as consistent as the human replies; 2 points of PC above them is 1.02
    assert relative_pc(96.36, 94.36) == pytest.approx(1.02)
    assert relative_pc(90.0, 90.0) == 1.0


def test_r1_is_entailment_less_twice_contradiction_over_the_facts():
    assert persona_consistency([0.7, 0.1], [0.2, 0.05]) == pytest.approx(0.8 - 2 * 0.25)


def alternatives(*pairs: tuple[str, float]) -> dict:
    top = [{"token": token, "logprob": math.log(p)} for token, p in pairs]
    return {"content": [{"token": pairs[0][0], "logprob": top[0]["logprob"], "top_logprobs": top}]}


def test_label_probabilities_come_from_the_first_tokens_alternatives():
    found = label_probabilities(alternatives(("contr", 0.6), (" Neutral", 0.2), ("ent", 0.1), ("The", 0.1)))
    assert found == pytest.approx({"entailment": 0.1 / 0.9, "contradiction": 0.6 / 0.9, "neutral": 0.2 / 0.9})
    assert label_probabilities(alternatives(("The", 0.5), ("A", 0.4))) is None  # no label among them
    assert label_probabilities(None) is None
    # a model that starts "Entail..." or " entailment", or opens with a line break or "The" and keeps the labels
    # among its alternatives, still gives a label
    assert label_probabilities(alternatives(("Entail", 0.5), (" neutral", 0.25))) == pytest.approx(
        {"entailment": 2 / 3, "contradiction": 0.0, "neutral": 1 / 3}
    )
    found = label_probabilities(alternatives(("\n", 0.5), ("The", 0.2), (" entailment", 0.1), ("Contr", 0.1)))
    assert found == pytest.approx({"entailment": 0.5, "contradiction": 0.5, "neutral": 0.0})


def test_the_mean_log_probability_covers_only_the_replys_tokens():
    echoed = {"text_offset": [0, 4, 8, 11, 16], "token_logprobs": [None, -1.0, -2.0, -4.0, -9.0]}
    assert mean_logprob(echoed, 8, 16) == pytest.approx(-3.0)  # the tokens at 8 and 11; 16 is the generated one
    assert mean_logprob(echoed, 0, 4) is None  # the first token has no log-probability
    assert mean_logprob(None, 0, 4) is None


def test_the_replys_first_token_counts_when_it_starts_with_the_separators_space():
    # "Ann: Hi\nBob: Sure thing" as a BPE tokenizer cuts it: the space before a word is the word's; Bob's reply
    # starts at 13 and the token " Sure" at 12 (the separator's space), " thing" at 17, then one generated token
    prompt = "Ann: Hi\nBob: Sure thing"
    tokens = ["Ann", ":", " Hi", "\n", "Bob", ":", " Sure", " thing", " x"]
    offsets = [0, 3, 4, 7, 8, 11, 12, 17, 23]
    assert "".join(tokens) == prompt + " x" and [sum(map(len, tokens[:k])) for k in range(len(tokens))] == offsets
    echoed = {"text_offset": offsets, "token_logprobs": [None, -0.5, -3.0, -0.2, -1.0, -0.1, -2.0, -1.0, -7.0]}
    assert mean_logprob(echoed, 13, 23) == pytest.approx((-2.0 - 1.0) / 2)  # " Sure" and " thing"
    # a one-word reply "Yes" is one token, " Yes", that starts with the separator: it gets a value
    one_word = {"text_offset": [0, 3, 4, 8], "token_logprobs": [None, -0.5, -1.5, -9.0]}  # "Bob", ":", " Yes", gen
    assert mean_logprob(one_word, 5, 8) == pytest.approx(-1.5)
    # a space that is a token of its own holds none of the reply: it does not count
    spaced = {
        "text_offset": [0, 3, 4, 5, 8],
        "token_logprobs": [None, -0.5, -4.0, -1.5, -9.0],
    }  # "Bob", ":", " ", "Yes"
    assert mean_logprob(spaced, 5, 8) == pytest.approx(-1.5)


# --- a run against a fake endpoint ---------------------------------------------------------------------

PERSONAS = [["I am a priest.", "I drink tea every morning."], ["I have two cats."]]
PREVIOUS = ["Good morning! Tea or coffee?", "Coffee for me, my cats woke me early."]
DIALOG = ["I work as a mechanic these days.", "Fixing cars must be tiring.", "It is, but I love tea breaks.", "Sure."]
LIKELY = {  # (a fact word, a reply word) -> the label the fake NLI model leans to, and how much
    ("priest", "mechanic"): ("contr", 0.8),
    ("tea", "tea"): ("ent", 0.7),
}


def nli_answer(text: str) -> Reply:
    fact = re.search(r"What we know about [^:]+: (.*)", text)[1]
    reply = re.search(r"What [^:]+ says: (.*)", text)[1]
    token, p = next(
        (lean for (a, b), lean in LIKELY.items() if a in fact.lower() and b in reply.lower()), ("neutral", 0.6)
    )
    others = [t for t in ("contr", "ent", "neutral") if t != token]
    top = [(token, p), (others[0], (1 - p) / 2), (others[1], (1 - p) / 4), ("So", (1 - p) / 4)]
    if token == "neutral":  # the model opens with "So": no label word, but the labels are among the alternatives
        top = [top[3], *top[:3]]
    return Reply(top[0][0], finish_reason="length", logprobs=alternatives(*top))


def word_logprob(word: str) -> float:
    return -len(word.strip()) / 10


def echo(prompt: str) -> Reply:
    """Each word with the white space before it is a token (as a BPE tokenizer cuts text), whose log-probability is
    minus a tenth of the word's length."""
    words = list(re.finditer(r"\s*\S+", prompt))
    logprobs = {
        "tokens": [w[0] for w in words],
        "text_offset": [w.start() for w in words],
        "token_logprobs": [None] + [word_logprob(w[0]) for w in words[1:]],
    }
    return Reply(prompt + " x", finish_reason="length", logprobs=logprobs)


def script(request):
    return echo(request.body["prompt"]) if "prompt" in request.body else nli_answer(request.last_user)


def episode_recipe(tmp_path, product: dict, llm: dict | None = None):
    """A recipe over one MSC episode (two sessions, persona facts for both speakers) and quality_labels."""
    record = {
        "metadata": {"initial_data_id": "e1"},
        "previous_dialogs": [{"dialog": [{"text": t} for t in PREVIOUS], "time_num": 2, "time_unit": "days"}],
        "dialog": [{"text": t} for t in DIALOG],
        "personas": PERSONAS,
    }
    source = tmp_path / "msc.jsonl"
    source.write_text(json.dumps(record) + "\n")
    return write_recipe(
        tmp_path / "q.yaml",
        {
            "name": "q",
            "sources": [{"format": "msc", "path": str(source)}],
            "timeline": {"padding": {"mode": "none"}},
            **({"llm": llm} if llm else {}),
            "products": [{"type": "quality_labels", **product}],
        },
    )


def quality_recipe(tmp_path, base_url: str):
    endpoint = {"model": "fake-model", "base_url": base_url, "api_key_env": None, "temperature": 0.0}
    product = {"nli_endpoint": "nli", "lm_endpoint": "lm"}
    return episode_recipe(tmp_path, product, {"nli": endpoint, "lm": endpoint})


def run_once(recipe_path, out, cache_dir, offline=False):
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from gen.recipe import load_recipe

    settings = RunSettings(cache_dir=cache_dir, progress="off", offline=offline)
    return run(load_recipe(recipe_path), RunOptions(output_dir=out, llm=settings))


def test_r1_r3_1_and_pc_worked_out_by_hand_and_replayed_offline(tmp_path, bag_of_words):  # noqa: F811
    with FakeOpenAI(script) as server:
        recipe = quality_recipe(tmp_path, server.base_url)
        folder = run_once(recipe, tmp_path / "out", tmp_path / "cache")
        asked = server.count
        again = run_once(recipe, tmp_path / "again", tmp_path / "cache", offline=True)
        assert server.count == asked  # the replay asked nothing
    report = json.loads((folder / "run.json").read_text())
    assert report["validation"]["quality_labels"]["passed"]
    rows = read_jsonl(folder / "quality_turns" / "test.jsonl")
    texts = PREVIOUS + DIALOG
    # 6 replies, each scored once for fluency; Speaker 1 (3 replies) has 2 facts, Speaker 2 (3 replies) 1
    assert asked == 6 + 3 * 2 + 3 * 1
    mechanic = rows[2]
    assert (mechanic["speaker"], mechanic["persona_facts"]) == ("Speaker 1", PERSONAS[0])
    # the fake model's first-token alternatives: priest vs mechanic leans to contradiction (contr 0.8, ent 0.1,
    # neutral 0.05, "So" 0.05: 0.95 of label mass); tea vs mechanic to neutral (0.6, contr 0.2, ent 0.1, "So" 0.1)
    entail, contradict = [0.1 / 0.95, 0.1 / 0.9], [0.8 / 0.95, 0.2 / 0.9]
    assert mechanic["p_entail"] == pytest.approx(entail, abs=1e-6)
    assert mechanic["p_contradict"] == pytest.approx(contradict, abs=1e-6)
    assert mechanic["nli_labels"] == ["contradiction", "neutral"]
    assert mechanic["r1"] == pytest.approx(sum(entail) - 2 * sum(contradict), abs=1e-5)
    tea_break = rows[4]
    assert tea_break["nli_labels"] == ["neutral", "entailment"]
    # fluency: the mean of the reply's own words' log-probabilities, after "Speaker 2: <previous>\nSpeaker 1:";
    # the first word's token begins with the space after the colon and counts
    assert len(rows) == len(texts) == 6
    for row, text in zip(rows, texts):
        assert row["r3_1"] == pytest.approx(sum(word_logprob(w) for w in text.split()) / len(text.split()), abs=1e-6)
    assert rows[5]["r3_1"] == pytest.approx(-0.5)  # "Sure.", one word of five characters
    weights = {"r1": 0.4, "r2": 0.16, "r3_1": 0.22, "r3_2": 0.22}
    reply = rows[3]  # a reply with a previous turn in its session: every part
    assert reply["reward_parts"] == ["r1", "r2", "r3_1", "r3_2"]
    assert reply["reward"] == pytest.approx(sum(weights[k] * reply[k] for k in weights), abs=1e-5)
    # a session's first turn has no previous turn: no R2, the rest present
    assert rows[0]["reward_parts"] == mechanic["reward_parts"] == ["r1", "r3_1", "r3_2"]
    (summary,) = read_jsonl(folder / "quality_dialogues" / "test.jsonl")
    labels = [label for row in rows for label in row["nli_labels"]]
    assert (summary["n_entail"], summary["n_contradict"], summary["n_neutral"]) == (
        labels.count("entailment"),
        labels.count("contradiction"),
        labels.count("neutral"),
    )
    assert summary["pc"] == pytest.approx(100 * (len(labels) - 2 * labels.count("contradiction")) / len(labels))
    totals = report["configs"]["quality_turns"]["summary"]
    assert totals["by_nli_label"] == {name: labels.count(name) for name in ("entailment", "contradiction", "neutral")}
    assert totals["pc"] == summary["pc"]  # one conversation: the dataset's PC is its own
    assert read_jsonl(again / "quality_turns" / "test.jsonl") == rows


def test_a_tampered_probability_fails_validation(tmp_path, bag_of_words):  # noqa: F811
    from gen.products.checks import Checks
    from gen.products.quality import checking
    from gen.recipe import load_recipe
    from tests.harness import Harness

    with FakeOpenAI(script) as server:
        recipe = quality_recipe(tmp_path, server.base_url)
        folder = run_once(recipe, tmp_path / "out", tmp_path / "cache")
    rows = read_jsonl(folder / "quality_turns" / "test.jsonl")
    summaries = read_jsonl(folder / "quality_dialogues" / "test.jsonl")
    rows[2]["p_contradict"] = [0.1, rows[2]["p_contradict"][1]]
    harness = Harness.from_recipe(load_recipe(recipe))
    product = harness.product("quality_labels")
    checks = Checks()
    checking.check_conversation(harness.inputs(product)[0], rows, summaries, product.options, harness.ctx, checks)
    failed = {name for name, result in checks.report().items() if result["failed"]}
    assert "label probabilities sum to 1 and give R1" in failed


def test_an_nli_model_without_its_packages_names_the_extra(tmp_path, monkeypatch):
    import importlib.util

    from gen.errors import GenError
    from gen.products.quality import nli_model

    found = {"transformers": object(), "torch": None}  # one of the two installed, whatever this machine has
    monkeypatch.setattr(importlib.util, "find_spec", found.get)
    with pytest.raises(GenError) as error:
        nli_model.require(str(tmp_path), "products[0]")
    message = str(error.value)
    assert "needs torch, which is not installed" in message and "gen-memory[nli]" in message
    assert error.value.field == "products[0].nli_model"


def test_both_nli_backends_at_once_are_refused(tmp_path):
    from gen.errors import GenError
    from gen.products.registry import bind
    from gen.recipe import load_recipe

    (tmp_path / "msc.jsonl").write_text("")
    recipe = write_recipe(
        tmp_path / "q.yaml",
        {
            "name": "q",
            "sources": [{"format": "msc", "path": str(tmp_path / "msc.jsonl")}],
            "llm": {"main": {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}},
            "products": [{"type": "quality_labels", "nli_endpoint": "main", "nli_model": str(tmp_path)}],
        },
    )
    with pytest.raises(GenError, match="name one NLI backend"):
        bind(load_recipe(recipe))  # as every command does before it reads a source
