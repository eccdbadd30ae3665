"""`gen export`: the quickstart written in LoCoMo's, LongMemEval's and BEIR's layouts and read back.

The shapes are checked against samples of the real files' structure written here by hand (invented content,
the real keys, types and date styles), LoCoMo's also against the real locomo10.json when GEN_SHARED_DATA is
set, and BEIR's with BEIR's own loader. The round trips map every exported question's evidence back to
response indices through the run's own log file, read here without any gen code.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import pytest

from gen.export.harness.dates import locomo_style
from gen.export.hub_folder import build_export
from gen.pipeline.options import RunOptions
from gen.pipeline.runner import run
from gen.recipe import load_recipe
from tests.conftest import REPO, read_jsonl, require_shared, requires_extra, run_cli

QUESTION_CONFIGS = ("time_queries", "ambiguous_time_queries")  # the quickstart's

# One LoCoMo sample as locomo10.json lays it out (content invented): an image turn carries blip_caption.
LOCOMO_SAMPLE = {
    "qa": [
        {"question": "When did Ann buy the kiln?", "answer": "3 June 2023", "evidence": ["D1:2"], "category": 2},
    ],
    "conversation": {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "9:05 am on 4 June, 2023",
        "session_1": [
            {"speaker": "Ann", "dia_id": "D1:1", "text": "Morning! Guess what arrived."},
            {"speaker": "Bob", "dia_id": "D1:2", "text": "The kiln?", "blip_caption": "a photo of a small kiln"},
        ],
        "session_2_date_time": "12:40 pm on 11 June, 2023",
        "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "How did the first firing go?"}],
    },
    "sample_id": "conv-1",
}
# One LongMemEval instance as longmemeval_s.json lays it out (content invented).
LONGMEMEVAL_INSTANCE = {
    "question_id": "0a1b2c3d",
    "question_type": "temporal-reasoning",
    "question": "How many days before the concert did I buy the tickets?",
    "answer": "12 days",
    "question_date": "2023/05/30 (Tue) 23:40",
    "haystack_session_ids": ["sharegpt_x1_0", "answer_0a1b2c3d_1"],
    "haystack_dates": ["2023/05/20 (Sat) 02:21", "2023/05/22 (Mon) 18:05"],
    "haystack_sessions": [
        [{"role": "user", "content": "Any tips for a sourdough starter?"}, {"role": "assistant", "content": "Yes."}],
        [
            {"role": "user", "content": "I just bought concert tickets!", "has_answer": True},
            {"role": "assistant", "content": "Enjoy the show."},
        ],
    ],
    "answer_session_ids": ["answer_0a1b2c3d_1"],
}
LOCOMO_DATE = re.compile(r"^(1[0-2]|[1-9]):[0-5]\d (am|pm) on ([1-9]|[12]\d|3[01]) [A-Z][a-z]+, \d{4}$")
LONGMEMEVAL_DATE = re.compile(r"^\d{4}/\d{2}/\d{2} \((Mon|Tue|Wed|Thu|Fri|Sat|Sun)\) \d{2}:\d{2}$")
WEEKDAYS = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]


# --- what the test knows of the run, read straight from its files -------------------------------------------


def exported_ids(export_folder: Path) -> dict[str, str]:
    """The export's conversation names (sample_id, folder, LongMemEval id part) → gen's conversation ids."""
    manifest = json.loads((export_folder / "gen-export.json").read_text())
    return {name: info["conversation_id"] for name, info in manifest["conversations"].items()}


def log_by_conversation(run_dir: Path) -> dict[str, list[dict]]:
    found: dict[str, list[dict]] = defaultdict(list)
    for record in read_jsonl(run_dir / "log" / "test.jsonl"):
        found[record["conversation_id"]].append(record)
    return found


def conversations(run_dir: Path) -> dict[str, dict]:
    return {record["conversation_id"]: record for record in read_jsonl(run_dir / "conversations" / "test.jsonl")}


def questions(run_dir: Path, config: str) -> dict[str, dict]:
    return {record["question_id"]: record for record in read_jsonl(run_dir / config / "test.jsonl")}


def index_of_turn(log: list[dict], session: int, turn: int) -> int:
    """The response_index of the turn-th response (1-based) of a session, counted in the log's own order."""
    in_session = [record for record in log if record["session_index"] == session]
    return in_session[turn - 1]["response_index"]


def spoken(record: dict) -> str:
    """A response as one line of text: the speaker's name, the words, and the image it shared, if any."""
    image = f" [shares an image: {record['image_caption']}]" if record["image_caption"] else ""
    return f"{record['speaker']}: {record['text']}{image}"


def minute(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(second=0)


def shape(value):
    """Keys and value types, recursively (a list by the shape of its first item)."""
    if isinstance(value, dict):
        return {key: shape(item) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(value[0])] if value else []
    return type(value).__name__


# --- LoCoMo --------------------------------------------------------------------------------------------------


def test_locomo_samples_have_locomo_keys_and_date_style(quickstart, exports):
    known = conversations(quickstart)
    sample_keys = set(LOCOMO_SAMPLE)
    plain_turn = set(LOCOMO_SAMPLE["conversation"]["session_1"][0])
    image_turn = set(LOCOMO_SAMPLE["conversation"]["session_1"][1])
    ids = exported_ids(exports["locomo"])
    for config in QUESTION_CONFIGS:
        samples = json.loads((exports["locomo"] / f"{config}.json").read_text())
        assert [ids[sample["sample_id"]] for sample in samples] == list(known)
        for sample in samples:
            assert re.fullmatch(r"[A-Za-z0-9.-]+", sample["sample_id"])  # a file name for LoCoMo's RAG code
            record = known[ids[sample["sample_id"]]]
            assert list(sample) == list(LOCOMO_SAMPLE)  # the same keys in LoCoMo's order
            assert set(sample) == sample_keys
            block = sample["conversation"]
            count = len(record["session_starts"])  # the padding session included
            expected_keys = ["speaker_a", "speaker_b"]
            for number in range(1, count + 1):
                expected_keys += [f"session_{number}_date_time", f"session_{number}"]
            assert list(block) == expected_keys
            assert (block["speaker_a"], block["speaker_b"]) == (record["speaker_a"], record["speaker_b"])
            for number, start in enumerate(record["session_starts"], start=1):
                written = block[f"session_{number}_date_time"]
                assert LOCOMO_DATE.match(written), written
                assert datetime.strptime(written, "%I:%M %p on %d %B, %Y") == minute(start)
                for position, turn in enumerate(block[f"session_{number}"], start=1):
                    assert set(turn) in (plain_turn, image_turn)
                    assert turn["dia_id"] == f"D{number}:{position}"
                    assert turn["speaker"] in (record["speaker_a"], record["speaker_b"])
            for qa in sample["qa"]:
                # no gold answer in these configs: answer is "" (LoCoMo's scorer reads it); gen's id last
                assert list(qa) == ["question", "answer", "evidence", "category", "question_id"]
                assert qa["answer"] == ""
                assert qa["category"] == 2 and qa["evidence"]
                assert shape(qa["evidence"]) == shape(LOCOMO_SAMPLE["qa"][0]["evidence"])


def test_locomo_questions_carry_now_in_locomo_style(quickstart, exports):
    known = conversations(quickstart)
    samples = json.loads((exports["locomo"] / "time_queries.json").read_text())
    asked = {record["question_id"]: record for record in read_jsonl(quickstart / "time_queries" / "test.jsonl")}
    texts = {record["question"] for record in asked.values()}
    ids = exported_ids(exports["locomo"])
    for sample in samples:
        record = known[ids[sample["sample_id"]]]
        for qa in sample["qa"]:
            found = re.match(r"^It is (.+), at the start of session (\d+)\. (\w+) asks (\w+): (.+)$", qa["question"])
            assert found, qa["question"]
            assert datetime.strptime(found[1], "%I:%M %p on %d %B, %Y") == minute(record["now"])
            assert int(found[2]) == record["current_session"]
            assert (found[3], found[4]) == (record["speaker_a"], record["speaker_b"])
            assert found[5] in texts


def test_locomo_dialogue_questions_keep_every_turn(quickstart, exports):
    """An ambiguous question is its whole dialogue, one "Name: text" line per turn, after the "now" line."""
    known = conversations(quickstart)
    records = list(read_jsonl(quickstart / "ambiguous_time_queries" / "test.jsonl"))
    samples = json.loads((exports["locomo"] / "ambiguous_time_queries.json").read_text())
    ids = exported_ids(exports["locomo"])
    exported = {ids[s["sample_id"]]: iter(s["qa"]) for s in samples}
    for record in records:
        lines = next(exported[record["conversation_id"]])["question"].split("\n")
        now = datetime.strptime(
            re.match(r"^It is (.+), at the start of session \d+\.$", lines[0])[1], "%I:%M %p on %d %B, %Y"
        )
        assert now == minute(known[record["conversation_id"]]["now"])
        assert lines[1:] == [f"{turn['speaker']}: {turn['text']}" for turn in record["dialogue"]]


@pytest.mark.integration
def test_locomo_export_matches_the_real_locomo10(exports):
    real = json.loads(require_shared("locomo/locomo10.json").read_text())
    real_sample_keys = {key for sample in real for key in sample}
    real_turn_keys = {
        frozenset(turn)
        for s in real
        for k, v in s["conversation"].items()
        if k.endswith(tuple("0123456789")) and isinstance(v, list)
        for turn in v
    }
    real_qa_keys = {key for sample in real for qa in sample["qa"] for key in qa}
    block_key = re.compile(r"^(speaker_a|speaker_b|session_\d+|session_\d+_date_time)$")
    ours = json.loads((exports["locomo"] / "time_queries.json").read_text())
    for sample in ours:
        assert set(sample) <= real_sample_keys
        assert all(block_key.match(key) for key in sample["conversation"])
        turns = [turn for key, value in sample["conversation"].items() if isinstance(value, list) for turn in value]
        assert {frozenset(turn) for turn in turns} <= real_turn_keys
        assert {key for qa in sample["qa"] for key in qa} - {"question_id"} <= real_qa_keys
        assert all(type(qa["category"]) is int for qa in sample["qa"])
    # the date style: every real session date, read and written again by the exporter's formatter
    dates = [v for s in real for k, v in s["conversation"].items() if k.endswith("_date_time")]
    assert len(dates) > 250
    for text in dates:
        assert locomo_style(datetime.strptime(text, "%I:%M %p on %d %B, %Y")) == text


def test_locomo_evidence_maps_back_to_the_relevant_responses(quickstart, exports):
    logs = log_by_conversation(quickstart)
    for config in QUESTION_CONFIGS:
        records = list(read_jsonl(quickstart / config / "test.jsonl"))
        samples = json.loads((exports["locomo"] / f"{config}.json").read_text())
        ids = exported_ids(exports["locomo"])
        exported = [(ids[sample["sample_id"]], qa) for sample in samples for qa in sample["qa"]]
        assert len(exported) == len(records)  # every wording is a question
        # samples follow the conversations, questions keep the file's order within a conversation
        ordered = sorted(records, key=lambda r: list(logs).index(r["conversation_id"]))
        for record, (sample_id, qa) in zip(ordered, exported, strict=True):
            assert sample_id == record["conversation_id"] and qa["question_id"] == record["question_id"]
            indices = []
            for dia in qa["evidence"]:
                session, turn = map(int, re.fullmatch(r"D(\d+):(\d+)", dia).groups())
                indices.append(index_of_turn(logs[sample_id], session, turn))
            assert indices == record["relevant_response_indices"]


def test_locomo_turns_are_the_log_in_order(quickstart, exports):
    logs = log_by_conversation(quickstart)
    samples = json.loads((exports["locomo"] / "time_queries.json").read_text())
    for sample in samples:
        block = sample["conversation"]
        turns = [
            turn
            for key, value in block.items()
            if key.startswith("session_") and isinstance(value, list)
            for turn in value
        ]
        log = logs[exported_ids(exports["locomo"])[sample["sample_id"]]]
        assert [(t["speaker"], t["text"]) for t in turns] == [(r["speaker"], r["text"]) for r in log]
        assert [t.get("blip_caption") for t in turns] == [r["image_caption"] for r in log]


# --- LongMemEval ---------------------------------------------------------------------------------------------


def test_longmemeval_instances_have_longmemeval_keys_and_date_style(quickstart, exports):
    known = conversations(quickstart)
    logs = log_by_conversation(quickstart)
    for config in QUESTION_CONFIGS:
        instances = json.loads((exports["longmemeval"] / f"{config}.json").read_text())
        records = questions(quickstart, config)
        assert len(instances) == len({record["group_id"] for record in records.values()})  # one per group
        assert len({records[item["question_id"]]["group_id"] for item in instances}) == len(instances)
        for item in instances:
            assert list(item) == list(LONGMEMEVAL_INSTANCE)
            assert {k: type(v) for k, v in item.items()} == {k: type(v) for k, v in LONGMEMEVAL_INSTANCE.items()}
            assert item["question_type"] == "temporal-reasoning"
            assert item["answer"] == ""  # no gold answer: retrieval only
            record = known[records[item["question_id"]]["conversation_id"]]
            for text, expected in zip(
                [item["question_date"], *item["haystack_dates"]],
                [record["now"], *record["session_starts"]],
                strict=True,
            ):
                assert LONGMEMEVAL_DATE.match(text), text
                moment = datetime.strptime(text[:10] + text[16:], "%Y/%m/%d %H:%M")
                assert moment == minute(expected) and text[12:15] == WEEKDAYS[moment.weekday()]
            assert (
                len(item["haystack_session_ids"])
                == len(set(item["haystack_session_ids"]))
                == len(item["haystack_sessions"])
            )
            turns = [turn for session in item["haystack_sessions"] for turn in session]
            log = logs[record["conversation_id"]]
            assert [turn["content"] for turn in turns] == [spoken(r) for r in log]
            assert all(turn["role"] == "user" for turn in turns)
            # LongMemEval's code knows evidence by "answer" in a session id, and asks every turn of such a
            # session for has_answer (true or false); other sessions carry no has_answer
            for session_id, session in zip(item["haystack_session_ids"], item["haystack_sessions"], strict=True):
                evidence = session_id in item["answer_session_ids"]
                assert ("answer" in session_id) == evidence, session_id
                keys = {"role", "content", "has_answer"} if evidence else {"role", "content"}
                assert all(set(turn) == keys for turn in session)
                assert not evidence or any(turn["has_answer"] is True for turn in session)


def test_longmemeval_has_answer_turns_map_back_to_the_relevant_responses(quickstart, exports):
    logs = log_by_conversation(quickstart)
    for config in QUESTION_CONFIGS:
        records = questions(quickstart, config)
        for item in json.loads((exports["longmemeval"] / f"{config}.json").read_text()):
            record = records[item["question_id"]]
            log = logs[record["conversation_id"]]
            marked, sessions_marked = [], []
            for session_id, turns in zip(item["haystack_session_ids"], item["haystack_sessions"], strict=True):
                session = int(session_id.rsplit("_s", 1)[1])
                places = [
                    index_of_turn(log, session, n) for n, turn in enumerate(turns, start=1) if turn.get("has_answer")
                ]
                marked += places
                if places:
                    sessions_marked.append(session_id)
            assert marked == record["relevant_response_indices"]
            assert item["answer_session_ids"] == sessions_marked


def test_longmemeval_wording_choice_follows_the_seed_not_the_order(quickstart, tmp_path):
    """The same run exported twice gives the same bytes; with the question file reversed, the same choices."""
    from gen.export.harness.exporter import export

    export(quickstart, "longmemeval", tmp_path / "a", "time_queries")
    copy = tmp_path / "run"
    shutil.copytree(quickstart, copy)
    lines = (copy / "time_queries" / "test.jsonl").read_text().splitlines()
    (copy / "time_queries" / "test.jsonl").write_text("\n".join(reversed(lines)) + "\n")
    export(copy, "longmemeval", tmp_path / "b", "time_queries")
    first = json.loads((tmp_path / "a" / "time_queries.json").read_text())
    second = json.loads((tmp_path / "b" / "time_queries.json").read_text())
    assert {i["question_id"] for i in first} == {i["question_id"] for i in second}
    export(quickstart, "longmemeval", tmp_path / "a", "time_queries")  # over its own earlier export
    assert json.loads((tmp_path / "a" / "time_queries.json").read_text()) == first


# --- BEIR ----------------------------------------------------------------------------------------------------


@requires_extra("beir", "beir")
def test_beir_folders_load_with_beirs_loader_and_map_back(quickstart, exports):
    from beir.datasets.data_loader import GenericDataLoader as loader

    logs = log_by_conversation(quickstart)
    manifest = json.loads((exports["beir"] / "gen-export.json").read_text())
    for config in QUESTION_CONFIGS:
        records = questions(quickstart, config)
        folders = manifest["configs"][config]["folders"]
        assert set(folders) == set(logs)
        loaded_questions = 0
        for conversation_id, name in folders.items():
            corpus, queries, qrels = loader(data_folder=str(exports["beir"] / config / name)).load(split="test")
            log = logs[conversation_id]
            assert list(corpus) == [str(r["response_index"]) for r in log]
            for record in log:
                document = corpus[str(record["response_index"])]
                when = datetime.fromisoformat(record["timestamp"]).strftime("%A %Y-%m-%d %H:%M:%S")
                assert document["title"] == f"{when}, session {record['session_index']}"
                assert document["text"] == spoken(record)
            mine = {qid for qid, r in records.items() if r["conversation_id"] == conversation_id}
            assert set(queries) == set(qrels) == mine
            for qid, relevant in qrels.items():
                assert sorted(int(doc) for doc in relevant) == records[qid]["relevant_response_indices"]
                assert set(relevant.values()) == {1}
            loaded_questions += len(queries)
        assert loaded_questions == len(records)


def test_beir_queries_carry_now(quickstart, exports):
    known = conversations(quickstart)
    manifest = json.loads((exports["beir"] / "gen-export.json").read_text())
    for conversation_id, name in manifest["configs"]["time_queries"]["folders"].items():
        now = datetime.fromisoformat(known[conversation_id]["now"]).strftime("%A %Y-%m-%d %H:%M:%S")
        lines = read_jsonl(exports["beir"] / "time_queries" / name / "queries.jsonl")
        assert all(line["text"].startswith(f"It is {now}, at the start of session ") for line in lines)
        # each query's test, to split results by test, in the query and in the manifest
        records = questions(quickstart, "time_queries")
        assert all(line["metadata"] == {"test": records[line["_id"]]["test"]} for line in lines)
        tests = manifest["configs"]["time_queries"]["tests"]
        assert all(tests[line["_id"]] == records[line["_id"]]["test"] for line in lines)


# --- inputs and outputs --------------------------------------------------------------------------------------


def test_an_export_folder_gives_the_same_files_as_its_run_folder(quickstart, exports, tmp_path, capsys):
    parquet = build_export(quickstart, tmp_path / "parquet").folder
    for name, expected in exports.items():
        code, _, err = run_cli(["export", parquet, "--format", name, "--output", tmp_path / name], capsys)
        assert code == 0, err
        files = sorted(p.relative_to(expected) for p in expected.rglob("*") if p.is_file())
        assert files == sorted(p.relative_to(tmp_path / name) for p in (tmp_path / name).rglob("*") if p.is_file())
        for relative in files:
            assert (tmp_path / name / relative).read_bytes() == (expected / relative).read_bytes(), relative


def test_one_config_only(quickstart, tmp_path, capsys):
    code, _, err = run_cli(
        ["export", quickstart, "--format", "locomo", "--output", tmp_path / "x", "--config", "ambiguous_time_queries"],
        capsys,
    )
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "x").iterdir()) == [
        ".gen-files.json",
        "ambiguous_time_queries.json",
        "gen-export.json",
    ]
    code, _, err = run_cli(
        ["export", quickstart, "--format", "locomo", "--output", tmp_path / "y", "--config", "log"], capsys
    )
    assert code == 2
    assert "no question config 'log'" in err and "time_queries, ambiguous_time_queries" in err
    assert not (tmp_path / "y").exists()


def with_report(run_dir: Path, target: Path, change) -> Path:
    shutil.copytree(run_dir, target)
    report = json.loads((target / "run.json").read_text())
    change(report)
    (target / "run.json").write_text(json.dumps(report))
    return target


def test_a_stopped_or_failed_run_is_refused(quickstart, tmp_path, capsys):
    stopped = with_report(
        quickstart, tmp_path / ".quickstart.stopped", lambda r: r.update(stopped={"reason": "Ctrl-C"})
    )
    code, _, err = run_cli(["export", stopped, "--format", "beir", "--output", tmp_path / "a"], capsys)
    assert code == 2 and "this run stopped: Ctrl-C; only a finished run is exported" in err and "Traceback" not in err
    assert not (tmp_path / "a").exists()
    # gen eval says the same, even where the stopped run lacks a config's data file
    (stopped / "ambiguous_time_queries" / "test.jsonl").unlink()
    (tmp_path / "p.jsonl").write_text("")
    code, _, err = run_cli(["eval", stopped, "--predictions", tmp_path / "p.jsonl"], capsys)
    assert code == 2 and "this run stopped: Ctrl-C; only a finished run is scored" in err and "missing" not in err

    def fail(report):
        report["validation"]["time_queries"]["passed"] = False

    failed = with_report(quickstart, tmp_path / ".quickstart.failed", fail)
    code, _, err = run_cli(["export", failed, "--format", "locomo", "--output", tmp_path / "b"], capsys)
    assert code == 2 and "validation failed for time_queries" in err
    assert not (tmp_path / "b").exists()


def test_what_gen_did_not_write_is_never_replaced(quickstart, tmp_path, capsys):
    mine = tmp_path / "notes"
    mine.mkdir()
    (mine / "todo.txt").write_text("keep me")
    code, _, err = run_cli(["export", quickstart, "--format", "locomo", "--output", mine], capsys)
    assert code == 2 and "did not write is in the way" in err
    assert [p.name for p in mine.iterdir()] == ["todo.txt"]
    a_file = tmp_path / "data.json"
    a_file.write_text("[]")
    code, _, err = run_cli(["export", quickstart, "--format", "longmemeval", "--output", a_file], capsys)
    assert code == 2 and "a file gen did not write is in the way" in err and a_file.read_text() == "[]"
    code, _, err = run_cli(["export", quickstart, "--format", "beir", "--output", quickstart / "beir"], capsys)
    assert code == 2 and "lies inside the input DATASET" in err and not (quickstart / "beir").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary folder left behind


def test_bad_input_is_one_message(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    code, _, err = run_cli(["export", tmp_path / "empty", "--format", "locomo", "--output", tmp_path / "out"], capsys)
    assert code == 2 and "run.json is missing" in err and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["export", tmp_path / "empty", "--format", "parquet", "--output", tmp_path / "out"], capsys)
    assert code == 2 and "unknown export format 'parquet' (expected one of locomo, longmemeval, beir" in err
    imported = ["import-predictions", tmp_path / "r.json", "--format", "beri", "--output", tmp_path / "p"]
    code, _, err = run_cli(imported, capsys)
    assert code == 2 and "unknown export format 'beri'; did you mean 'beir'?" in err and len(err.splitlines()) == 1


# --- a config whose questions name their speaker: time_content_questions, written through the fake server ----


def test_time_content_questions_export_with_the_question_as_written(tmp_path, capsys):
    """A run of time_content_questions against the fake OpenAI server (a model that always asks "What did
    <speaker> talk about <time phrase>?" and answers with words of the passage), exported: the question keeps its
    own wording after "now" (it names its speaker, so nobody is said to ask it), its evidence maps back to the
    anchor's responses, and its gold answer is the record's in both QA exports and in `gen eval --answers`."""
    from gen.export.harness.exporter import export
    from gen.llm.config import RunSettings
    from tests.conftest import write_recipe
    from tests.fakes.openai_server import FakeOpenAI, tcq_question

    with FakeOpenAI(tcq_question) as server:
        recipe = {
            "name": "tcq",
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(REPO / "gen" / "data" / "sample_locomo.json")}],
            "timeline": {"padding": {"mode": "donor", "after_minutes": 60, "target_words": 300}},
            "llm": {
                "main": {
                    "model": "fake-model",
                    "base_url": server.base_url,
                    "api_key_env": None,
                    "structured_output": "json_schema",
                }
            },
            "products": [{"type": "log"}, {"type": "time_content_questions", "per_conversation": 4}],
        }
        path = write_recipe(tmp_path / "tcq.yaml", recipe)
        run_dir = run(load_recipe(path), RunOptions(output_dir=tmp_path / "out", llm=RunSettings(cache_dir=tmp_path)))
    export(run_dir, "locomo", tmp_path / "locomo")
    records = list(read_jsonl(run_dir / "time_content_questions" / "test.jsonl"))
    assert len(records) == 8
    known, logs = conversations(run_dir), log_by_conversation(run_dir)
    ids = exported_ids(tmp_path / "locomo")
    samples = {
        ids[s["sample_id"]]: s for s in json.loads((tmp_path / "locomo" / "time_content_questions.json").read_text())
    }
    by_conversation = defaultdict(list)
    for record in records:
        by_conversation[record["conversation_id"]].append(record)
    for conversation_id, asked in by_conversation.items():
        moment = datetime.fromisoformat(known[conversation_id]["now"])
        now = (
            f"{moment:%I}".lstrip("0")
            + f":{moment:%M} "
            + f"{moment:%p}".lower()
            + f" on {moment.day} {moment:%B}, {moment:%Y}"
        )
        session = known[conversation_id]["current_session"]
        exported = samples[conversation_id]["qa"]
        assert [qa["question"] for qa in exported] == [
            f"It is {now}, at the start of session {session}. {record['question']}" for record in asked
        ]
        for qa, record in zip(exported, asked, strict=True):
            turns = [tuple(map(int, re.fullmatch(r"D(\d+):(\d+)", dia).groups())) for dia in qa["evidence"]]
            assert [index_of_turn(logs[conversation_id], s, t) for s, t in turns] == record["relevant_response_indices"]
            assert qa["answer"] == record["answer"] != "" and qa["category"] == 2
    export(run_dir, "longmemeval", tmp_path / "lme")
    instances = json.loads((tmp_path / "lme" / "time_content_questions.json").read_text())
    answer_of = {record["question_id"]: record["answer"] for record in records}
    assert len(instances) == 8 and all(i["answer"] == answer_of[i["question_id"]] for i in instances)
    # the gold answers themselves, one left out: 7 of 8 questions score 1 (exact match and F1), the eighth 0
    lines = [{"question_id": r["question_id"], "answer": r["answer"]} for r in records[1:]]
    answers = tmp_path / "answers.jsonl"
    answers.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, _, err = run_cli(["eval", run_dir, "--answers", answers, "--json", tmp_path / "scores.json"], capsys)
    assert code == 0, err
    pooled = json.loads((tmp_path / "scores.json").read_text())["configs"]["time_content_questions"]["pooled"]
    assert pooled["questions"] == 8
    assert pooled["exact_match"] == pytest.approx(7 / 8) and pooled["f1"] == pytest.approx(7 / 8)


def test_what_a_killed_export_left_is_cleared(quickstart, tmp_path, capsys):
    """A temporary folder of a process that is gone is removed; an earlier export moved aside by it (the name
    left empty) is put back before the new one replaces it."""
    dead = 2**22 + 1  # above Linux's largest pid, so no process has it
    (tmp_path / f".x.tmp-{dead}" / "half").mkdir(parents=True)
    (tmp_path / f".x.tmp-{dead}" / ".gen-files.json").write_text('{"written_by": "gen", "files": null}')  # gen's
    code, _, err = run_cli(["export", quickstart, "--format", "locomo", "--output", tmp_path / "x"], capsys)
    assert code == 0, err
    (tmp_path / "x").rename(tmp_path / f".x.old-{dead}")
    code, _, err = run_cli(["export", quickstart, "--format", "beir", "--output", tmp_path / "x"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x"]
    assert json.loads((tmp_path / "x" / "gen-export.json").read_text())["format"] == "beir"


def test_evidence_outside_its_conversation_is_one_message(quickstart, tmp_path, capsys):
    copy = tmp_path / "run"
    shutil.copytree(quickstart, copy)
    path = copy / "time_queries" / "test.jsonl"
    lines = path.read_text().splitlines()
    record = json.loads(lines[2])
    record["relevant_response_indices"] = [*record["relevant_response_indices"], 9999]
    lines[2] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    code, _, err = run_cli(["export", copy, "--format", "longmemeval", "--output", tmp_path / "out"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "time_queries/test.jsonl: line 3: relevant_response_indices: response index 9999 is outside" in err
    assert not (tmp_path / "out").exists()
