"""The `conversations` record's source metadata: a struct for the keys each adapter writes, JSON text for the rest.
Expected values are read off the hand-written source records below, not from gen's output."""

from __future__ import annotations

import json
from pathlib import Path

from gen.export.typed_records import to_table
from gen.products.chat_log import conversations as product
from gen.recipe import PaddingSpec, TimelineSpec
from gen.sources import cc, locomo, msc
from gen.timeline import build_timeline
from tests.conftest import locomo_sample

NO_PADDING = TimelineSpec(padding=PaddingSpec(mode="none"))
EMPTY = {
    "sample_id": None,
    "relationship": None,
    "summary": None,
    "time_interval": None,
    "self_instruct": None,
    "init_personas": None,
    "summary_speaker_1": None,
    "summary_speaker_2": None,
    "other_json": None,
}


def record_of(conversation) -> dict:
    return product.record(build_timeline(conversation, NO_PADDING))


def cc_episode(**overrides) -> dict:
    episode = {
        "dataID": "episode-7",
        "relationship": "Classmates",
        "time_interval": ["Start", "A few days after"],
        "summary": ["They plan a trip.", "They book the trip."],
        "first_session_dialogue": ["hi there", "hello"],
        "first_session_speakers": ["Classmates A", "Classmates B"],
        "second_session_dialogue": ["we are going", "yes we are"],
        "second_session_speakers": ["Classmates A", "Classmates B"],
    }
    episode.update(overrides)
    return episode


def msc_si_record() -> dict:
    return {
        "metadata": {"initial_data_id": "test_3"},
        "previous_dialogs": [{"dialog": [{"text": "a b"}, {"text": "c"}], "time_num": 2, "time_unit": "days"}],
        "dialog": [{"text": "d e", "id": "Speaker 1"}, {"text": "f", "id": "Speaker 2"}],
        "personas": [["I run."], ["I swim."]],
        "init_personas": [["I like tea.", "I run."], ["I have a cat."]],
        "self_instruct": {"B": "Which sport do I do?", "A": "You run."},
        "summary_speaker_1": [["I like tea."], ["I run."]],
        "summary_speaker_2": [["I have a cat."], ["I swim."]],
    }


def test_locomo_keeps_its_sample_id():
    (conversation,) = locomo.parse([locomo_sample("conv-9", ("Ann", "Bob"), [("1:56 pm on 8 May, 2023", ["hi"])])], "x")
    row = record_of(conversation)
    assert row["source_format"] == "locomo"
    assert row["source_metadata"] == {**EMPTY, "sample_id": "conv-9"}


def test_conversation_chronicles_relationship_summaries_and_intervals():
    (conversation,) = cc.parse([cc_episode()], "cc.jsonl")
    assert record_of(conversation)["source_metadata"] == {
        **EMPTY,
        "relationship": "Classmates",
        "summary": ["They plan a trip.", "They book the trip."],
        "time_interval": ["Start", "A few days after"],
    }


def test_msc_self_instruct_question_personas_and_summaries():
    (conversation,) = msc.parse_self_instruct([msc_si_record()], "si.jsonl")
    assert record_of(conversation)["source_metadata"] == {
        **EMPTY,
        "self_instruct": {"question": "Which sport do I do?", "answer": "You run."},
        "init_personas": [
            {"speaker": "Speaker 1", "facts": ["I like tea.", "I run."]},
            {"speaker": "Speaker 2", "facts": ["I have a cat."]},
        ],
        "summary_speaker_1": [["I like tea."], ["I run."]],
        "summary_speaker_2": [["I have a cat."], ["I swim."]],
    }


def test_a_value_of_another_shape_is_kept_as_json_text_not_lost():
    (conversation,) = cc.parse([cc_episode(summary="One summary for all sessions.")], "cc.jsonl")
    metadata = record_of(conversation)["source_metadata"]
    assert metadata["summary"] is None
    assert json.loads(metadata["other_json"]) == {"summary": "One summary for all sessions."}
    conversation.metadata["annotator"] = {"id": 4}  # a key no adapter writes today
    assert json.loads(record_of(conversation)["source_metadata"]["other_json"]) == {
        "annotator": {"id": 4},
        "summary": "One summary for all sessions.",
    }


def test_every_shape_fits_the_declared_features():
    (a,) = cc.parse([cc_episode()], "cc.jsonl")
    (b,) = msc.parse_self_instruct([msc_si_record()], "si.jsonl")
    (c,) = locomo.parse([locomo_sample("conv-9", ("Ann", "Bob"), [("1:56 pm on 8 May, 2023", ["hi"])])], "x")
    rows = [record_of(conversation) for conversation in (a, b, c)]
    table = to_table(rows, product.features(), Path("conversations/test.jsonl"))
    assert table.column("source_metadata").to_pylist() == [row["source_metadata"] for row in rows]
