"""Source adapters on small fixtures: the accepted shapes, and one clear error per kind of bad input."""

from __future__ import annotations

import json

import pytest

from gen.errors import GenError
from gen.recipe import SourceSpec
from gen.sources import cc, locomo, msc, read_source, select
from tests.conftest import locomo_sample, write_json

SAMPLE = locomo_sample(
    "conv-1",
    ("Ann", "Bob"),
    [("1:56 pm on 8 May, 2023", ["hi there", "hello"]), ("9:05 am on 10 May, 2023", ["again", "yes"])],
)


def test_locomo_accepts_a_list_a_single_sample_and_a_bare_conversation(tmp_path):
    as_list = list(read_source(SourceSpec(format="locomo", path=write_json(tmp_path / "l.json", [SAMPLE]))))
    single = list(read_source(SourceSpec(format="locomo", path=write_json(tmp_path / "s.json", SAMPLE))))
    bare = list(
        read_source(SourceSpec(format="locomo", path=write_json(tmp_path / "my_log.json", SAMPLE["conversation"])))
    )
    assert [c.conversation_id for c in as_list + single + bare] == ["locomo/conv-1", "locomo/conv-1", "locomo/my_log"]
    conversation = as_list[0]
    assert conversation.speakers == ("Ann", "Bob")
    assert [s.start.isoformat() for s in conversation.sessions] == ["2023-05-08T13:56:00", "2023-05-10T09:05:00"]
    assert [t.source_turn_id for t in conversation.sessions[1].turns] == ["D2:1", "D2:2"]


def test_locomo_keeps_image_captions_and_ignores_dates_without_sessions(tmp_path):
    sample = json.loads(json.dumps(SAMPLE))
    sample["conversation"]["session_1"][0]["blip_caption"] = "a photo of a dog"
    sample["conversation"]["session_7_date_time"] = "4:00 pm on 1 June, 2023"  # no session_7: ignored
    (conversation,) = locomo.parse([sample], "x.json")
    assert conversation.sessions[0].turns[0].image_caption == "a photo of a dog"
    assert len(conversation.sessions) == 2


def bad_locomo(mutate) -> GenError:
    sample = json.loads(json.dumps(SAMPLE))
    mutate(sample["conversation"])
    with pytest.raises(GenError) as error:
        list(locomo.parse([sample], "bad.json"))
    return error.value


def test_unparsable_session_date_names_file_record_and_field():
    error = bad_locomo(lambda c: c.update(session_2_date_time="10 May 2023 at nine"))
    assert (error.file, error.record, error.field) == ("bad.json", "conv-1, session_2", "session_2_date_time")
    assert "cannot parse date '10 May 2023 at nine'" in str(error)


def test_sessions_out_of_order_are_an_error():
    error = bad_locomo(lambda c: c.update(session_2_date_time="1:56 pm on 1 May, 2023"))
    assert error.field == "session_2_date_time" and "chronological" in str(error)


def test_a_turn_without_speaker_or_text_is_an_error():
    error = bad_locomo(lambda c: c["session_1"][1].pop("speaker"))
    assert (error.record, error.field) == ("conv-1, session_1, turn D1:2", "speaker")
    error = bad_locomo(lambda c: c["session_2"][0].update(text=""))
    assert (error.record, error.field) == ("conv-1, session_2, turn D2:1", "text")


def test_an_empty_session_is_an_error():
    error = bad_locomo(lambda c: c.update(session_2=[]))
    assert (error.field, error.message) == ("session_2", "empty session")


def test_a_file_that_is_not_json_is_an_error(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('[{"conversation": ', encoding="utf-8")
    with pytest.raises(GenError) as error:
        list(read_source(SourceSpec(format="locomo", path=path)))
    assert error.value.file == path and "not valid JSON" in str(error.value)


def msc_record(**overrides) -> dict:
    record = {
        "metadata": {"initial_data_id": "test_0"},
        "previous_dialogs": [{"dialog": [{"text": "a"}, {"text": "b"}], "time_num": 4, "time_unit": "hours"}],
        "dialog": [{"text": "c", "id": "12345"}, {"text": "d", "id": "Speaker 2"}, {"text": "e", "id": "777"}],
        "personas": [["I like tea."], ["I like cats."]],
    }
    record.update(overrides)
    return record


def test_msc_worker_ids_are_resolved_by_alternation():
    (conversation,) = msc.parse([msc_record()], "msc.txt")
    assert conversation.conversation_id == "msc/test_0"
    assert [t.speaker for t in conversation.sessions[1].turns] == ["Speaker 1", "Speaker 2", "Speaker 1"]
    assert [t.speaker for t in conversation.sessions[0].turns] == ["Speaker 1", "Speaker 2"]
    assert conversation.sessions[1].gap_before.total_seconds() == 4 * 3600
    assert conversation.personas == {"Speaker 1": ["I like tea."], "Speaker 2": ["I like cats."]}


def test_msc_unknown_time_unit_is_an_error():
    record = msc_record(previous_dialogs=[{"dialog": [{"text": "a"}], "time_num": 2, "time_unit": "fortnights"}])
    with pytest.raises(GenError) as error:
        list(msc.parse([record], "msc.txt"))
    assert error.value.field == "time_unit" and "fortnights" in str(error.value)


def test_msc_self_instruct_carries_the_memory_question():
    record = msc_record(
        self_instruct={"B": "What pet do I have?", "A": "A cat."},
        summary_speaker_1=[["likes tea"]],
        summary_speaker_2=[["likes cats"]],
    )
    (conversation,) = msc.parse_self_instruct([record], "si.jsonl")
    assert conversation.conversation_id == "msc-si/test_0"
    assert conversation.metadata["self_instruct"] == {"question": "What pet do I have?", "answer": "A cat."}


def test_msc_persona_pairs_are_personas_only(tmp_path):
    path = write_json(
        tmp_path / "p.json", {"train": [{"Speaker 1": ["I am tall."], "Speaker 2": ["I am short."], "in_dataset": 1}]}
    )
    (conversation,) = list(read_source(SourceSpec(format="msc_personas", path=path)))
    assert conversation.conversation_id == "msc-personas/train-0"
    assert conversation.sessions == () and conversation.personas["Speaker 2"] == ["I am short."]


def cc_episode(**overrides) -> dict:
    episode = {
        "dataID": "episode-1",
        "relationship": "Neighbors",
        "time_interval": ["Start", "A few hours after"],
        "first_session_dialogue": ["hi", "hello"],
        "first_session_speakers": ["Neighbors A", "Neighbors B"],
        "second_session_dialogue": ["back", "yes"],
        "second_session_speakers": ["Neighbors A", "Neighbors B"],
    }
    episode.update(overrides)
    return episode


def test_cc_gaps_come_from_the_interval_table_and_the_recipe_can_extend_it():
    (conversation,) = cc.parse([cc_episode()], "cc.jsonl")
    assert conversation.conversation_id == "cc/episode-1"
    assert conversation.speakers == ("Neighbors A", "Neighbors B")
    assert conversation.sessions[1].gap_before.total_seconds() == 3 * 3600
    assert conversation.metadata["relationship"] == "Neighbors"
    (custom,) = cc.parse(
        [cc_episode(time_interval=["Start", "Much later"])], "cc.jsonl", interval_phrases={"Much later": "2 weeks"}
    )
    assert custom.sessions[1].gap_before.days == 14


def test_cc_unknown_interval_phrase_names_the_phrase_and_the_option():
    with pytest.raises(GenError) as error:
        list(cc.parse([cc_episode(time_interval=["Start", "Ages later"])], "cc.jsonl"))
    message = str(error.value)
    assert "'Ages later'" in message and "interval_phrases" in message and error.value.record == "episode-1, session 2"


def test_cc_without_intervals_needs_a_default():
    episode = cc_episode()
    del episode["time_interval"]
    with pytest.raises(GenError, match="default_interval"):
        list(cc.parse([episode], "cc.jsonl"))
    (conversation,) = cc.parse([episode], "cc.jsonl", default_interval="A few days after")
    assert conversation.sessions[1].gap_before.days == 3


def test_selection_applies_ids_min_sessions_longest_and_limit(tmp_path):
    samples = [
        locomo_sample(
            f"c{i}", ("Ann", "Bob"), [(f"1:00 pm on {d} May, 2023", ["w " * (i + 1)]) for d in range(1, 2 + i % 3)]
        )
        for i in range(6)
    ]
    pool = list(locomo.parse(samples, "x.json"))  # words: c_i has (i+1) × sessions words; sessions 1,2,3,1,2,3
    assert [
        c.conversation_id for c in select(pool, SourceSpec(format="locomo", path="x", ids=["c1", "locomo/c4"]))
    ] == ["locomo/c1", "locomo/c4"]
    assert [c.conversation_id for c in select(pool, SourceSpec(format="locomo", path="x", min_sessions=3))] == [
        "locomo/c2",
        "locomo/c5",
    ]
    # words: c0 1, c1 4, c2 9, c3 4, c4 10, c5 18 → the 2 longest are c4 and c5, kept in source order
    assert [c.conversation_id for c in select(pool, SourceSpec(format="locomo", path="x", longest=2))] == [
        "locomo/c4",
        "locomo/c5",
    ]
    assert len(select(pool, SourceSpec(format="locomo", path="x", limit=4))) == 4
    with pytest.raises(GenError, match="ids not found: nope"):
        select(pool, SourceSpec(format="locomo", path="x", ids=["nope"]))


def test_json_lines_errors_name_the_line_and_an_empty_file_says_so(tmp_path):
    good = json.dumps(cc_episode())
    broken = tmp_path / "broken.jsonl"
    broken.write_text(f"{good}\n\n{good[:-1]}\n{good}\n", encoding="utf-8")  # line 3 lost its closing brace
    with pytest.raises(GenError) as error:
        list(read_source(SourceSpec(format="cc", path=broken)))
    # the column just past the line's text, where its closing brace is missing
    assert (error.value.file, error.value.record) == (broken, f"line 3, column {len(good)}")
    assert "not valid JSON" in str(error.value)
    latin = tmp_path / "latin.jsonl"
    latin.write_bytes(good.encode() + b"\n" + good.replace("episode", "\u00e9pisode").encode("latin-1") + b"\n")
    with pytest.raises(GenError) as error:
        list(read_source(SourceSpec(format="cc", path=latin)))
    assert (error.value.file, error.value.record) == (latin, "line 2")
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n \n", encoding="utf-8")
    with pytest.raises(GenError, match="file holds no records"):
        list(read_source(SourceSpec(format="cc", path=empty)))


def test_hf_sources_go_through_datasets_load_dataset(tmp_path, monkeypatch):
    """`hf:` accepts anything datasets.load_dataset does; a local folder of JSON lines exercises the same path."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    folder = tmp_path / "cc_dataset"
    folder.mkdir()
    (folder / "train.jsonl").write_text("\n".join(json.dumps(cc_episode(dataID=f"episode-{i}")) for i in range(3)))
    conversations = list(read_source(SourceSpec(format="cc", hf=str(folder), split="train")))
    assert [c.conversation_id for c in conversations] == ["cc/episode-0", "cc/episode-1", "cc/episode-2"]


def test_hf_source_that_cannot_load_is_one_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(GenError) as error:
        list(read_source(SourceSpec(format="cc", hf=str(tmp_path / "nothing-here"), split="train")))
    assert error.value.file == f"hf:{tmp_path / 'nothing-here'}" and error.value.field == "hf"


def test_cc_reads_a_list_json_lines_or_one_pretty_printed_episode(tmp_path):
    episodes = [cc_episode(dataID=f"episode-{i}") for i in range(2)]
    as_list = write_json(tmp_path / "list.json", episodes)
    as_lines = tmp_path / "lines.jsonl"
    as_lines.write_text("\n".join(json.dumps(e) for e in episodes) + "\n\n")
    one = tmp_path / "one.json"
    one.write_text(json.dumps(episodes[0], indent=2))
    ids = lambda path: [c.conversation_id for c in read_source(SourceSpec(format="cc", path=path))]  # noqa: E731
    assert ids(as_list) == ids(as_lines) == ["cc/episode-0", "cc/episode-1"]
    assert ids(one) == ["cc/episode-0"]


def test_a_hub_source_passes_its_configuration_split_and_revision(monkeypatch):
    import datasets

    asked = []

    def load_dataset(*args, **kwargs):
        asked.append((args, kwargs))
        return [{"dataID": "e1"}]

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    from gen.sources import load_hub_records

    spec = SourceSpec(format="cc", hf="owner/chronicles", hf_config="small", split="validation", revision="v1.0")
    assert load_hub_records(spec) == [{"dataID": "e1"}]
    assert asked == [(("owner/chronicles", "small"), {"split": "validation", "revision": "v1.0"})]


def test_hub_settings_on_a_local_file_are_refused(tmp_path):
    with pytest.raises(ValueError, match="hf_config, revision only apply to a Hub source"):
        SourceSpec(format="cc", path=tmp_path / "x.json", hf_config="small", revision="v1")
