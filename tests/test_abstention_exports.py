"""Written gold answers, abstention included, scored by the harnesses' own QA code on gen's exports, and the
abstention question's LongMemEval id read back.

The run is real: `gen run` against the fake OpenAI server, with gold_answers over time_queries and
ambiguous_time_queries (the script of tests/test_gold_answers.py: one claim per speaker, the first response left
out as a greeting) and time_content_questions with their answers (tests/fakes/openai_server.py's tcq_question).
The abstention is time_queries' own (option `abstentions`, test `last_day`): sample-2 talks on 8 and 21 June and
16 July 2024 (today), so none of the seven days before today has a response and one of them is drawn; there is no
real `last_day` question, so the run holds exactly one abstention base question, worded three ways.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from gen.export.harness.exporter import export
from gen.export.harness.longmemeval import harness_id
from gen.export.harness.questions import ExportQuestion
from tests.conftest import extra_marks, read_jsonl, run_cli, write_recipe
from tests.fakes.openai_server import FakeOpenAI, tcq_question
from tests.official import locomo_evaluation
from tests.test_gold_answers import SAMPLE, good_reply

REPO = Path(__file__).resolve().parents[1]
CONFIGS = ("time_queries", "ambiguous_time_queries", "time_content_questions")
UNANSWERABLE = "I will give you an unanswerable question"  # how LongMemEval's abstention judging prompt opens


def script(request):
    """gold_answers prompts list the window ("[index] ..."); time+content prompts say what the question asks."""
    if "It asks about what" in request.last_user:
        return tcq_question(request)
    return good_reply(request.last_user)


@pytest.fixture(scope="module")
def answered(tmp_path_factory) -> Path:
    """The run folder; the fake server's requests are kept beside it (`requests.json`: the user messages)."""
    from gen.llm.config import RunSettings
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run as run_recipe
    from gen.products.registry import load

    base = tmp_path_factory.mktemp("abstain")
    with FakeOpenAI(script) as server:
        recipe = {
            "name": "abstain",
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(SAMPLE), "ids": ["sample-2"]}],
            "llm": {
                "main": {
                    "model": "fake-model",
                    "base_url": server.base_url,
                    "api_key_env": None,
                    "structured_output": "json_schema",
                    "max_retries": 0,
                    "max_reject_rate": 0.5,
                }
            },
            "products": [
                {"type": "log"},
                {"type": "time_queries", "tests": ["session", "last_day"], "abstentions": {"per_test": 1}},
                {"type": "ambiguous_time_queries", "tests": ["session"]},
                {"type": "gold_answers", "questions": ["time_queries", "ambiguous_time_queries"]},
                {"type": "time_content_questions", "per_conversation": 3},
            ],
        }
        loaded = load(write_recipe(base / "recipe.yaml", recipe))[0]
        settings = RunSettings(cache_dir=base / "cache", progress="off")
        folder = run_recipe(loaded, RunOptions(output_dir=base / "out", llm=settings))
        asked = [request.last_user for request in server.requests]
    (base / "requests.json").write_text(json.dumps(asked))
    return folder


def abstaining_ids(folder: Path) -> list[str]:
    """The question ids time_queries marked as abstentions, read from its records."""
    return [row["question_id"] for row in read_jsonl(folder / "time_queries" / "test.jsonl") if row["abstention"]]


@pytest.fixture(scope="module")
def exported(answered, tmp_path_factory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("abstain-exports")
    for name in ("locomo", "longmemeval"):
        export(answered, name, base / name)
    return {"locomo": base / "locomo", "longmemeval": base / "longmemeval"}


def gold_by_question(folder: Path) -> dict[str, str]:
    """question id -> its gold answer, read from the run's records (not through the export code)."""
    by_group = {row["group_id"]: row["answer"] for row in read_jsonl(folder / "gold_answers" / "test.jsonl")}
    found = {}
    for config in ("time_queries", "ambiguous_time_queries"):
        for row in read_jsonl(folder / config / "test.jsonl"):
            if row["group_id"] in by_group:
                found[row["question_id"]] = by_group[row["group_id"]]
    for row in read_jsonl(folder / "time_content_questions" / "test.jsonl"):
        found[row["question_id"]] = row["answer"]
    return found


def locomo_qa(exported: dict[str, Path]) -> list[dict]:
    return [
        entry
        for config in CONFIGS
        for entry in json.loads((exported["locomo"] / f"{config}.json").read_text())[0]["qa"]
    ]


def test_the_run_holds_written_answers_and_one_abstention(answered):
    answers = read_jsonl(answered / "gold_answers" / "test.jsonl")
    assert [a["abstained"] for a in answers] == [False, False, False, True]  # three sessions, then the empty window
    assert answers[-1]["answer"].startswith("We did not talk at that time, so it is not mentioned in our conversations")
    assert len(read_jsonl(answered / "time_content_questions" / "test.jsonl")) == 3
    [question] = {
        (r["test"], r["group_id"]) for r in read_jsonl(answered / "time_queries" / "test.jsonl") if r["abstention"]
    }
    assert question == ("last_day", answers[-1]["group_id"]) and len(abstaining_ids(answered)) == 3


def test_the_abstention_is_answered_without_a_call(answered):
    """The model saw one answer prompt per session (the windows it lists) and three time+content prompts: none for
    the empty window."""
    asked = json.loads((answered.parent.parent / "requests.json").read_text())
    answer_prompts = [prompt for prompt in asked if "It asks about what" not in prompt]
    assert len(asked) == 6 and len(answer_prompts) == 3
    assert all("last_day" not in prompt for prompt in answer_prompts)


def test_locomo_exports_the_abstention_as_its_adversarial_category(answered, exported):
    gold = gold_by_question(answered)
    qa = locomo_qa(exported)
    assert len(qa) == len(gold)
    ids = abstaining_ids(answered)
    abstaining = [entry for entry in qa if entry["question_id"] in ids]
    assert len(abstaining) == 3  # LoCoMo keeps every wording
    for entry in abstaining:  # locomo10.json's category-5 keys, in its order, and gen's id; no answer text
        assert list(entry) == ["question", "evidence", "category", "adversarial_answer", "question_id"]
        assert (entry["evidence"], entry["category"], entry["adversarial_answer"]) == ([], 5, "")
    for entry in qa:
        if entry["question_id"] not in ids:
            assert (entry["category"], entry["answer"]) == (2, gold[entry["question_id"]])


def test_locomo_qa_scorer_gives_the_gold_answers_one(exported):
    """Every gold answer as its own prediction scores 1.0: the written ones by F1, the abstention (gen's abstention
    text, which LoCoMo's entry does not carry: taken from the LongMemEval export) because it says "not mentioned";
    an abstention answered with something scores 0, and a wrong answer to a written one 0 (no word shared with
    "Rover talked about things.": worked out by hand)."""
    qa = locomo_qa(exported)
    abstention_text = abstaining_instance(exported)["answer"]
    right = [dict(e, prediction=e.get("answer", abstention_text)) for e in qa]
    scores, _, _ = locomo_evaluation.eval_question_answering(right, "prediction")
    assert scores == [1.0] * len(qa)
    abstaining = next(e for e in qa if e["category"] == 5)
    guessed = [dict(abstaining, prediction="We talked about the move to Lisbon.")]
    assert locomo_evaluation.eval_question_answering(guessed, "prediction")[0] == [0]
    written = next(e for e in qa if e["category"] == 2)
    wrong = [dict(written, prediction="Nobody knows, honestly")]
    assert locomo_evaluation.eval_question_answering(wrong, "prediction")[0] == [0.0]


def abstaining_instance(exported: dict[str, Path]) -> dict:
    instances = json.loads((exported["longmemeval"] / "time_queries.json").read_text())
    return next(i for i in instances if "_abs" in i["question_id"])


def test_longmemeval_marks_the_abstention_by_its_id_and_the_manifest_maps_it_back(answered, exported):
    instance = abstaining_instance(exported)
    ids = abstaining_ids(answered)
    kept = instance["question_id"].removesuffix("_abs")
    assert instance["question_id"] == f"{kept}_abs" and kept in ids  # one wording per base question
    assert instance["answer"].startswith("We did not talk at that time, so it is not mentioned in our conversations")
    assert (instance["answer_session_ids"], instance["question_type"]) == ([], "temporal-reasoning")
    manifest = json.loads((exported["longmemeval"] / "gen-export.json").read_text())
    assert manifest["configs"]["time_queries"]["harness_ids"] == {f"{kept}_abs": kept}
    assert kept in manifest["configs"]["time_queries"]["tests"]
    for config in ("ambiguous_time_queries", "time_content_questions"):
        assert "harness_ids" not in manifest["configs"][config]  # nothing renamed: the manifest as before


def judge(request) -> str:
    """LongMemEval's two prompts: for an unanswerable question yes when the response says the thing is not
    mentioned; otherwise yes when the response contains the correct answer."""
    prompt = request.last_user
    response = prompt.split("\n\nModel Response: ", 1)[1].split("\n\n", 1)[0]
    if prompt.startswith(UNANSWERABLE):
        return "yes" if "not mentioned" in response.lower() else "no"
    answer = prompt.split("Correct Answer: ", 1)[1].split("\n\nModel Response: ", 1)[0]
    return "yes" if answer.lower() in response.lower() else "no"


@pytest.mark.parametrize("_", [pytest.param(None, id="evaluate_qa", marks=extra_marks("test", "backoff"))])
def test_longmemeval_evaluate_qa_judges_the_abstention_with_its_own_prompt(_, exported, tmp_path):
    instances = [i for c in CONFIGS for i in json.loads((exported["longmemeval"] / f"{c}.json").read_text())]
    references = tmp_path / "references.json"
    references.write_text(json.dumps(instances))
    lines = [{"question_id": i["question_id"], "hypothesis": i["answer"]} for i in instances]
    wrong = next(line for line in lines if not line["question_id"].endswith("_abs"))
    wrong["hypothesis"] = "I do not remember."
    hypotheses = tmp_path / "hypotheses.jsonl"
    hypotheses.write_text("".join(json.dumps(line) + "\n" for line in lines))
    script_path = REPO / "tests" / "official" / "longmemeval_evaluate_qa.py"
    with FakeOpenAI(judge, delay=0.0) as server:
        done = subprocess.run(
            [sys.executable, str(script_path), "gpt-4o-mini", str(hypotheses), str(references)],
            capture_output=True,
            text=True,
            env={"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": server.base_url, "PATH": "/usr/bin:/bin"},
            timeout=120,
        )
        prompts = [request.last_user for request in server.requests]
    assert done.returncode == 0, done.stderr
    # 3 session questions + 1 abstention (time_queries), 3 (ambiguous), 3 (time+content): 10, one of them wrong
    assert len(lines) == 10 and f"Accuracy: {round(9 / 10, 4)}" in done.stdout
    unanswerable = [p for p in prompts if p.startswith(UNANSWERABLE)]
    abstaining = abstaining_instance(exported)
    assert len(unanswerable) == 1 and f"Explanation: {abstaining['answer']}" in unanswerable[0]
    results = Path(f"{hypotheses}.eval-results-gpt-4o-mini").read_text().splitlines()
    labels = {json.loads(line)["question_id"]: json.loads(line)["autoeval_label"]["label"] for line in results}
    assert labels == {line["question_id"]: line is not wrong for line in lines}


def test_a_longmemeval_result_with_the_abs_id_comes_back_as_gens_question(answered, exported, tmp_path, capsys):
    """run_retrieval.py's log names the abstention `<id>_abs`; gen import-predictions gives gen's id back, and gen
    eval reads it as the dataset's question (an unknown id would be refused), leaving it out of retrieval scores."""
    instances = json.loads((exported["longmemeval"] / "time_queries.json").read_text())
    log = tmp_path / "retrieval_log"
    ranked = [{"corpus_id": f"{i['haystack_session_ids'][0]}_1"} for i in instances]
    log.write_text(
        "".join(
            json.dumps({"question_id": i["question_id"], "retrieval_results": {"ranked_items": [item]}}) + "\n"
            for i, item in zip(instances, ranked)
        )
    )
    output = tmp_path / "lme.jsonl"
    args = ["import-predictions", log, "--format", "longmemeval", "--export", exported["longmemeval"]]
    code, _, err = run_cli([*args, "--output", output], capsys)
    assert code == 0, err
    ids = [line["question_id"] for line in read_jsonl(output)]
    assert set(abstaining_ids(answered)) & set(ids) and not any("_abs" in i for i in ids)
    scores = tmp_path / "scores.json"
    args = ["eval", answered, "--predictions", output, "--questions-from", exported["longmemeval"], "--json", scores]
    code, out, err = run_cli(args, capsys)
    assert code == 0, err
    time_queries = json.loads(scores.read_text())["configs"]["time_queries"]
    assert time_queries["questions"] == 4 and time_queries["predicted"] == 4 and time_queries["abstentions"] == 1
    assert set(time_queries["tests"]) == {"session"}  # the abstention (last_day) has nothing to retrieve
    assert "time_queries: 4 questions, 0 without a prediction (scored as empty), 1 abstentions" in out
    assert time_queries["pooled"]["questions"] == 3


def test_gen_eval_leaves_every_wording_of_the_abstention_out_and_says_so(answered, tmp_path, capsys):
    """Without an export's subset every wording is scored: 9 session questions, and the 3 wordings of the
    abstention counted apart; a prediction for them changes nothing."""
    rows = read_jsonl(answered / "time_queries" / "test.jsonl")
    predictions = tmp_path / "predictions.jsonl"
    lines = [{"question_id": row["question_id"], "retrieved": row["relevant_response_indices"] or [0]} for row in rows]
    predictions.write_text("".join(json.dumps(line) + "\n" for line in lines))
    scores = tmp_path / "scores.json"
    code, out, err = run_cli(["eval", answered, "--predictions", predictions, "--json", scores], capsys)
    assert code == 0, err
    time_queries = json.loads(scores.read_text())["configs"]["time_queries"]
    assert (time_queries["questions"], time_queries["abstentions"]) == (12, 3)
    assert time_queries["pooled"] == {"questions": 9, "recall": 1.0, "f2": 1.0, "all_found": 1.0, "any_found": 1.0}
    assert (
        "12 questions, 0 without a prediction (scored as empty), 3 abstentions (nothing to retrieve: not scored)" in out
    )


def exported_question(question_id: str, abstains: bool) -> ExportQuestion:
    return ExportQuestion("c", question_id, "g", "t", "conv", [0], "q?", [], None, False, None, abstains)


def test_only_an_abstention_carries_abs_in_its_longmemeval_id():
    """evaluate_qa.py looks for "_abs" anywhere in an id: a time+content question's id holds its conversation's id,
    which may contain it, and must not be judged as unanswerable."""
    assert harness_id(exported_question("lab_abstracts/tcq-001", False)) == "lab_Abstracts/tcq-001"
    assert harness_id(exported_question("lab_abstracts/tcq-001", True)) == "lab_Abstracts/tcq-001_abs"
    assert harness_id(exported_question("153bdeff55be200a", False)) == "153bdeff55be200a"


def test_an_empty_window_whose_answer_does_not_abstain_is_refused(answered, tmp_path, capsys):
    """A question with nothing to retrieve is only the one an abstention answers; any other is bad input."""
    import shutil

    folder = shutil.copytree(answered, tmp_path / "run")
    queries = folder / "time_queries" / "test.jsonl"
    rows = read_jsonl(queries)
    rows[0]["relevant_response_indices"] = []  # its base question's answer was written from responses
    queries.write_text("".join(json.dumps(row) + "\n" for row in rows))
    code, _, err = run_cli(["export", folder, "--format", "locomo", "--output", tmp_path / "out"], capsys)
    assert code == 2
    assert "line 1" in err and "relevant_response_indices" in err and "does not abstain" in err
    assert not (tmp_path / "out").exists()
