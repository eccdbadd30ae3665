"""A hand-made dataset for the scorer and baselines (used by the other test_eval* files), and reading datasets:
run folders, export folders, and what is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from gen.errors import GenError
from gen.eval.dataset import open_dataset
from tests.conftest import REPO, run_cli

# Two conversations. c1: session 1 about a kitten (0-2), session 2 about a marathon (3-5); c2: one session.
LOG = {
    "c1": [
        (1, "2024-03-01T10:00:00", "I adopted a kitten named Biscuit."),
        (1, "2024-03-01T10:00:10", "Congratulations! How old is she?"),
        (1, "2024-03-01T10:00:20", "Eight weeks. She sleeps all day."),
        (2, "2024-03-05T18:00:00", "My marathon training starts tomorrow."),
        (2, "2024-03-05T18:00:10", "Which marathon are you running?"),
        (2, "2024-03-05T18:00:20", "The harbor marathon in April."),
    ],
    "c2": [
        (1, "2024-04-01T09:00:00", "Did the garden survive the frost?"),
        (1, "2024-04-01T09:00:05", "Only the tulips."),
        (1, "2024-04-01T09:00:09", "Tulips are tough."),
    ],
}
NOW = {"c1": "2024-03-05T19:00:00", "c2": "2024-04-01T10:00:00"}


def time_query(qid, conversation, test, relevant, question="What did we discuss?", now=None):
    return {
        "question_id": qid,
        "conversation_id": conversation,
        "test": test,
        "question": question,
        "now": now or NOW[conversation],
        "relevant_response_indices": relevant,
    }


TIME_QUERIES = [
    time_query("q1", "c1", "session", [0, 1, 2], "What did we discuss in session 1?"),
    time_query("q2", "c1", "session", [3, 4, 5], "What did we discuss in session 2?"),
    time_query("q3", "c1", "dates", [3, 4, 5], "Tell me about Biscuit the kitten"),
    time_query("q4", "c2", "dates", [0, 1, 2], "What did we discuss on April 1st?"),
]
TIME_CONTENT = [
    {
        "question_id": "t1",
        "conversation_id": "c1",
        "reference_kind": "date",
        "question": "Which pet did I adopt on March 1st?",
        "relevant_response_indices": [0],
    }
]
AMBIGUOUS = [
    {
        "question_id": "a1",
        "conversation_id": "c1",
        "test": "session",
        "dialogue": [
            {"speaker": "Ann", "text": "In session 2 we talked about the marathon."},
            {"speaker": "Bob", "text": "Yes, we did."},
            {"speaker": "Ann", "text": "Can you summarize it?"},
        ],
        "final_utterance": "Can you summarize it?",
        "now": NOW["c1"],
        "relevant_response_indices": [3, 4, 5],
    }
]


def log_records() -> list[dict]:
    return [
        {
            "conversation_id": conversation,
            "response_index": index,
            "session_index": session,
            "speaker": "Ann" if index % 2 == 0 else "Bob",
            "text": text,
            "timestamp": stamp,
        }
        for conversation, responses in LOG.items()
        for index, (session, stamp, text) in enumerate(responses)
    ]


def write_run_folder(folder: Path, configs: dict[str, list[dict]] | None = None) -> Path:
    """A run folder as `gen run` lays it out (run.json, <config>/test.jsonl), with only the fields read here."""
    if configs is None:
        configs = {
            "log": log_records(),
            "conversations": [
                {"conversation_id": c, "now": now, "num_responses": len(LOG[c])} for c, now in NOW.items()
            ],
            "time_queries": TIME_QUERIES,
            "ambiguous_time_queries": AMBIGUOUS,
            "time_content_questions": TIME_CONTENT,
        }
    folder.mkdir(parents=True, exist_ok=True)
    report = {"split": "test", "configs": {}}
    for name, rows in configs.items():
        path = folder / name / "test.jsonl"
        path.parent.mkdir(exist_ok=True)
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        report["configs"][name] = {"records": len(rows), "path": f"{name}/test.jsonl", "product": name}
        if name in GROUP_FIELDS:  # as the products declare them
            report["configs"][name]["questions"] = {"group_field": GROUP_FIELDS[name], "answer_field": None}
    (folder / "run.json").write_text(json.dumps(report), encoding="utf-8")
    return folder


GROUP_FIELDS = {"time_queries": "test", "ambiguous_time_queries": "test", "time_content_questions": "reference_kind"}


@pytest.fixture
def hand_dataset(tmp_path) -> Path:
    return write_run_folder(tmp_path / "hand")


def test_run_json_declares_each_question_config_as_its_product_does(quickstart):
    report = json.loads((quickstart / "run.json").read_text())
    declared = {name: info["questions"] for name, info in report["configs"].items() if "questions" in info}
    assert declared == {  # by hand, from the two question products of the quickstart
        "time_queries": {
            "group_field": "test",
            "answer_field": None,
            "asked_by_speaker_a": True,
            "answers_from": "gold_answers",
            "answer_computed": False,  # a model writes the gold answers: gen eval --answers may judge them
        },
        "ambiguous_time_queries": {
            "group_field": "test",
            "answer_field": None,
            "asked_by_speaker_a": False,
            "answers_from": "gold_answers",
            "answer_computed": False,  # a model writes the gold answers: gen eval --answers may judge them
        },
    }
    assert open_dataset(quickstart).question_configs == ["time_queries", "ambiguous_time_queries"]


def test_a_run_folder_gives_its_question_configs_and_conversation_lengths(hand_dataset):
    dataset = open_dataset(hand_dataset)
    assert dataset.layout == "run"
    assert dataset.question_configs == ["time_queries", "ambiguous_time_queries", "time_content_questions"]
    assert dataset.conversation_lengths() == {"c1": 6, "c2": 3}
    assert [q.group for q in dataset.questions("time_queries")] == ["session", "session", "dates", "dates"]
    assert [q.group for q in dataset.questions("time_content_questions")] == ["date"]


def test_without_a_log_the_lengths_come_from_conversations(tmp_path):
    folder = write_run_folder(
        tmp_path / "d",
        {"conversations": [{"conversation_id": "c1", "now": NOW["c1"], "num_responses": 6}], "time_queries": []},
    )
    assert open_dataset(folder).conversation_lengths() == {"c1": 6}


def test_a_question_without_relevant_indices_is_named_by_file_line_and_field(tmp_path):
    broken = [*TIME_QUERIES[:2], {**TIME_QUERIES[2], "relevant_response_indices": None}]
    folder = write_run_folder(tmp_path / "d", {"log": log_records(), "time_queries": broken})
    with pytest.raises(GenError) as caught:
        open_dataset(folder).questions("time_queries")
    assert str(caught.value).startswith(f"{folder / 'time_queries' / 'test.jsonl'}: line 3: relevant_response_indices")


def test_a_folder_that_is_no_dataset_is_refused(tmp_path):
    with pytest.raises(GenError, match="not a dataset folder"):
        open_dataset(tmp_path)
    with pytest.raises(GenError, match="no such folder"):
        open_dataset(tmp_path / "missing")


def test_an_export_folder_scores_like_its_run_folder(tmp_path, capsys):
    """A real build of the quickstart, exported to parquet as `gen push` does: the same numbers from both."""
    from gen.export.hub_folder import build_export

    code, _, err = run_cli(["run", REPO / "recipes" / "quickstart.yaml", "--output-dir", tmp_path], capsys)
    assert code == 0, err
    run_dir = tmp_path / "quickstart"
    export = build_export(run_dir, tmp_path / "export")
    assert open_dataset(export.folder).layout == "export"
    questions = [json.loads(line) for line in (run_dir / "time_queries" / "test.jsonl").read_text().splitlines()]
    # every third question gets its own relevant set, the others its first index only
    lines = [
        {"question_id": q["question_id"], "retrieved": q["relevant_response_indices"][: None if n % 3 else 1]}
        for n, q in enumerate(questions)
    ]
    predictions = tmp_path / "p.jsonl"
    predictions.write_text("".join(json.dumps(line) + "\n" for line in lines))
    outputs = []
    for folder in (run_dir, export.folder):
        code, _out, err = run_cli(["eval", folder, "--predictions", predictions, "--json", tmp_path / "s.json"], capsys)
        assert code == 0, err
        outputs.append(json.loads((tmp_path / "s.json").read_text())["configs"])
    assert outputs[0] == outputs[1]
    assert outputs[0]["time_queries"]["missing"] == 0
    assert "ambiguous_time_queries" not in outputs[0]  # no line for it: listed as not scored

    # the parquet holds dates and date-times as such; read back, every record is the JSONL's, ISO text included
    run, exported = open_dataset(run_dir), open_dataset(export.folder)
    for config in ("log", "conversations", "time_queries"):
        jsonl = [item.record for item in run.records(config)]
        parquet = [without_null_params(item.record) for item in exported.records(config)]
        assert parquet == jsonl, config
    # docs/padding-and-now.md works both out by hand: 15:27:16 + 50 min, and 21:15:53 + 50 min
    assert (
        exported.nows()
        == run.nows()
        == {
            "locomo/sample-1": "2024-04-24T16:17:16",
            "locomo/sample-2": "2024-07-16T22:05:53",
        }
    )


def without_null_params(record: dict) -> dict:
    """A parquet row as the JSONL holds it: the params struct has every key, the JSONL only those that apply."""
    if "params" not in record:
        return record
    return {**record, "params": {k: v for k, v in record["params"].items() if v is not None}}
