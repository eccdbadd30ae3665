"""gold_answers: written answers of the time queries, through `gen run` against the fake OpenAI server.

The script below plays the model. It reads the window's lines from the prompt ("[index] time, session,
speaker: text"), so every expected claim, citation, correction and reject is known by hand: a good reply leaves
out the window's first response as a greeting and makes one claim per speaker citing that speaker's other
responses.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gen.products.answers import rules
from gen.products.answers.rules import WindowAnswer
from tests.conftest import read_jsonl, run_cli, write_recipe
from tests.fakes.openai_server import FakeOpenAI

REPO = Path(__file__).resolve().parents[1]
SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"
LINE = re.compile(r"^\[(\d+)\] [^,]+, session (\d+), ([^:]+): ", re.M)


def window_of(prompt: str) -> list[tuple[int, int, str]]:
    """(index, session, speaker) of each line the prompt shows."""
    return [(int(i), int(s), who) for i, s, who in LINE.findall(prompt)]


def good_reply(prompt: str) -> dict:
    lines = window_of(prompt)
    first, rest = lines[0], lines[1:]
    claims = []
    for speaker in dict.fromkeys(who for _, _, who in rest):
        cites = [i for i, _, who in rest if who == speaker]
        claims.append({"text": f"{speaker} talked about things", "cites": cites})
    return {"claims": claims, "left_out": [{"index": first[0], "why": "a greeting"}]}


def session_of(prompt: str) -> int:
    return window_of(prompt)[0][1]


def recipe(tmp_path: Path, base_url: str, *, answers: bool = True, **options) -> Path:
    products: list[dict] = [{"type": "log"}, {"type": "time_queries", "tests": ["session"]}]
    if answers:
        products.append({"type": "gold_answers", **options})
    return write_recipe(
        tmp_path / "recipe.yaml",
        {
            "name": "answers",
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(SAMPLE), "ids": ["sample-2"]}],
            "llm": {
                "main": {
                    "model": "fake-model",
                    "base_url": base_url,
                    "api_key_env": None,
                    "structured_output": "json_schema",
                    "max_retries": 0,
                    "max_reject_rate": 0.5,
                    "seed": 100,  # sample k is sent with seed 100 + k, so a script can tell a new answer
                }
            },
            "products": products,
        },
    )


def run(tmp_path: Path, capsys, base_url: str, **options) -> tuple[int, str, Path]:
    out = tmp_path / "out"
    code, _, err = run_cli(
        ["run", recipe(tmp_path, base_url, **options), "--output-dir", out, "--cache-dir", tmp_path / "cache"], capsys
    )
    return code, err, out / "answers"


def test_answers_cite_the_window_and_the_questions_do_not_change(tmp_path, capsys):
    with FakeOpenAI(lambda req: good_reply(req.last_user)) as server:
        code, err, folder = run(tmp_path, capsys, server.base_url)
        assert code == 0, err
        assert server.count == 3  # sample-2 has three real sessions: one base question, one call each
        prompts = [req.last_user for req in server.requests]
    answers = read_jsonl(folder / "gold_answers" / "test.jsonl")
    questions = read_jsonl(folder / "time_queries" / "test.jsonl")
    windows = {q["group_id"]: q["relevant_response_indices"] for q in questions}
    assert sorted(a["group_id"] for a in answers) == sorted(windows)
    for answer in answers:
        window = windows[answer["group_id"]]
        assert answer["relevant_response_indices"] == window
        assert answer["left_out"] == [{"index": window[0], "why": "a greeting"}]
        cited = sorted(i for claim in answer["claims"] for i in claim["cites"])
        assert cited == window[1:]
        assert answer["answer"] == " ".join(f"{c['text']}." for c in answer["claims"])
        assert (answer["abstained"], answer["model"], answer["sample"]) == (False, "fake-model", 0)
    # the prompt shows exactly the window's responses, each with its speaker and session
    shown = sorted(tuple(i for i, _, _ in window_of(p)) for p in prompts)
    assert shown == sorted(tuple(w) for w in windows.values())
    report = json.loads((folder / "run.json").read_text())
    assert report["validation"]["gold_answers"]["passed"]
    assert report["configs"]["time_queries"]["questions"]["answers_from"] == "gold_answers"
    # the questions are byte for byte those of a run without answers
    plain = tmp_path / "plain"
    plain.mkdir()
    code, _, err = run_cli(
        ["run", recipe(plain, "http://127.0.0.1:9/v1", answers=False), "--output-dir", plain], capsys
    )
    assert code == 0, err
    same = (plain / "answers" / "time_queries" / "test.jsonl").read_bytes()
    assert (folder / "time_queries" / "test.jsonl").read_bytes() == same


def test_a_citation_outside_the_window_is_corrected_once_then_rejected(tmp_path, capsys):
    """Session 2's answer cites response 999 in the reply and again in the correction: it is rejected; the
    other two sessions answer well."""

    def script(req):
        if session_of(req.messages[1]["content"]) != 2:
            return good_reply(req.last_user)
        reply = good_reply(req.messages[1]["content"])
        reply["claims"][0]["cites"].append(999)
        return reply

    with FakeOpenAI(script) as server:
        code, err, folder = run(tmp_path, capsys, server.base_url)
        corrections = [req.last_user for req in server.requests if req.is_correction]
    assert code == 0, err
    assert len(corrections) == 1 and "claim 1 cites response 999, which is not shown" in corrections[0]
    answers = read_jsonl(folder / "gold_answers" / "test.jsonl")
    assert len(answers) == 2
    rejects = [r for r in read_jsonl(folder / "rejects.jsonl") if r.get("step") == "gold_answers"]
    assert len(rejects) == 1 and "999" in rejects[0]["reason"]


def test_a_response_neither_cited_nor_left_out_goes_to_the_correction_round(tmp_path, capsys):
    """The first reply of every window forgets the greeting; the correction names it and the corrected reply
    (the good one) is kept."""

    def script(req):
        reply = good_reply(req.messages[1]["content"])
        if not req.is_correction:
            reply["left_out"] = []
        return reply

    with FakeOpenAI(script) as server:
        code, err, folder = run(tmp_path, capsys, server.base_url)
        corrections = [req for req in server.requests if req.is_correction]
    assert code == 0, err
    assert len(corrections) == 3
    for req in corrections:
        first = window_of(req.messages[1]["content"])[0][0]
        assert f"response {first} is neither cited by a claim nor listed in left_out" in req.last_user
    answers = read_jsonl(folder / "gold_answers" / "test.jsonl")
    assert len(answers) == 3 and all(a["left_out"][0]["why"] == "a greeting" for a in answers)


@pytest.mark.parametrize("verify", [False, True])
def test_the_verifier_checks_each_claim_when_asked(tmp_path, capsys, verify):
    """With verify on, every answer gets one verify call listing its claims; the verifier finds claim 1 of
    session 1's first answer unsupported, so that answer is written again (sample 1, worded differently) and
    confirmed. Off, no verify call is made."""
    verify_calls = []

    def script(req):
        if req.last_user.startswith("Claim 1:"):
            verify_calls.append(req.last_user)
            numbers = [int(n) for n in re.findall(r"^Claim (\d+):", req.last_user, re.M)]
            doubted = ", session 1, " in req.last_user and "again" not in req.last_user
            return {"claims": [{"claim": n, "supported": not (doubted and n == 1), "why": "not said"} for n in numbers]}
        reply = good_reply(req.last_user)
        if req.body.get("seed") == 101:
            for claim in reply["claims"]:
                claim["text"] += " again"
        return reply

    with FakeOpenAI(script) as server:
        code, err, folder = run(tmp_path, capsys, server.base_url, verify=verify)
    assert code == 0, err
    answers = read_jsonl(folder / "gold_answers" / "test.jsonl")
    assert len(answers) == 3
    if verify:
        assert len(verify_calls) == 4  # three answers, one of them written twice
        assert sorted(a["sample"] for a in answers) == [0, 0, 1]
    else:
        assert verify_calls == [] and all(a["sample"] == 0 for a in answers)


def test_the_rule_names_every_problem():
    answer = WindowAnswer.model_validate(
        {
            "claims": [{"text": "A said x", "cites": [3, 7]}],
            "left_out": [{"index": 3, "why": "hi"}, {"index": 9, "why": "?"}],
        }
    )
    assert rules.citation_problems(answer, [3, 4, 5]) == [
        "claim 1 cites response 7, which is not shown",
        "left_out lists response 9, which is not shown",
        "response 3 is both cited and left out",
        "responses 4, 5 are neither cited by a claim nor listed in left_out",
    ]


# --- the answers where the harnesses and gen eval read them ------------------------------------------------------


@pytest.fixture(scope="module")
def answered(tmp_path_factory) -> Path:
    """A finished run with answers for every session question of sample-2 (and ambiguous ones sharing them)."""
    from gen.llm.config import RunSettings
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run as run_recipe
    from gen.products.registry import load

    base = tmp_path_factory.mktemp("answered")
    path = recipe(base, "http://127.0.0.1:9/v1", questions=["time_queries", "ambiguous_time_queries"])
    data = json.loads(json.dumps(__import__("yaml").safe_load(path.read_text())))
    data["products"].insert(2, {"type": "ambiguous_time_queries", "tests": ["session"]})
    with FakeOpenAI(lambda req: good_reply(req.last_user)) as server:
        data["llm"]["main"]["base_url"] = server.base_url
        recipe_obj = load(write_recipe(base / "recipe.yaml", data))[0]
        settings = RunSettings(cache_dir=base / "cache", progress="off")
        folder = run_recipe(recipe_obj, RunOptions(output_dir=base / "out", llm=settings))
        assert server.count == 3  # both configs share the three base questions: one answer each
    return folder


def answer_by_group(folder: Path) -> dict[str, str]:
    return {row["group_id"]: row["answer"] for row in read_jsonl(folder / "gold_answers" / "test.jsonl")}


def test_every_config_loads(answered):
    from tests.test_record_features import loads_whole

    loads_whole(answered)


def test_harness_exports_carry_the_base_questions_answer(answered, tmp_path):
    from gen.export.harness.exporter import export

    answers = answer_by_group(answered)
    for config in ("time_queries", "ambiguous_time_queries"):
        group_of = {row["question_id"]: row["group_id"] for row in read_jsonl(answered / config / "test.jsonl")}
        export(answered, "longmemeval", tmp_path / f"lme-{config}", config)
        instances = json.loads((tmp_path / f"lme-{config}" / f"{config}.json").read_text())
        assert len(instances) == 3
        assert all(i["answer"] == answers[group_of[i["question_id"]]] for i in instances)
        export(answered, "locomo", tmp_path / f"locomo-{config}", config)
        qa = json.loads((tmp_path / f"locomo-{config}" / f"{config}.json").read_text())[0]["qa"]
        assert len(qa) == len(group_of)
        assert all(entry["answer"] == answers[group_of[entry["question_id"]]] for entry in qa)


def test_gen_eval_answers_scores_the_written_answers(answered, tmp_path, capsys):
    """The gold answers themselves score 1; one answer left out scores 0 for its question; a question of a base
    question without an answer is not scored."""
    rows = read_jsonl(answered / "time_queries" / "test.jsonl")
    answers = answer_by_group(answered)
    lines = [{"question_id": r["question_id"], "answer": answers[r["group_id"]]} for r in rows][1:]
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    scores = tmp_path / "scores.json"
    code, _, err = run_cli(["eval", answered, "--answers", path, "--json", scores], capsys)
    assert code == 0, err
    pooled = json.loads(scores.read_text())["configs"]["time_queries"]["pooled"]
    assert pooled["questions"] == len(rows) == 9
    assert pooled["exact_match"] == pytest.approx(8 / 9) and pooled["f1"] == pytest.approx(8 / 9)


def test_an_empty_window_gets_the_abstention_and_no_call(tmp_path):
    """No time query has an empty window today (an empty one gives no question), but the answer of one is fixed:
    the abstention, without asking the model."""
    from gen.llm.config import RunSettings
    from gen.llm.engine import Engine
    from gen.products.answers.gold_answers import GoldAnswers
    from gen.products.answers.options import GoldAnswersOptions
    from gen.products.base import Unit
    from gen.products.registry import load
    from tests.harness import Harness

    with FakeOpenAI(lambda req: good_reply(req.last_user)) as server:
        loaded = load(recipe(tmp_path, server.base_url))[0]
        engine = Engine(loaded.llm, RunSettings(cache_dir=tmp_path / "cache", progress="off"))
        harness = Harness.from_recipe(loaded, engine=engine)
        unit = harness.units[0]
        question = {"group_id": "g-empty", "conversation_id": unit.conversation_id, "test": "dates", "params": {}}
        empty = Unit(
            unit.conversation, unit.timeline, {"time_queries": [{**question, "relevant_response_indices": []}]}
        )
        [records] = list(GoldAnswers(GoldAnswersOptions()).build([empty], harness.ctx))
        assert server.count == 0
    [row] = records["gold_answers"]
    assert row["abstained"] and row["claims"] == [] and row["model"] is None
    assert row["answer"].startswith("We did not talk at that time, so it is not mentioned in our conversations")


def test_plan_preview_and_validate_plan_from_the_questions_the_run_answers(tmp_path, capsys):
    """The answers are planned from the time queries' records, built for planning as a run builds them: sample-2
    has three real sessions, so three calls, none sent; then the run makes exactly those three."""
    with FakeOpenAI(lambda req: good_reply(req.last_user)) as server:
        path = recipe(tmp_path, server.base_url)
        code, out, err = run_cli(["plan", path, "--cache-dir", tmp_path / "cache"], capsys)
        assert code == 0, err
        row = next(line.split() for line in out.splitlines() if line.startswith("gold_answers"))
        assert row[1:4] == ["3", "3", "0"]  # needed, not cached, cached
        code, out, err = run_cli(["preview", path, "--product", "gold_answers", "--index", "2"], capsys)
        assert code == 0, err
        assert "session 3, " in out and "session 2, " not in out  # the third window: the third session alone
        code, out, err = run_cli(["validate", path], capsys)
        assert code == 0, err
        assert server.count == 0
        code, _, err = run(tmp_path, capsys, server.base_url)
        assert code == 0, err
        assert server.count == 3
