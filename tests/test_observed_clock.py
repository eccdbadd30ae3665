"""Observed clocks: a source whose messages carry times keeps them (chat_logs by default), and every product,
validator and export works on those times. Expected values are the times written in the fixture by hand."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from tests.conftest import read_jsonl, run_cli, write_recipe

DAYS = [datetime(2024, 3, 4, 9, 0), datetime(2024, 3, 6, 18, 30), datetime(2024, 3, 9, 12, 0)]
TEXTS = [
    "I booked the train to Porto for Friday.",
    "Nice, which hotel did you pick?",
    "The small one by the river, near the old bridge.",
    "Send me photos of the river when you are there.",
]


def observed_lines(conversation: str = "c1", step_minutes: int = 1) -> list[dict]:
    """Three sittings of four messages each, `step_minutes` apart (the issue's case: a minute apart)."""
    lines = []
    for day in DAYS:
        for k, text in enumerate(TEXTS):
            when = day + timedelta(minutes=k * step_minutes)
            speaker = "Ann" if k % 2 == 0 else "Bob"
            lines.append(
                {"conversation": conversation, "speaker": speaker, "text": text, "time": f"{when:%Y-%m-%d %H:%M}"}
            )
    return lines


def write_log(tmp_path, lines, name="log.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def recipe(tmp_path, sources, products=None, padding="none", **extra):
    return write_recipe(
        tmp_path / "mine.yaml",
        {
            "name": "mine",
            "seed": 3,
            "sources": sources,
            "timeline": {"padding": {"mode": padding}},
            "products": products or [{"type": "log"}, {"type": "conversations"}],
            **extra,
        },
    )


def run(tmp_path, capsys, recipe_path):
    code, _, err = run_cli(["run", recipe_path, "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    return tmp_path / "out" / "mine"


def test_messages_a_minute_apart_keep_their_own_times(tmp_path, capsys):
    path = write_log(tmp_path, observed_lines())
    folder = run(tmp_path, capsys, recipe(tmp_path, [{"format": "chat_logs", "path": str(path)}]))
    log = read_jsonl(folder / "log" / "test.jsonl")
    assert [row["timestamp"] for row in log[:4]] == [
        "2024-03-04T09:00:00",
        "2024-03-04T09:01:00",
        "2024-03-04T09:02:00",
        "2024-03-04T09:03:00",
    ]
    assert [row["session_index"] for row in log] == [1] * 4 + [2] * 4 + [3] * 4
    row = read_jsonl(folder / "conversations" / "test.jsonl")[0]
    assert row["clock"] == "observed"
    assert row["now"] == "2024-03-09T12:53:00"  # last message 12:03 + now_offset_minutes 50
    report = json.loads((folder / "run.json").read_text())
    assert report["sources"][0]["clock"] == "observed"
    assert report["validation"]["log"]["passed"]
    assert "the clock is observed for log.jsonl (each response keeps the time its source gives it" in " ".join(
        (folder / "README.md").read_text().split()
    )


def test_clock_simulated_keeps_only_each_sittings_first_time(tmp_path, capsys):
    path = write_log(tmp_path, observed_lines())
    source = {"format": "chat_logs", "path": str(path), "clock": "simulated"}
    folder = run(tmp_path, capsys, recipe(tmp_path, [source]))
    log = read_jsonl(folder / "log" / "test.jsonl")
    # 0.46 s per word: 8 words → 3 s, 8 + 6 = 14 words → 6 s (floor of 6.44)
    assert [row["timestamp"] for row in log[:2]] == ["2024-03-04T09:00:03", "2024-03-04T09:00:06"]
    assert read_jsonl(folder / "conversations" / "test.jsonl")[0]["clock"] == "simulated"


def test_time_products_padding_and_exports_work_on_an_observed_clock(tmp_path, capsys):
    first = write_log(tmp_path, observed_lines("c1"), "a.jsonl")
    second = write_log(tmp_path, observed_lines("c2", step_minutes=3), "b.jsonl")
    products = [
        {"type": "log"},
        {"type": "conversations"},
        {"type": "time_queries"},
        {"type": "ambiguous_time_queries"},
    ]
    sources = [{"format": "chat_logs", "path": str(first)}, {"format": "chat_logs", "path": str(second)}]
    folder = run(tmp_path, capsys, recipe(tmp_path, sources, products, padding="none"))
    report = json.loads((folder / "run.json").read_text())
    assert all(result["passed"] for result in report["validation"].values()), report["validation"]
    queries = read_jsonl(folder / "time_queries" / "test.jsonl")
    assert queries, "time queries were made"
    log = {(r["conversation_id"], r["response_index"]): r for r in read_jsonl(folder / "log" / "test.jsonl")}
    # a question about one date points at exactly the fixture's messages of that date (by their written times)
    by_date = [q for q in queries if q["params"].get("date") and q["test"] != "today"]
    assert by_date
    for query in by_date:
        day = query["params"]["date"]
        expected = sorted(i for (c, i), row in log.items() if c == query["conversation_id"] and row["date"] == day)
        assert query["relevant_response_indices"] == expected, query
    code, _, err = run_cli(["export", folder, "--format", "beir", "--output", tmp_path / "beir"], capsys)
    assert code == 0, err
    corpus = (tmp_path / "beir").rglob("corpus.jsonl")
    assert any("Porto" in path.read_text() for path in corpus)


def test_donor_padding_after_an_observed_clock_is_simulated_after_the_last_message(tmp_path, capsys):
    first = write_log(tmp_path, observed_lines("c1") + observed_lines("c2", step_minutes=2))
    folder = run(tmp_path, capsys, recipe(tmp_path, [{"format": "chat_logs", "path": str(first)}], padding="donor"))
    rows = {r["conversation_id"]: r for r in read_jsonl(folder / "conversations" / "test.jsonl")}
    # after_minutes 60 from the last start 12:00 → 13:00; last message 12:03 + 20 + 1 minutes is earlier
    assert rows["chat_logs/c1"]["session_starts"][-1] == "2024-03-09T13:00:00"
    assert json.loads((folder / "run.json").read_text())["validation"]["conversations"]["passed"]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda lines: lines[5].pop("time"), "line 6: time: this message has no time"),
        (
            lambda lines: lines[2].update(time="2024-03-04 08:00"),
            "line 3: time: this message (2024-03-04 08:00:00) is earlier",
        ),
        (
            lambda lines: lines[1].update(time="2024-03-04T09:01:00+01:00"),
            "line 2: time: the time '2024-03-04T09:01:00+01:00' has a UTC offset",
        ),
    ],
)
def test_bad_observed_times_are_one_error_naming_the_line(tmp_path, capsys, change, said):
    lines = observed_lines()
    change(lines)
    path = write_log(tmp_path, lines)
    code, _, err = run_cli(["validate", recipe(tmp_path, [{"format": "chat_logs", "path": str(path)}])], capsys)
    assert code == 2 and said in err and "log.jsonl" in err and "Traceback" not in err, err


def test_overlapping_sessions_are_refused_naming_both(tmp_path, capsys):
    lines = observed_lines()[:8]
    for line in lines[:4]:
        line["session"] = "a"
    for line in lines[4:]:
        line["session"] = "b"
    lines[4]["time"] = "2024-03-04 09:02"  # session b starts before session a's last message (09:03)
    lines[5]["time"] = "2024-03-04 09:04"
    code, _, err = run_cli(
        ["validate", recipe(tmp_path, [{"format": "chat_logs", "path": str(write_log(tmp_path, lines))}])], capsys
    )
    assert (
        code == 2 and "line 5: time: this session starts at 2024-03-04 09:02:00, before the session from line 1" in err
    )


def test_times_with_offsets_are_converted_to_utc(tmp_path, capsys):
    lines = observed_lines()[:4]
    for line in lines:
        line["time"] = line["time"].replace(" ", "T") + ":00+02:00"
    folder = run(tmp_path, capsys, recipe(tmp_path, [{"format": "chat_logs", "path": str(write_log(tmp_path, lines))}]))
    assert [r["timestamp"] for r in read_jsonl(folder / "log" / "test.jsonl")][:2] == [
        "2024-03-04T07:00:00",
        "2024-03-04T07:01:00",
    ]


def test_same_time_messages_keep_file_order(tmp_path, capsys):
    lines = observed_lines()[:4]
    lines[1]["time"] = lines[0]["time"]
    folder = run(tmp_path, capsys, recipe(tmp_path, [{"format": "chat_logs", "path": str(write_log(tmp_path, lines))}]))
    log = read_jsonl(folder / "log" / "test.jsonl")
    assert [(r["speaker"], r["timestamp"]) for r in log[:2]] == [
        ("Ann", "2024-03-04T09:00:00"),
        ("Bob", "2024-03-04T09:00:00"),
    ]


def test_interleaved_conversations_are_gathered(tmp_path, capsys):
    a, b = observed_lines("a"), observed_lines("b", step_minutes=2)
    mixed = [line for pair in zip(a, b) for line in pair]
    folder = run(tmp_path, capsys, recipe(tmp_path, [{"format": "chat_logs", "path": str(write_log(tmp_path, mixed))}]))
    log = read_jsonl(folder / "log" / "test.jsonl")
    assert [r["timestamp"] for r in log if r["conversation_id"] == "chat_logs/b"][:2] == [
        "2024-03-04T09:00:00",
        "2024-03-04T09:02:00",
    ]
    assert [r["conversation_id"] for r in log][::12] == ["chat_logs/a", "chat_logs/b"]


def test_teabag_reads_an_observed_source(tmp_path):
    from tests.test_teabag_product import ANN, BOB, SESSION_TEXTS, Model, build

    lines = []
    for k, texts in enumerate(SESSION_TEXTS):
        start = datetime(2024, 1, 1, 10, 0) + timedelta(days=3 * k)
        for n, text in enumerate(texts):
            stamp = start + timedelta(minutes=n)
            lines.append({"conversation": "e", "speaker": (ANN, BOB)[n % 2], "text": text, "time": stamp.isoformat()})
    path = write_log(tmp_path, lines)
    rows, _, rejects, _, checks, _, _ = build(tmp_path, Model(), sources=[{"format": "chat_logs", "path": str(path)}])
    assert checks.passed, checks.report()
    assert rejects == [] and [r["question_id"] for r in rows] == ["chat_logs/e/teabag-1", "chat_logs/e/teabag-2"]


def test_redaction_keeps_the_observed_clock_and_each_message_time(tmp_path, capsys):
    """`redact:` rebuilt each conversation without its clock and each turn without its time, so a redacted log
    of people's messages lost the times they were sent (found by the fuzzer's own-log surfaces)."""
    lines = observed_lines()
    lines[0]["text"] = "Mail me at ann@example.com before the train."  # something to redact in the first message
    path = recipe(
        tmp_path, [{"format": "chat_logs", "path": str(write_log(tmp_path, lines))}], redact={"names": ["Ann"]}
    )
    folder = run(tmp_path, capsys, path)
    log = read_jsonl(folder / "log" / "test.jsonl")
    assert [row["timestamp"] for row in log] == [
        f"{day + timedelta(minutes=k):%Y-%m-%dT%H:%M:00}" for day in DAYS for k in range(len(TEXTS))
    ]
    assert log[0]["text"] == "Mail me at [EMAIL] before the train." and log[0]["speaker"] == "[NAME]"
    assert read_jsonl(folder / "conversations" / "test.jsonl")[0]["clock"] == "observed"
