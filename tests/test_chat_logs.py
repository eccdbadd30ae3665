"""The chat_logs source: a user's own messages, times read by python-dateutil in the common forms, ambiguous
numeric dates refused unless `dayfirst` says how to read them, sittings by a session field or by a pause."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from gen.errors import GenError
from gen.sources.chat_logs import read_time
from tests.conftest import read_jsonl, run_cli, write_recipe


@pytest.mark.parametrize(
    ("text", "dayfirst", "expected"),
    [
        ("2023-05-08 13:56", None, datetime(2023, 5, 8, 13, 56)),
        ("2023-05-08T13:56:04", None, datetime(2023, 5, 8, 13, 56, 4)),
        ("8 May 2023, 1:56 pm", None, datetime(2023, 5, 8, 13, 56)),
        ("May 8, 2023 1:56 PM", None, datetime(2023, 5, 8, 13, 56)),
        ("13/05/2023 09:00", None, datetime(2023, 5, 13, 9, 0)),  # 13 cannot be a month
        ("05/05/2023 09:00", None, datetime(2023, 5, 5, 9, 0)),  # either way the same day
        ("05/08/23 10:00", True, datetime(2023, 8, 5, 10, 0)),
        ("05/08/23 10:00", False, datetime(2023, 5, 8, 10, 0)),
        ("2023-05-08 13:56", True, datetime(2023, 5, 8, 13, 56)),  # year first is always year-month-day
        ("8 May 2023, 1:56 pm", False, datetime(2023, 5, 8, 13, 56)),
    ],
)
def test_times_in_the_forms_people_have(text, dayfirst, expected):
    assert read_time(text, dayfirst, "log.jsonl", "record 1") == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("05/08/23 10:00", "reads as day first or month first"),
        ("13:56", "has no date"),
        ("yesterday-ish", "cannot read the time"),
    ],
)
def test_times_that_cannot_be_read_for_sure_are_refused(text, message):
    with pytest.raises(GenError, match=message):
        read_time(text, None, "log.jsonl", "record 3")


@pytest.mark.parametrize(("text", "dayfirst"), [("13/05/2023 09:00", False), ("05/13/2023 09:00", True)])
def test_a_date_against_the_dayfirst_given_is_refused_not_swapped(text, dayfirst):
    with pytest.raises(GenError, match=r"cannot be read (day|month) first"):
        read_time(text, dayfirst, "log.jsonl", "record 4")


def message(conversation, speaker, text, time, **extra):
    return {"conversation": conversation, "speaker": speaker, "text": text, "time": time, **extra}


def recipe_for(tmp_path, lines, **source):
    log = tmp_path / "log.jsonl"
    log.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return write_recipe(
        tmp_path / "mine.yaml",
        {
            "name": "mine",
            "sources": [{"format": "chat_logs", "path": str(log), **source}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [{"type": "log"}, {"type": "conversations"}],
        },
    )


LINES = [
    message("c1", "Ann", "Morning! Did you sleep well?", "2023-05-08 09:00"),
    message("c1", "Bob", "Like a log, thanks.", "2023-05-08 09:01"),
    message("c1", "Ann", "Back again after lunch.", "8 May 2023, 1:56 pm"),  # 4 hours later: a new sitting
    message("c1", "Bob", "Welcome back.", "8 May 2023, 1:58 pm"),
    message("c2", "Cy", "Hello there.", "May 9, 2023 8:00 AM", session="a"),
    message("c2", "Di", "Hi Cy.", "May 9, 2023 8:45 AM", session="a"),  # a long pause, but the same session
    message("c2", "Cy", "An hour later, a new session.", "May 9, 2023 9:40 AM", session="b"),
    message("c2", "Di", "Noted.", "May 9, 2023 9:41 AM", session="b"),
]


def test_a_run_starts_each_sitting_at_its_first_message(tmp_path, capsys):
    code, _, err = run_cli(["run", recipe_for(tmp_path, LINES), "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    rows = {r["conversation_id"]: r for r in read_jsonl(tmp_path / "out" / "mine" / "conversations" / "test.jsonl")}
    assert rows["chat_logs/c1"]["session_starts"] == ["2023-05-08T09:00:00", "2023-05-08T13:56:00"]
    assert rows["chat_logs/c2"]["session_starts"] == ["2023-05-09T08:00:00", "2023-05-09T09:40:00"]
    log = read_jsonl(tmp_path / "out" / "mine" / "log" / "test.jsonl")
    assert [(r["session_index"], r["speaker"]) for r in log if r["conversation_id"] == "chat_logs/c1"] == [
        (1, "Ann"),
        (1, "Bob"),
        (2, "Ann"),
        (2, "Bob"),
    ]


def test_a_longer_session_break_keeps_one_sitting(tmp_path, capsys):
    recipe = recipe_for(tmp_path, LINES[:4], session_break_minutes=300)
    code, _, err = run_cli(["run", recipe, "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    row = read_jsonl(tmp_path / "out" / "mine" / "conversations" / "test.jsonl")[0]
    assert row["session_starts"] == ["2023-05-08T09:00:00"]


@pytest.mark.parametrize(
    ("lines", "source", "said"),
    [
        ([message("c", "A", "x", "05/08/23 10:00"), message("c", "B", "y", "05/08/23 10:01")], {}, "line 1: time:"),
        (
            [message("c", "A", "x", "2023-05-08 10:00"), message("c", "B", "y", "2023-05-08 09:00")],
            {},
            "line 2: time:",
        ),
        (
            [
                message("c", "A", "x", "2023-05-08 10:00"),
                message("c", "B", "y", "2023-05-08 10:01"),
                message("c", "C", "z", "2023-05-08 10:02"),
            ],
            {},
            "conversation c, from line 1: speaker: 3 distinct speakers",
        ),
        ([{"conversation": "c", "speaker": "A", "time": "2023-05-08 10:00"}], {}, "line 1: text: missing"),
    ],
)
def test_bad_logs_are_one_error_naming_the_record_and_field(tmp_path, capsys, lines, source, said):
    code, _, err = run_cli(["validate", recipe_for(tmp_path, lines, **source)], capsys)
    assert code == 2 and said in err and "log.jsonl" in err and "Traceback" not in err


def test_dayfirst_reads_the_ambiguous_dates(tmp_path, capsys):
    lines = [message("c", "A", "x", "05/08/23 10:00"), message("c", "B", "y", "05/08/23 10:01")]
    code, _, err = run_cli(["run", recipe_for(tmp_path, lines, dayfirst=True), "--output-dir", tmp_path / "o"], capsys)
    assert code == 0, err
    assert read_jsonl(tmp_path / "o" / "mine" / "conversations" / "test.jsonl")[0]["session_starts"] == [
        "2023-08-05T10:00:00"
    ]
