"""`gen eval --answers` with an LLM judge: the answers to gold answers a model wrote are judged yes or no by the
fake OpenAI-compatible server (replies written by hand below), through the real engine, end to end through the
CLI. The dataset is written by hand: time queries and ambiguous ones whose answers live in `gold_answers` (one
of them an abstention), a time+content config whose records carry a written answer, and a temporal_reasoning
config whose computed answer is scored by exact match and F1 only. Every rate is worked out by hand below."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import run_cli, write_recipe
from tests.fakes.openai_server import FakeOpenAI

KEY = "sk-test-EVALJUDGE-0123456789"
ABSTENTION_RULE = "Rule for a question that cannot be answered"

GOLD = {  # group_id → (gold answer, abstained)
    "g1": ("Dev said his sister was moving to Lisbon in May.", False),
    "g2": ("Ruth said she had finished the first draft of her thesis.", False),
    "g3": ("There is nothing in our conversations from that time.", True),
    "g4": ("They planned a picnic for Saturday.", False),
}


def time_query(qid: str, group: str, test: str) -> dict:
    return {
        "question_id": qid,
        "group_id": group,
        "conversation_id": "c1",
        "test": test,
        "question": f"What did we discuss ({qid})?",
        "relevant_response_indices": [0, 1],
    }


TIME_QUERIES = [
    time_query("q1", "g1", "session"),
    time_query("q2", "g1", "session"),
    time_query("q3", "g2", "session"),
    time_query("q4", "g3", "dates"),
    time_query("q5", "g4", "dates"),
    time_query("q6", "g4", "dates"),
]
AMBIGUOUS = [
    {
        "question_id": "a1",
        "group_id": "g1",
        "conversation_id": "c1",
        "test": "session",
        "dialogue": [
            {"speaker": "Ann", "text": "Back in our first session, remember?"},
            {"speaker": "Ann", "text": "What did we discuss then?"},
        ],
        "final_utterance": "What did we discuss then?",
        "relevant_response_indices": [0],
    },
    {**time_query("a2", "g2", "session"), "question": "And the other time?"},
]
TIME_CONTENT = [
    {
        "question_id": "c1",
        "conversation_id": "c1",
        "reference_kind": "date",
        "question": "What did Dev say about his sister on 3 May?",
        "answer": "That she was moving to Lisbon.",
        "relevant_response_indices": [1],
    }
]
REASONING = [
    {
        "question_id": "t1",
        "conversation_id": "c1",
        "test": "last_mention",
        "question": "When did we last talk about pottery?",
        "answer": "1 May 2023",
        "relevant_response_indices": [1],
    }
]

# The system's answers and what the scripted judge says to each ("garbage": a reply that never parses).
ANSWERS = {
    "q1": ("His sister moves to Lisbon in May.", "yes"),
    "q2": ("Something about a trip.", "No"),  # any letter case is read
    "q3": ("Ruth mentioned her thesis draft was done.", "garbage"),
    "q4": ("I cannot tell: we did not talk about anything then.", "yes"),
    # q5: no line at all
    "q6": ("A picnic on Saturday.", "yes"),
    "a1": ("Lisbon, in May.", "yes"),
    "a2": ("   ", None),  # only spaces: no answer, no call
    "c1": ("She is moving to Lisbon.", "yes"),
    "t1": ("1 May 2023", None),  # a computed answer: exact match and F1 only
}
# By hand (rate = yes / (questions − not judged); no answer counts as no):
#   time_queries  session: q1 yes, q2 no, q3 not judged      → 3 questions, 2 scored, 1 yes, 0.500
#                 dates:   q4 yes, q5 no answer, q6 yes       → 3 questions, 3 scored, 2 yes, 0.667
#                 pooled:  6 questions, 1 not judged, 5 scored, 3 yes → 0.600
#   ambiguous_time_queries  session: a1 yes, a2 blank         → 2 questions, 2 scored, 1 yes, 0.500
#   time_content_questions  date: c1 yes                      → 1 question, 1 scored, 1 yes, 1.000
#   temporal_reasoning: not judged (computed), exact match 1 for t1
# Calls: q1 q2 q3 q4 q6 a1 c1 judged, q3 twice (its reply and the correction round); json_schema, so no probe.
EXPECTED_CALLS = 7 + 1


def judged_answer(request) -> str:
    """The system's answer as the judge prompt shows it (the first user message: the correction round adds one)."""
    first_user = next(m["content"] for m in request.messages if m["role"] == "user")
    return re.search(r"^<<<\n(.*)\n>>>$", first_user, re.M | re.S).group(1)


def script(request):
    verdict = {text: verdict for text, verdict in ANSWERS.values()}[judged_answer(request)]
    if verdict == "garbage":
        return "Hard to say, really."
    return {"reason": "scripted", "verdict": verdict}


def write_jsonl(path, rows):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def declared(group_field: str, **more) -> dict:
    return {"group_field": group_field, "answer_field": None, "asked_by_speaker_a": False, "answers_from": None, **more}


def dataset(folder, base_url: str):
    """A run folder as `gen run` lays it out. temporal_reasoning's declaration is one from before answer_computed
    existed: an answer field without it is read as computed (temporal_reasoning was the only one)."""
    written = {"answers_from": "gold_answers", "answer_computed": False}
    configs = {
        "time_queries": (TIME_QUERIES, declared("test", **written)),
        "ambiguous_time_queries": (AMBIGUOUS, declared("test", **written)),
        "time_content_questions": (
            TIME_CONTENT,
            declared("reference_kind", answer_field="answer", answer_computed=False),
        ),
        "temporal_reasoning": (REASONING, {"group_field": "test", "answer_field": "answer"}),
        "gold_answers": (
            [{"group_id": g, "answer": a, "abstained": abstained} for g, (a, abstained) in GOLD.items()],
            None,
        ),
    }
    report = {"configs": {}}
    for name, (rows, questions) in configs.items():
        write_jsonl(folder / name / "test.jsonl", rows)
        report["configs"][name] = {"path": f"{name}/test.jsonl", **({"questions": questions} if questions else {})}
    (folder / "run.json").write_text(json.dumps(report))
    llm = {"writer": endpoint(base_url), "judge": endpoint(base_url, model="fake-judge")}
    write_recipe(folder / "recipe.yaml", {"name": "answers-hand", "llm": llm, "products": []})
    return folder


def endpoint(base_url: str, model: str = "fake-writer") -> dict:
    return {"model": model, "base_url": base_url, "api_key_env": "GEN_TEST_KEY", "structured_output": "json_schema"}


@pytest.fixture
def judged(tmp_path, monkeypatch):
    monkeypatch.setenv("GEN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GEN_TEST_KEY", KEY)
    answers = tmp_path / "mine.jsonl"
    write_jsonl(answers, [{"question_id": qid, "answer": text} for qid, (text, _) in ANSWERS.items()])
    with FakeOpenAI(script) as server:
        yield server, dataset(tmp_path / "run", server.base_url), answers


def tally(questions: int, no_answer: int, not_judged: int, yes: int) -> dict:
    scored = questions - not_judged
    return {
        "questions": questions,
        "no_answer": no_answer,
        "not_judged": not_judged,
        "scored": scored,
        "yes": yes,
        "accuracy": pytest.approx(yes / scored),
    }


EXPECTED = {
    "time_queries": {
        "tests": {"session": tally(3, 0, 1, 1), "dates": tally(3, 1, 0, 2)},
        "pooled": tally(6, 1, 1, 3),
    },
    "ambiguous_time_queries": {"tests": {"session": tally(2, 1, 0, 1)}, "pooled": tally(2, 1, 0, 1)},
    "time_content_questions": {"tests": {"date": tally(1, 0, 0, 1)}, "pooled": tally(1, 0, 0, 1)},
}


def rows(out: str) -> dict[str, list[str]]:
    """Every printed table row with the judge's columns: label → questions, exact, F1, judged, yes, judge."""
    found = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 7 and parts[1].isdigit():
            found.setdefault(parts[0], []).append(parts[1:])
    return found


def test_the_judge_counts_yes_and_no_per_test_and_pooled_and_a_rerun_asks_nothing(judged, tmp_path, capsys):
    server, folder, answers = judged
    scores = tmp_path / "scores.json"
    args = ["eval", folder, "--answers", answers, "--judge-endpoint", "judge", "--json", scores]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert server.count == EXPECTED_CALLS
    verdicts_path = tmp_path / "mine.verdicts.json"  # the default: beside the answers
    verdicts = json.loads(verdicts_path.read_text())
    assert verdicts["configs"] == EXPECTED
    configs = json.loads(scores.read_text())["configs"]
    assert {name: {k: c["judge"][k] for k in ("tests", "pooled")} for name, c in configs.items() if c["judge"]} == (
        EXPECTED
    )
    assert configs["temporal_reasoning"]["judge"] is None and not configs["temporal_reasoning"]["written_answers"]
    assert configs["temporal_reasoning"]["pooled"]["exact_match"] == 1.0

    # the printed tables: judged, yes and the rate next to exact match and F1 (time_queries' rows come first)
    printed = rows(out)
    assert [r[3:] for r in printed["session"]] == [["2", "1", "0.500"], ["2", "1", "0.500"]]
    assert [r[3:] for r in printed["dates"]] == [["3", "2", "0.667"]]
    assert [r[3:] for r in printed["pooled"]] == [["5", "3", "0.600"], ["2", "1", "0.500"], ["1", "1", "1.000"]]
    assert "judged yes or no by judge (fake-judge)" in out
    assert "not judged: q3 (parse:" in out and "1 not judged (left out of its rate)" in out

    items = {item["question_id"]: item for item in verdicts["items"]}
    assert list(items) == ["q1", "q2", "q3", "q4", "q5", "q6", "a1", "a2", "c1"]  # dataset order; t1 is not judged
    assert {qid: (i["verdict"], i["by"]) for qid, i in items.items()} == {
        "q1": ("yes", "judge"),
        "q2": ("no", "judge"),
        "q3": (None, "not judged"),
        "q4": ("yes", "judge"),
        "q5": ("no", "no answer"),
        "q6": ("yes", "judge"),
        "a1": ("yes", "judge"),
        "a2": ("no", "no answer"),
        "c1": ("yes", "judge"),
    }
    assert items["q3"]["judge_reply"] == "Hard to say, really." and "correction round" in items["q3"]["failure"]
    assert items["q4"]["abstention"] and not items["q1"]["abstention"]
    assert verdicts["judge"]["calls_made"] == EXPECTED_CALLS and verdicts["judge"]["model"] == "fake-judge"
    assert KEY not in verdicts_path.read_text() and KEY not in out + err

    code, again_out, err = run_cli([*args, "--offline"], capsys)
    assert code == 0, err
    assert server.count == EXPECTED_CALLS  # every reply, the unusable one too, came from the cache
    again = json.loads(verdicts_path.read_text())
    assert again["configs"] == EXPECTED and rows(again_out) == printed
    assert again["judge"]["calls_made"] == 0 and again["judge"]["calls_cached"] == EXPECTED_CALLS
    assert all(item["cached"] for item in again["items"] if item["by"] != "no answer")


def test_the_abstention_question_is_judged_by_the_abstention_rule(judged, capsys):
    server, folder, answers = judged
    code, _, err = run_cli(["eval", folder, "--answers", answers, "--judge-endpoint", "judge"], capsys)
    assert code == 0, err
    prompts = {judged_answer(r): r.last_user for r in server.requests if not r.is_correction}
    abstention = prompts[ANSWERS["q4"][0]]
    assert ABSTENTION_RULE in abstention and GOLD["g3"][0] in abstention
    assert "A correct answer:" not in abstention
    plain = prompts[ANSWERS["q1"][0]]
    assert ABSTENTION_RULE not in plain and f"A correct answer: {GOLD['g1'][0]}" in plain
    assert "What did we discuss (q1)?" in plain
    dialogue = prompts[ANSWERS["a1"][0]]  # an ambiguous question is shown with the turns that name the time
    assert "Ann: Back in our first session, remember?\nAnn: What did we discuss then?" in dialogue
    assert "That she was moving to Lisbon." in prompts[ANSWERS["c1"][0]]  # a record's own written answer
    request = next(r for r in server.requests if not r.is_correction)
    assert request.model == "fake-judge" and request.response_format["type"] == "json_schema"


def test_without_a_judge_nothing_is_asked_and_the_written_answers_are_said_not_judged(judged, tmp_path, capsys):
    server, folder, answers = judged
    code, out, err = run_cli(["eval", folder, "--answers", answers], capsys)
    assert code == 0, err
    assert server.count == 0 and not (tmp_path / "mine.verdicts.json").exists()
    for config in ("time_queries", "ambiguous_time_queries", "time_content_questions"):
        line = next(line for line in out.splitlines() if line.startswith(f"{config}:"))
        assert "written gold answers, not judged" in line and "--judge-endpoint" in line
    reasoning = next(line for line in out.splitlines() if line.startswith("temporal_reasoning:"))
    assert "not judged" not in reasoning
    assert rows(out) == {}  # no judge columns


def test_a_judge_from_another_file_and_its_verdicts_where_asked(judged, tmp_path, capsys):
    server, folder, answers = judged
    own = write_recipe(tmp_path / "judge.yaml", {"llm": {"mine": endpoint(server.base_url, "fake-judge")}})
    output = tmp_path / "out" / "v.json"
    output.parent.mkdir()
    args = ["eval", folder, "--answers", answers, "--judge-recipe", own, "--verdicts", output]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    assert json.loads(output.read_text())["configs"] == EXPECTED and "by mine (fake-judge)" in out
    assert not (tmp_path / "mine.verdicts.json").exists()


def test_judge_options_that_cannot_apply_get_one_clear_error(judged, tmp_path, capsys):
    server, folder, answers = judged
    predictions = tmp_path / "p.jsonl"
    write_jsonl(predictions, [{"question_id": "q1", "retrieved": [0]}])
    two = write_recipe(tmp_path / "two.yaml", {"llm": {"a": endpoint("x"), "b": endpoint("y")}})
    cases = [
        (["--predictions", predictions, "--judge-endpoint", "judge"], "--judge-endpoint", "with --answers"),
        (["--answers", answers, "--verdicts", tmp_path / "v.json"], "--verdicts", "no judge was named"),
        (["--answers", answers, "--judge-endpoint", "nobody"], "--judge-endpoint", "no endpoint named 'nobody'"),
        (["--answers", answers, "--judge-recipe", two], "--judge-endpoint NAME, one of a, b", "several endpoints"),
        (["--answers", answers, "--judge-endpoint", "judge", "--verdicts", answers], "--verdicts", "--answers"),
    ]
    for extra, where, says in cases:
        code, out, err = run_cli(["eval", folder, *extra], capsys)
        assert code == 2 and where in err and says in err, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1 and out == ""
    assert server.count == 0 and json.loads(answers.read_text().splitlines()[0])["question_id"] == "q1"


def test_a_judge_that_fails_too_often_stops_and_writes_nothing(judged, tmp_path, capsys):
    server, folder, answers = judged
    server.script = lambda request: "no verdict today"
    scores = tmp_path / "scores.json"
    args = ["eval", folder, "--answers", answers, "--judge-endpoint", "judge", "--json", scores]
    code, _, err = run_cli(args, capsys)
    assert code == 1 and "max_reject_rate" in err and "the same command resumes" in err, err
    assert "not judged: q1: parse:" in err and "Traceback" not in err
    assert not (tmp_path / "mine.verdicts.json").exists() and not scores.exists()


def test_a_judge_named_for_computed_answers_only_is_not_asked_and_says_so(judged, tmp_path, capsys):
    server, folder, _ = judged
    only_computed = tmp_path / "t1.jsonl"
    write_jsonl(only_computed, [{"question_id": "t1", "answer": "1 May 2023"}])
    code, out, err = run_cli(
        ["eval", folder, "--answers", only_computed, "--judge-endpoint", "judge", "--questions-from", subset(tmp_path)],
        capsys,
    )
    assert code == 0, err
    assert "the judge was not asked" in out and server.count == 0
    assert not (tmp_path / "t1.verdicts.json").exists()


def subset(tmp_path):
    """An export's list of questions holding temporal_reasoning's alone (as `gen export` writes gen-export.json)."""
    manifest = tmp_path / "export" / "gen-export.json"
    manifest.parent.mkdir()
    manifest.write_text(json.dumps({"configs": {"temporal_reasoning": {"tests": ["t1"]}}}))
    return manifest.parent
