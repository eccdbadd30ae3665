"""quality_labels on the dialogues gen writes: TeaBag's sessions 6 (labelled after their history, which is what
their speakers could remember) and persona_sql's pseudo-dialogues (whose memories are the personas), each run
end to end against the scripted models of those products' own tests, passing the validator, with a memory
worked out by hand; and rPC of a written dialogue against its conversation's log."""

from __future__ import annotations

import json

import pytest

from gen.llm.config import RunSettings
from gen.products.quality.dialogues import Dialogue, Turn
from gen.products.quality.records import Backends, dialogue_record
from tests.conftest import read_jsonl, write_json, write_recipe
from tests.fakes.openai_server import FakeOpenAI
from tests.test_persona_sql_labels import EPISODE
from tests.test_persona_sql_labels import Model as PersonaModel
from tests.test_quality_labels import BagOfWords, bag_of_words  # noqa: F401  (the fixture)
from tests.test_teabag_product import Model as TeaBagModel
from tests.test_teabag_product import episode


def run_recipe(tmp_path, model, data: dict, **endpoint):
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from gen.recipe import load_recipe

    with FakeOpenAI(model) as server:
        data["llm"] = {"main": {"model": "fake-model", "base_url": server.base_url, "api_key_env": None, **endpoint}}
        recipe = load_recipe(write_recipe(tmp_path / "r.yaml", data))
        return run(
            recipe,
            RunOptions(output_dir=tmp_path / "out", llm=RunSettings(cache_dir=tmp_path / "cache", progress="off")),
        )


def test_teabag_sessions_6_are_labelled_after_their_history(tmp_path, bag_of_words):  # noqa: F811
    source = write_json(tmp_path / "cc.json", [episode()])
    folder = run_recipe(
        tmp_path,
        TeaBagModel(),
        {
            "name": "q",
            "seed": 13,
            "sources": [{"format": "cc", "path": str(source)}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [
                {"type": "teabag", "coherence": "lexical", "max_reject_rate": 1.0},
                {"type": "quality_labels", "dialogues": ["log", "teabag_session6"], "memory_top_k": 2},
            ],
        },
        structured_output="json_schema",  # as teabag's own tests: its scripted model answers no probe
    )
    report = json.loads((folder / "run.json").read_text())
    assert report["validation"]["quality_labels"]["passed"]
    teabag = read_jsonl(folder / "teabag" / "test.jsonl")
    rows = read_jsonl(folder / "quality_turns" / "test.jsonl")
    summaries = read_jsonl(folder / "quality_dialogues" / "test.jsonl")
    names = ["log", *(f"session6 {record['question_id']}" for record in teabag)]
    assert [s["dialogue"] for s in summaries] == names and len(teabag) == 2
    for record in teabag:
        own = [r for r in rows if r["dialogue"] == f"session6 {record['question_id']}"]
        assert [r["speaker"] for r in own] == [t["speaker"] for t in record["session6"]]
        # the third turn's query is the second; its memories are the two history turns nearest it
        history = [t["text"] for session in record["history"] for t in session["turns"]]
        encoded = BagOfWords().encode([*history, record["session6"][1]["text"]])
        scores = encoded[:-1] @ encoded[-1]
        third = own[2]
        assert third["query_index"] == 1 and third["s_max"] == pytest.approx(float(scores.max()), abs=1e-6)
        assert third["memory_indices"] == sorted(range(len(history)), key=lambda i: (-scores[i], i))[:2]
    assert len([r for r in rows if r["dialogue"] == "log"]) == 20  # five sessions of four turns


def test_persona_pseudo_dialogues_are_labelled_with_their_personas_as_memories(tmp_path, bag_of_words):  # noqa: F811
    source = write_json(tmp_path / "personas.json", {"train": [EPISODE]})
    folder = run_recipe(
        tmp_path,
        PersonaModel(),
        {
            "name": "q",
            "sources": [{"format": "msc_personas", "path": str(source)}],
            "products": [
                {"type": "persona_sql", "max_reject_rate": 1.0},
                {"type": "quality_labels", "dialogues": ["persona_dialogues"], "memories": "personas"},
            ],
        },
    )
    report = json.loads((folder / "run.json").read_text())
    assert report["validation"]["quality_labels"]["passed"]
    (episode_record,) = read_jsonl(folder / "persona_sql_episodes" / "test.jsonl")
    rows = read_jsonl(folder / "quality_turns" / "test.jsonl")
    lines = episode_record["lines"]
    assert [(r["dialogue"], r["speaker"]) for r in rows] == [("pseudo-dialogue", line["speaker"]) for line in lines]
    # a reply's memories are its speaker's facts nearest the line before it
    second = rows[1]
    facts = EPISODE[second["speaker"]]
    encoded = BagOfWords().encode([*facts, lines[0]["text"]])
    scores = encoded[:-1] @ encoded[-1]
    assert second["s_max"] == pytest.approx(float(scores.max()), abs=1e-6)
    assert second["memory_facts"][0] == facts[max(range(len(facts)), key=lambda i: (scores[i], -i))]


def test_rpc_of_a_written_dialogue_is_against_its_conversations_log():
    turns = tuple(Turn(k, "A", "text", 0) for k in range(2))
    written = Dialogue("session6 q1", "c1", turns, (), {})
    rows = [
        {"nli_labels": ["entailment", "contradiction"], "feedback_reward": None, "padding": False}
        | dict.fromkeys(("advantage", "r1", "persona_cosine", "r2", "r3_1", "r3_2", "reward")),
        {"nli_labels": ["neutral", "neutral"], "feedback_reward": None, "padding": False}
        | dict.fromkeys(("advantage", "r1", "persona_cosine", "r2", "r3_1", "r3_2", "reward")),
    ]
    record = dialogue_record(written, rows, Backends(None, "model", None), human_pc=90.0, include_padding=False)
    # 4 pairs: 1 entailed, 1 contradicted, 2 neutral -> PC = 100 (1 - 1 + 2) / 4 = 50; rPC = 1 + (50 - 90) / 100
    assert (record["n_entail"], record["n_contradict"], record["n_neutral"]) == (1, 1, 2)
    assert record["pc"] == 50.0 and record["rpc"] == pytest.approx(0.6)
