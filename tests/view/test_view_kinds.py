"""The page of each kind of record, the records table's columns, and the rejects grouped by the kind of their
reason: the viewer's app in this process over small runs made by `gen run` (tests/view/product_runs.py), fetched
page by page; `--verdicts` through the real command. Expected values are worked out by hand from the runs'
scripted inputs, or read from the JSON lines with plain json."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path
from urllib.parse import quote

import pytest

from tests.conftest import extra_marks, gen_subprocess, read_jsonl
from tests.test_judge_teabag import RIGHT, WRONG
from tests.view.asgi import viewer_client
from tests.view.product_runs import LONG_WORD, REJECTED_LINE
from tests.view.viewer import VIEW_MODULES

pytestmark = extra_marks("view", *VIEW_MODULES)


def by_id(page: str, element_id: str) -> str:
    """The text inside the element with this id (up to its first closing tag of the same name), unescaped."""
    found = re.search(rf'<(\w+)[^>]* id="{element_id}"[^>]*>(.*?)</\1>', page, re.S)
    assert found, f"no element #{element_id}"
    return html.unescape(re.sub(r"<[^>]+>", "", found[2])).strip()


def cells(page: str, table_id: str, css: str) -> list[str]:
    table = re.search(rf'<table[^>]* id="{table_id}".*?</table>', page, re.S)
    assert table, f"no table #{table_id}"
    return [html.unescape(text) for text in re.findall(rf'<td class="{css}">(.*?)</td>', table[0], re.S)]


def row_number(folder: Path, config: str, match) -> int:
    """The 1-based number of the first record of `config` that `match` accepts (the record page's address)."""
    rows = read_jsonl(folder / config / "test.jsonl")
    return next(n for n, row in enumerate(rows, start=1) if match(row))


# -- persona SQL -----------------------------------------------------------------------------------------------
def test_a_persona_pair_shows_its_lines_its_sql_and_the_one_cell_it_changed(persona_folder):
    # pair 1 is "I live in Oslo." then Speaker 1's "I have two cats.": the label appends the line to Speaker 1's
    # `other`, empty before; nothing else changes
    number = row_number(persona_folder, "persona_sql", lambda row: row["pair_index"] == 1)
    with viewer_client(persona_folder) as client:
        status, page = client.get(f"/records/persona_sql/{number}")
    assert status == 200
    assert by_id(page, "changed-count") == "1 change"
    assert cells(page, "table-after", "changed new") == ["I have two cats."]
    assert cells(page, "table-before", "changed old null") == ["null"]
    assert "I have two cats." in by_id(page, "label-sql") and "Speaker 1" in by_id(page, "label-sql")
    assert re.search(r'<li class="target"><span class="speaker">Speaker 1</span> I have two cats\.</li>', page)


def test_a_rejected_persona_pair_shows_its_reason_and_an_unchanged_table(persona_folder):
    pairs = read_jsonl(persona_folder / "persona_sql" / "test.jsonl")
    number, pair = next((n, p) for n, p in enumerate(pairs, 1) if p["turns"][1]["text"] == REJECTED_LINE)
    with viewer_client(persona_folder) as client:
        status, page = client.get(f"/records/persona_sql/{number}")
    assert status == 200
    assert by_id(page, "reject-reason") == f"Rejected: {pair['reject_reason']}"
    assert by_id(page, "changed-count") == "0 changes"
    assert "changed" not in re.search(r'<table[^>]* id="table-after".*?</table>', page, re.S)[0]  # type: ignore[index]


# -- TeaBag ----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("asker", "answer", "verdict", "nearest"),
    [
        # Ann's fact "Bob quit his job at the bank." shares quit, job, bank with session 4's second turn
        ("Ann", RIGHT, "Correct", "session 4, turn 2: Bob I quit my job at the bank."),
        # Bob's fact "Ann sold her car and bikes to work." shares car and sold with session 3's third turn
        ("Bob", WRONG, "Incorrect", "session 3, turn 3: Ann I sold my car, by the way."),
    ],
)
def test_a_teabag_question_shows_its_verdict_answer_and_the_turn_nearest_its_fact(
    teabag_folders, asker, answer, verdict, nearest
):
    folder, verdicts = teabag_folders
    number = row_number(folder, "teabag", lambda row: row["asker"] == asker)
    record = read_jsonl(folder / "teabag" / "test.jsonl")[number - 1]
    with viewer_client(folder, verdicts) as client:
        status, page = client.get(f"/records/teabag/{number}")
    assert status == 200
    assert by_id(page, "question-title") == record["question"]
    assert by_id(page, "correct-answer") == record["correct_answer"]
    assert by_id(page, "true-fact") == record["contradicted_fact"]
    assert by_id(page, "nearest-turn").startswith(nearest)
    assert by_id(page, "system-answer") == answer
    assert by_id(page, "verdict").startswith(f"verdict {verdict}") or f">{verdict}<" in page
    turns = re.findall(
        r"<li( class=\"asks\")?><span class=\"speaker\">([^<]*)</span> ([^<]*)</li>",
        page.split('id="session6"')[1].split("</ol>")[0],
    )
    assert [(speaker, html.unescape(text)) for _, speaker, text in turns] == [
        (t["speaker"], t["text"]) for t in record["session6"]
    ]
    assert [bool(mark) for mark, _, _ in turns] == [False] * (len(turns) - 1) + [True]  # the question is marked
    assert len(re.findall(r'<section class="history-session"', page)) == 5


def test_a_teabag_question_without_verdicts_has_no_judge_section(teabag_folders):
    folder, _ = teabag_folders
    with viewer_client(folder) as client:
        status, page = client.get("/records/teabag/1")
    assert status == 200 and "<h2>Judge</h2>" not in page and 'id="nearest-turn"' in page


def test_verdicts_that_are_not_a_verdicts_file_or_on_a_run_without_teabag_are_one_message(
    teabag_folders, persona_folder, tmp_path
):
    folder, verdicts = teabag_folders
    bad = tmp_path / "bad.verdicts.json"
    bad.write_text(json.dumps({"items": [{"verdict": "Correct"}]}))
    for run, given, words in ((folder, bad, "names no question"), (persona_folder, verdicts, "no teabag config")):
        done = gen_subprocess("view", run, "--verdicts", given, "--port", "0", timeout=120)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        [line] = done.stderr.strip().splitlines()
        assert line.startswith("error: ") and str(given) in line and words in line


# -- quality labels --------------------------------------------------------------------------------------------
def test_a_quality_turn_shows_its_dialogue_with_each_turns_rewards(quality_folder):
    turns = read_jsonl(quality_folder / "quality_turns" / "test.jsonl")
    log = {row["response_index"]: row["text"] for row in read_jsonl(quality_folder / "log" / "test.jsonl")}
    # response 5, Bob's "Yes your cat ...", is answered "Wrong, not what I asked": feedback -1, gate 0.5
    number = row_number(quality_folder, "quality_turns", lambda row: row["response_index"] == 5)
    with viewer_client(quality_folder) as client:
        status, page = client.get(f"/records/quality_turns/{number}")
    assert status == 200
    rows = re.findall(r'<tr id="turn-(\d+)" class="(current)?"', page)
    assert [int(index) for index, _ in rows] == [t["response_index"] for t in turns]
    assert [index for index, current in rows if current] == ["5"]
    current = page.split('id="turn-5"')[1].split("</tr>")[0]
    assert f'<span class="speaker">Bob</span> {log[5]}</td>' in current and log[5] == "Yes your cat"
    last = page.split('id="turn-7"')[1].split("</tr>")[0]
    assert f"Sorry {LONG_WORD}" in last  # whole on the record page
    assert 'data-meter="feedback reward" data-value="-1.00"' in current
    assert 'data-meter="gate" data-value="0.50"' in current
    # feedback on [-1, 1]: -1 is a bar from the left end to zero, the middle
    assert re.search(
        r'data-meter="feedback reward".*?class="fill negative" style="left: 0\.0%; width: 50\.0%"', current
    )
    first = page.split('id="turn-0"')[1].split("</tr>")[0]
    assert 'data-meter="gate" data-value="–"' in first  # the first turn has no query, so no gate


def test_a_log_response_page_marks_that_response_and_opens_only_its_session(quality_folder):
    log = read_jsonl(quality_folder / "log" / "test.jsonl")
    with viewer_client(quality_folder) as client:
        status, page = client.get("/records/log/6")
    assert status == 200
    marked = re.findall(r'class="response relevant[^"]*" data-response-index="(\d+)"', page)
    assert marked == [str(log[5]["response_index"])]
    opened = re.findall(r'<details class="session \w+" id="session-(\d+)" open>', page)
    assert opened == [str(log[5]["session_index"])]


# -- the records table -----------------------------------------------------------------------------------------
def test_record_columns_get_a_width_by_what_they_hold(quality_folder):
    with viewer_client(quality_folder) as client:
        status, page = client.get("/records/log")
    assert status == 200
    header = re.findall(r'<th class="k-(\w+)" title="([^"]+)"', page)
    kinds = dict((name, kind) for kind, name in header)
    assert kinds["response_index"] == "num" and kinds["session_index"] == "num"
    assert kinds["timestamp"] == "date" and kinds["is_padding"] == "bool"
    assert kinds["conversation_id"] == "id" and kinds["text"] == "text"
    widths = re.findall(r'<col style="width: ([\d.]+)em">', page)
    assert len(widths) == len(header) + 1  # the record number's column first
    # the long word is cut in the table (the record page has it whole)
    table = page.split('id="records"')[1]
    assert LONG_WORD not in table and LONG_WORD[:100] in table


# -- rejects grouped by kind -----------------------------------------------------------------------------------
ONE_KIND = [
    "askers: asked by Ann, Ann; one question by Ann, one by Bob (after 2 attempts)",
    "askers: asked by Caroline, Caroline; one question by Caroline, one by Mel (after 3 attempts)",
    "askers: asked by Bob, Bob; one question by Ann, one by Bob (after 2 attempts)",
]
OTHER_KIND = 'speaker not named: fact 2 ("Ann\'s cat is Miso") names neither Ann nor Bob'


def test_rejects_differing_in_names_and_counts_are_one_group_and_the_overview_counts_run_json(persona_folder, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(persona_folder, copy)
    rejects = [
        {"step": "teabag/questions", "item_id": f"cc/e{n}/questions", "reason": r} for n, r in enumerate(ONE_KIND)
    ]
    rejects.append({"step": "teabag/summary", "item_id": "cc/e9/summary-1", "reason": OTHER_KIND})
    (copy / "rejects.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rejects))
    report = json.loads((copy / "run.json").read_text())
    (copy / "run.json").write_text(json.dumps({**report, "rejects": len(rejects)}))
    with viewer_client(copy) as client:
        status, page = client.get("/rejects")
        assert status == 200
        groups = re.findall(r"<h2>(.*?) <small>\((\d+)\)</small></h2>", page)
        expected = "askers: asked by ‹name›, ‹name›; one question by ‹name›, one by ‹name› (after N attempts)"
        assert [(html.unescape(kind), int(n)) for kind, n in groups] == [
            (expected, 3),
            ('speaker not named: fact N ("…") names neither ‹name› nor ‹name›', 1),
        ]
        assert [html.unescape(r) for r in re.findall(r'<p class="reason">(.*?)</p>', page)] == [*ONE_KIND, OTHER_KIND]
        status, page = client.get("/rejects?reason=" + quote(expected))
        assert status == 200 and len(re.findall(r'<article class="reject">', page)) == 3
        status, page = client.get("/")
        assert by_id(page, "rejected-items") == "4"
