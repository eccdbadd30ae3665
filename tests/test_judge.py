"""`gen judge`: a system's answers to teabag questions, judged by the fake OpenAI-compatible server through the
real engine and openai client, end to end through the CLI. The records are written by hand in the teabag
shape; the success rates are worked out by hand below."""

from __future__ import annotations

import json
import re

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tests.conftest import run_cli, write_recipe
from tests.fakes.openai_server import FakeOpenAI, Reply

KEY = "sk-test-JUDGE-0123456789"


def record(question_id: str, source: str, asker: str, answerer: str, question: str, truth: str, answer: str):
    episode = question_id.rsplit("/", 1)[0]
    return {
        "question_id": question_id,
        "source": source,
        "episode_id": episode,
        "asker": asker,
        "answerer": answerer,
        "question": question,
        "correct_answer": answer,
        "contradicted_fact": truth,
        "session6": [
            {"speaker": answerer, "text": "It has been a busy month."},
            {"speaker": asker, "text": question},
        ],
    }


QUESTIONS = [
    record(
        "cc/episode-1/teabag-1",
        "cc",
        "Mia",
        "Leo",
        "How was your trip to Tokyo?",
        "Leo has never been to Japan.",
        "I have never been to Japan.",
    ),
    record(
        "cc/episode-1/teabag-2",
        "cc",
        "Leo",
        "Mia",
        "Is your cat still scratching the sofa?",
        "Mia has a dog, not a cat.",
        "I have a dog, not a cat.",
    ),
    record(
        "cc/episode-2/teabag-1",
        "cc",
        "Ana",
        "Ben",
        "Do you still play the violin?",
        "Ben plays the cello.",
        "It is the cello I play.",
    ),
    record(
        "msc/episode-7/teabag-1",
        "msc",
        "Speaker 1",
        "Speaker 2",
        "Are you enjoying retirement?",
        "Speaker 2 still works as a nurse.",
        "I have not retired, I am still nursing.",
    ),
    record(
        "msc/episode-7/teabag-2",
        "msc",
        "Speaker 2",
        "Speaker 1",
        "How is the new house in Ohio?",
        "Speaker 1 moved to Texas.",
        "We moved to Texas, not Ohio.",
    ),
    record(
        "msc/episode-9/teabag-1",
        "msc",
        "Speaker 1",
        "Speaker 2",
        "Did you finish the marathon?",
        "Speaker 2 signed up for a half marathon.",
        "It was a half marathon.",
    ),
    record(
        "msc/episode-9/teabag-2",
        "msc",
        "Speaker 2",
        "Speaker 1",
        "Has your brother found a job?",
        "Speaker 1 has a sister, no brother.",
        "I do not have a brother.",
    ),
]

# The system's answers and what the scripted judge makes of each one.
ANSWERS = {
    "cc/episode-1/teabag-1": ("I have not been to Japan, you must be thinking of someone else.", "Correct"),
    "cc/episode-1/teabag-2": ("Yes, the cat keeps ruining it!", "Incorrect"),
    # cc/episode-2/teabag-1: no line at all
    "msc/episode-7/teabag-1": ("Retired? No, still at the hospital.", "correct"),  # any case is accepted
    "msc/episode-7/teabag-2": ("Texas actually, but the house is great.", "Correct"),
    "msc/episode-9/teabag-1": ("Half of one, yes!", "garbage"),  # never parses: not judged
    "msc/episode-9/teabag-2": ("   ", None),  # blank: no answer, no call
}
# By hand:
#   cc:  3 questions; teabag-1 Correct, teabag-2 Incorrect, episode-2 no answer (Incorrect) → 1 / 3 = 0.333
#   msc: 4 questions; 7/1 Correct, 7/2 Correct, 9/1 not judged (left out), 9/2 blank (Incorrect) → 2 / 3 = 0.667
#   all: 7 questions, 1 not judged, 6 scored, 3 Correct → 3 / 6 = 0.500
EXPECTED = {
    "cc": {"questions": 3, "no_answer": 1, "not_judged": 0, "scored": 3, "correct": 1, "success_rate": 1 / 3},
    "msc": {"questions": 4, "no_answer": 1, "not_judged": 1, "scored": 3, "correct": 2, "success_rate": 2 / 3},
    "all": {"questions": 7, "no_answer": 2, "not_judged": 1, "scored": 6, "correct": 3, "success_rate": 0.5},
}
# calls: the structured-output probe, 4 answers judged at once, the garbage one twice (reply + correction round)
EXPECTED_REQUESTS = 1 + 4 + 2


def is_probe(request) -> bool:
    return "Reply with the JSON object" in request.last_user


def judged_answer(request) -> str:
    """The system's answer as the judge prompt shows it (the first user message: the correction round adds one)."""
    first_user = next(m["content"] for m in request.messages if m["role"] == "user")
    return re.search(r"^<<<\n(.*)\n>>>$", first_user, re.M | re.S).group(1)


def script(request):
    if is_probe(request):
        return {"ok": True}
    verdict = {text: verdict for text, verdict in ANSWERS.values()}[judged_answer(request)]
    if verdict == "garbage":
        return "I would rather not say."
    return {"reason": "scripted", "verdict": verdict}


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def llm_section(base_url: str, **more) -> dict:
    return {"main": {"model": "fake-judge", "base_url": base_url, "api_key_env": "GEN_TEST_KEY", **more}}


def run_folder(folder, base_url: str, llm: dict | None = None):
    """A run folder as `gen run` lays it out: run.json naming the config's file, the records, recipe.yaml."""
    write_jsonl(folder / "teabag" / "test.jsonl", QUESTIONS)
    (folder / "run.json").write_text(json.dumps({"configs": {"teabag": {"path": "teabag/test.jsonl"}}}))
    recipe = {
        "name": "teabag-hand",
        "sources": [{"format": "cc", "path": "cc.json"}],
        "llm": llm or llm_section(base_url),
        "products": [{"type": "teabag", "endpoint": "main"}],
    }
    write_recipe(folder / "recipe.yaml", recipe)
    return folder


def answers_file(path):
    rows = [{"question_id": qid, "answer": text} for qid, (text, _) in ANSWERS.items()]
    return write_jsonl(path, rows)


@pytest.fixture
def judge(tmp_path, monkeypatch):
    monkeypatch.setenv("GEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GEN_TEST_KEY", KEY)
    with FakeOpenAI(script) as server:
        yield server, run_folder(tmp_path / "run", server.base_url), answers_file(tmp_path / "mine.jsonl")


def table(out: str) -> dict[str, list[str]]:
    """The printed rows by source: questions, scored, correct, success."""
    rows = {}
    for line in out.splitlines():
        parts = line.split()
        if parts and parts[0] in ("cc", "msc", "all") and len(parts) == 5:
            rows[parts[0]] = parts[1:]
    return rows


def assert_expected(out: str, verdicts: dict) -> None:
    assert table(out) == {
        name: [str(e["questions"]), str(e["scored"]), str(e["correct"]), f"{e['success_rate']:.3f}"]
        for name, e in EXPECTED.items()
    }
    assert verdicts["sources"] == {name: pytest.approx(EXPECTED[name]) for name in ("cc", "msc")}
    assert verdicts["overall"] == pytest.approx(EXPECTED["all"])


def test_judge_scores_by_hand_and_a_rerun_makes_no_calls(judge, tmp_path, capsys):
    server, folder, answers = judge
    code, out, err = run_cli(["judge", folder, "--answers", answers], capsys)
    assert code == 0, err
    assert server.count == EXPECTED_REQUESTS
    verdicts_path = tmp_path / "mine.verdicts.json"  # the default: beside the answers
    verdicts = json.loads(verdicts_path.read_text())
    assert_expected(out, verdicts)
    assert "2 without an answer (scored Incorrect), 1 not judged" in out
    assert "not judged: msc/episode-9/teabag-1 (parse:" in out

    items = {item["question_id"]: item for item in verdicts["items"]}
    assert list(items) == [q["question_id"] for q in QUESTIONS]  # every question, in dataset order
    assert {qid: (i["verdict"], i["by"]) for qid, i in items.items()} == {
        "cc/episode-1/teabag-1": ("Correct", "judge"),
        "cc/episode-1/teabag-2": ("Incorrect", "judge"),
        "cc/episode-2/teabag-1": ("Incorrect", "no answer"),
        "msc/episode-7/teabag-1": ("Correct", "judge"),
        "msc/episode-7/teabag-2": ("Correct", "judge"),
        "msc/episode-9/teabag-1": (None, "not judged"),
        "msc/episode-9/teabag-2": ("Incorrect", "no answer"),
    }
    assert json.loads(items["cc/episode-1/teabag-2"]["judge_reply"]) == {"reason": "scripted", "verdict": "Incorrect"}
    rejected = items["msc/episode-9/teabag-1"]
    assert rejected["judge_reply"] == "I would rather not say." and "correction round" in rejected["failure"]
    assert verdicts["judge"]["calls_made"] == 6 and verdicts["judge"]["model"] == "fake-judge"
    assert KEY not in verdicts_path.read_text() and KEY not in out + err

    code, out, err = run_cli(["judge", folder, "--answers", answers, "--offline"], capsys)
    assert code == 0, err
    assert server.count == EXPECTED_REQUESTS  # nothing asked again: every reply (the failed one too) is cached
    again = json.loads(verdicts_path.read_text())
    assert_expected(out, again)
    assert again["items"] == [{**item, "cached": item["by"] != "no answer"} for item in verdicts["items"]]
    assert again["judge"]["calls_made"] == 0 and again["judge"]["calls_cached"] == 6


def test_the_judge_is_shown_the_question_the_truth_and_the_system_answer(judge, capsys):
    server, folder, answers = judge
    assert run_cli(["judge", folder, "--answers", answers], capsys)[0] == 0
    asked = [r for r in server.requests if not is_probe(r) and judged_answer(r).startswith("Yes, the cat")]
    prompt = asked[0].last_user
    for shown in ("Leo asks Mia", "Is your cat still scratching the sofa?", "Mia has a dog, not a cat."):
        assert shown in prompt
    assert "I have a dog, not a cat." in prompt
    assert asked[0].response_format["type"] == "json_schema"
    assert asked[0].api_key == KEY


def export_folder(folder, recipe_text: str):
    """An export folder as `gen push` writes it: data/<config>/*.parquet, the published recipe.yaml."""
    (folder / "data" / "teabag").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist(QUESTIONS), folder / "data" / "teabag" / "test-00000-of-00001.parquet")
    (folder / "README.md").write_text("---\n---\n")
    (folder / "recipe.yaml").write_text(recipe_text)
    return folder


def test_an_export_folder_is_judged_the_same_with_the_endpoint_from_another_file(judge, tmp_path, capsys):
    server, _, answers = judge
    published = {"name": "teabag-hand", "llm": llm_section("a local endpoint")}  # a local base_url is hidden
    folder = export_folder(tmp_path / "export", yaml.safe_dump(published))
    code, _, err = run_cli(["judge", folder, "--answers", answers], capsys)
    assert code == 2 and "left out when the dataset was published" in err and "--recipe" in err
    assert server.count == 0

    own = write_recipe(tmp_path / "judge.yaml", {"llm": llm_section(server.base_url)})  # only an llm: section
    output = tmp_path / "export-verdicts.json"
    code, out, err = run_cli(
        ["judge", folder, "--answers", answers, "--recipe", own, "--output", output, "--cache-dir", tmp_path / "c2"],
        capsys,
    )
    assert code == 0, err
    assert server.count == EXPECTED_REQUESTS  # a new cache: asked afresh
    assert_expected(out, json.loads(output.read_text()))
    assert not list(tmp_path.glob(".export-verdicts.json.tmp-*"))


BAD_LINES = {
    "not JSON": ('{"question_id": "cc/episode-1/teabag-1", "answer": "no"', "line 2", "not valid JSON"),
    "not an object": ('["cc/episode-1/teabag-1", "no"]', "line 2", "not a JSON object"),
    "no question_id": ('{"answer": "no"}', "line 2: question_id", "question_id is missing"),
    "unknown id": ('{"question_id": "cc/episode-3/teabag-1", "answer": "no"}', "line 2: question_id", "unknown"),
    "duplicate": ('{"question_id": "msc/episode-7/teabag-1", "answer": "no"}', "line 2: question_id", "on line 1"),
    "answer not text": ('{"question_id": "cc/episode-1/teabag-1", "answer": 3}', "line 2: answer", "not a string"),
}


@pytest.mark.parametrize("case", list(BAD_LINES))
def test_a_bad_answers_line_is_one_error_naming_file_and_line_and_nothing_is_asked(judge, tmp_path, case, capsys):
    server, folder, _ = judge
    line, where, says = BAD_LINES[case]
    answers = tmp_path / "bad.jsonl"
    answers.write_text('{"question_id": "msc/episode-7/teabag-1", "answer": "Retired? No."}\n' + line + "\n")
    code, out, err = run_cli(["judge", folder, "--answers", answers], capsys)
    assert code == 2, err
    assert f"{answers}: {where}" in err and says in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and out == ""
    assert server.count == 0 and not (tmp_path / "bad.verdicts.json").exists()


def test_bad_datasets_and_endpoints_get_one_clear_error(judge, tmp_path, capsys):
    server, folder, answers = judge

    def error(*args) -> str:
        code, _, err = run_cli(["judge", *args, "--answers", answers], capsys)
        assert code == 2 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        return err

    assert "no such file" in error(folder, "--recipe", tmp_path / "nope.yaml")
    unknown = error(folder, "--endpoint", "other")
    assert "no endpoint named 'other'" in unknown and "one of main" in unknown
    two = run_folder(tmp_path / "two", server.base_url, {**llm_section(server.base_url), "spare": {"model": "x"}})
    write_recipe(two / "recipe.yaml", {**yaml.safe_load((two / "recipe.yaml").read_text()), "products": []})
    several = error(two)
    assert "several endpoints (main, spare)" in several and "--endpoint NAME" in several
    no_teabag = tmp_path / "no-teabag"
    write_jsonl(no_teabag / "log" / "test.jsonl", [{"conversation_id": "c"}])
    (no_teabag / "run.json").write_text(json.dumps({"configs": {"log": {"path": "log/test.jsonl"}}}))
    assert "no teabag config" in error(no_teabag)
    broken = run_folder(tmp_path / "broken", server.base_url)
    write_jsonl(broken / "teabag" / "test.jsonl", [QUESTIONS[0], {**QUESTIONS[1], "correct_answer": None}])
    assert "teabag/test.jsonl: line 2: correct_answer" in error(broken)
    twice = run_folder(tmp_path / "twice", server.base_url)
    write_jsonl(twice / "teabag" / "test.jsonl", [QUESTIONS[0], QUESTIONS[0]])
    assert "appears twice (first at line 1)" in error(twice)
    assert server.count == 0


def test_the_endpoint_of_the_teabag_entry_judges_when_there_are_several(judge, tmp_path, capsys):
    server, _, answers = judge
    with FakeOpenAI(lambda request: Reply.server_error()) as dead:
        llm = {"spare": llm_section(dead.base_url)["main"], **llm_section(server.base_url)}
        folder = run_folder(tmp_path / "several", server.base_url, llm)  # products: teabag with endpoint main
        code, out, err = run_cli(["judge", folder, "--answers", answers], capsys)
    assert code == 0, err
    assert dead.count == 0 and server.count == EXPECTED_REQUESTS
    assert table(out)["all"] == ["7", "6", "3", "0.500"]


def test_a_judge_that_fails_too_often_stops_and_writes_nothing(judge, tmp_path, capsys):
    server, folder, answers = judge
    server.script = lambda request: script(request) if is_probe(request) else "no verdict today"
    code, _, err = run_cli(["judge", folder, "--answers", answers], capsys)
    assert code == 1 and "max_reject_rate" in err and "the same command resumes" in err
    assert "not judged: cc/episode-1/teabag-1: parse:" in err and "Traceback" not in err
    assert not (tmp_path / "mine.verdicts.json").exists()


def test_an_empty_answers_file_scores_every_question_incorrect_without_a_call(judge, tmp_path, capsys):
    server, folder, _ = judge
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    code, out, err = run_cli(["judge", folder, "--answers", empty], capsys)
    assert code == 0, err
    assert table(out) == {
        "cc": ["3", "3", "0", "0.000"],
        "msc": ["4", "4", "0", "0.000"],
        "all": ["7", "7", "0", "0.000"],
    }
    assert server.count == 0  # not even the probe
    code, _, err = run_cli(["judge", folder, "--answers", empty, "--output", empty], capsys)
    assert code == 2 and "--output: this is the input --answers" in err and empty.read_text() == "\n"
