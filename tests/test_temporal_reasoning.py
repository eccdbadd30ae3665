"""temporal_reasoning: questions whose gold answers are computed from the timeline, their validator, their place
in the LoCoMo and LongMemEval exports (scored by the harnesses' own QA code), and `gen eval --answers`.

The fixture conversation is written so that its topic phrases can be listed by hand: three sessions (1, 8 and
20 May 2023, each at 10:00), no padding, "now" 50 minutes after the last response, so today is 20 May 2023.

    response 0  S1  Ann  "we took the pottery class and it was fun"   → pottery class (1 May)
    response 1  S1  Bob  "oh the book club is so good"                → book club (S1 and S3: left out)
    response 2  S2  Ann  "there was a heat wave here and it was hot"  → heat wave (8 May)
    response 3  S2  Bob  "oh so good"
    response 4  S3  Ann  "i went to the garden party and it was fine" → garden party (20 May)
    response 5  S3  Bob  "the book club was there too"
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import (
    REPO,
    extra_marks,
    locomo_sample,
    read_jsonl,
    require_shared,
    run_cli,
    write_json,
    write_recipe,
)
from tests.fakes.openai_server import FakeOpenAI
from tests.official import locomo_evaluation

SESSIONS = [
    ("10:00 am on 1 May, 2023", ["we took the pottery class and it was fun", "oh the book club is so good"]),
    ("10:00 am on 8 May, 2023", ["there was a heat wave here and it was hot", "oh so good"]),
    ("10:00 am on 20 May, 2023", ["i went to the garden party and it was fine", "the book club was there too"]),
]
POTTERY, HEAT, GARDEN = "pottery class", "heat wave", "garden party"

# (test, topics in date order) → (answer text, answer value, evidence), all by hand from the table above
EXPECTED = {
    ("last_mention", (POTTERY,)): ("1 May 2023", {"date": "2023-05-01", "days": None, "choice": None}, [0]),
    ("last_mention", (HEAT,)): ("8 May 2023", {"date": "2023-05-08", "days": None, "choice": None}, [2]),
    ("last_mention", (GARDEN,)): ("20 May 2023", {"date": "2023-05-20", "days": None, "choice": None}, [4]),
    ("days_ago", (POTTERY,)): ("19 days ago", {"date": None, "days": 19, "choice": None}, [0]),
    ("days_ago", (HEAT,)): ("12 days ago", {"date": None, "days": 12, "choice": None}, [2]),
    ("days_ago", (GARDEN,)): ("today", {"date": None, "days": 0, "choice": None}, [4]),
    ("which_first", (POTTERY, HEAT)): (POTTERY, {"date": None, "days": None, "choice": POTTERY}, [0, 2]),
    ("which_first", (POTTERY, GARDEN)): (POTTERY, {"date": None, "days": None, "choice": POTTERY}, [0, 4]),
    ("which_first", (HEAT, GARDEN)): (HEAT, {"date": None, "days": None, "choice": HEAT}, [2, 4]),
    ("time_between", (POTTERY, HEAT)): ("7 days", {"date": None, "days": 7, "choice": None}, [0, 2]),
    ("time_between", (POTTERY, GARDEN)): ("19 days", {"date": None, "days": 19, "choice": None}, [0, 4]),
    ("time_between", (HEAT, GARDEN)): ("12 days", {"date": None, "days": 12, "choice": None}, [2, 4]),
}
DATE_ORDER = {POTTERY: 0, HEAT: 1, GARDEN: 2}
LOCOMO_DATES = {"2023-05-01": "1 May 2023", "2023-05-08": "8 May 2023", "2023-05-20": "20 May 2023"}
LONGMEMEVAL_DATES = {
    "2023-05-01": "2023/05/01 (Mon)",
    "2023-05-08": "2023/05/08 (Mon)",
    "2023-05-20": "2023/05/20 (Sat)",
}


def recipe(folder: Path, seed: int = 7, **options) -> Path:
    source = write_json(folder / "conversation.json", [locomo_sample("talks", sessions=SESSIONS)])
    product = {"type": "temporal_reasoning", "topics_per_conversation": 10, "pairs_per_conversation": 10}
    product.update({"max_variants_per_group": 3, **options})
    return write_recipe(
        folder / "recipe.yaml",
        {
            "name": "reasoning",
            "seed": seed,
            "sources": [{"format": "locomo", "path": str(source)}],
            "timeline": {"padding": {"mode": "none"}, "now_offset_minutes": 50},
            "products": [{"type": "log"}, {"type": "conversations"}, product],
        },
    )


def run(folder: Path, capsys, **options) -> Path:
    code, _, err = run_cli(["run", recipe(folder, **options), "--output-dir", folder / "out"], capsys)
    assert code == 0, err
    return folder / "out" / "reasoning"


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run as run_recipe
    from gen.recipe import load_recipe

    folder = tmp_path_factory.mktemp("reasoning")
    return run_recipe(load_recipe(recipe(folder)), RunOptions(output_dir=folder / "out"))


def rows_of(dataset: Path) -> list[dict]:
    return read_jsonl(dataset / "temporal_reasoning" / "test.jsonl")


def in_date_order(topics: list[str]) -> tuple[str, ...]:
    return tuple(sorted(topics, key=DATE_ORDER.__getitem__))


def test_every_answer_is_the_one_computed_by_hand(dataset):
    rows = rows_of(dataset)
    found = {}
    for row in rows:
        key = (row["test"], in_date_order(row["topics"]))
        found.setdefault(key, set()).add(
            (row["answer"], json.dumps(row["answer_value"]), tuple(row["relevant_response_indices"]))
        )
        assert all(f'"{topic}"' in row["question"] for topic in row["topics"])
        assert row["now"] == "2023-05-20T10:50:07"  # the last response (10:00 + floor(16 words × 0.46 s)) + 50 min
    expected = {key: {(text, json.dumps(value), tuple(evidence))} for key, (text, value, evidence) in EXPECTED.items()}
    assert found == expected  # "book club" (two sessions) is never asked about
    assert len(rows) == 12 * 3  # every wording of the 12 base questions
    report = json.loads((dataset / "run.json").read_text())
    assert report["validation"]["temporal_reasoning"]["passed"]
    assert report["configs"]["temporal_reasoning"]["questions"]["answer_field"] == "answer"


def test_time_between_names_the_earlier_topic_first(dataset):
    for row in rows_of(dataset):
        if row["test"] == "time_between":
            assert tuple(row["topics"]) == in_date_order(row["topics"])


def test_a_topic_in_two_sessions_is_asked_once_the_option_allows_it(tmp_path, capsys):
    rows = rows_of(run(tmp_path, capsys, max_topic_sessions=2, tests=["last_mention"]))
    book = [row for row in rows if row["topics"] == ["book club"]]
    assert book and {row["answer"] for row in book} == {"20 May 2023"}  # its last mention, in session 3
    assert {tuple(row["relevant_response_indices"]) for row in book} == {(1, 5)}


def test_the_same_seed_writes_the_same_bytes(tmp_path, capsys, dataset):
    again = run(tmp_path, capsys)
    assert (again / "temporal_reasoning" / "test.jsonl").read_bytes() == (
        dataset / "temporal_reasoning" / "test.jsonl"
    ).read_bytes()


def validator_failures(dataset: Path, change) -> list[str]:
    from gen.products.checks import Checks
    from gen.products.reasoning import checking
    from gen.products.reasoning.options import TemporalReasoningOptions

    rows = rows_of(dataset)
    change(rows)
    checks = Checks()
    log = read_jsonl(dataset / "log" / "test.jsonl")
    checking.check_conversation(log, rows, TemporalReasoningOptions(), 50, checks, "locomo/talks")
    return sorted(name for name, result in checks.results.items() if result.failed)


def first(rows: list[dict], test: str) -> dict:
    return next(row for row in rows if row["test"] == test)


def test_the_validator_passes_the_records_and_catches_each_wrong_one(dataset):
    assert validator_failures(dataset, lambda rows: None) == []

    def wrong_date(rows):
        first(rows, "last_mention")["answer_value"]["date"] = "2023-05-02"

    def wrong_days(rows):
        first(rows, "days_ago")["answer_value"]["days"] += 1

    def wrong_choice(rows):
        row = first(rows, "which_first")
        row["answer_value"]["choice"] = next(t for t in row["topics"] if t != row["answer_value"]["choice"])

    def wrong_text(rows):
        first(rows, "time_between")["answer"] = "3 days"

    def wrong_evidence(rows):
        first(rows, "last_mention")["relevant_response_indices"] = [1]

    def padding_free_topic_missing(rows):
        first(rows, "days_ago")["topics"] = ["book club"]

    # a changed value no longer matches the log, nor the text that states the true one
    both = ["the answer text states the answer value", "the answer value is the one recomputed from the log"]
    assert validator_failures(dataset, wrong_date) == both
    assert validator_failures(dataset, wrong_days) == both
    assert validator_failures(dataset, wrong_choice) == both
    assert validator_failures(dataset, wrong_text) == ["the answer text states the answer value"]
    assert validator_failures(dataset, wrong_evidence) == ["relevant responses are every mention of the topics"]
    assert "each topic is mentioned, in real sessions only, in at most max_topic_sessions sessions" in (
        validator_failures(dataset, padding_free_topic_missing)
    )


# --- the exports and the harnesses' own QA code -------------------------------------------------------------


@pytest.fixture(scope="module")
def exported(dataset, tmp_path_factory) -> dict[str, list]:
    from gen.export.harness.exporter import export

    base = tmp_path_factory.mktemp("exports")
    found = {}
    for name in ("locomo", "longmemeval"):
        export(dataset, name, base / name, "temporal_reasoning")
        found[name] = json.loads((base / name / "temporal_reasoning.json").read_text())
    return found


def gold_in_style(row: dict, dates: dict[str, str]) -> str:
    value = row["answer_value"]
    return dates[value["date"]] if value["date"] else row["answer"]


def test_locomo_export_carries_each_answer_in_its_style_under_the_temporal_category(dataset, exported):
    by_id = {row["question_id"]: row for row in rows_of(dataset)}
    qa = exported["locomo"][0]["qa"]
    assert len(qa) == len(by_id)
    for entry in qa:
        assert entry["category"] == 2  # LoCoMo's "When did..." questions (locomo10.json) carry category 2
        assert entry["answer"] == gold_in_style(by_id[entry["question_id"]], LOCOMO_DATES)
    assert {e["answer"] for e in qa} >= {"1 May 2023", "8 May 2023", "20 May 2023", "19 days ago", "today"}


def test_locomo_qa_scorer_gives_the_gold_answers_f1_one_and_a_wrong_answer_less(exported):
    qa = [dict(entry, prediction=entry["answer"]) for entry in exported["locomo"][0]["qa"]]
    scores, _, _ = locomo_evaluation.eval_question_answering(qa, "prediction")
    assert scores and all(score == 1.0 for score in scores)
    wrong = [dict(entry, prediction="2 May 2023") for entry in qa if entry["answer"] == "1 May 2023"]
    scores, _, _ = locomo_evaluation.eval_question_answering(wrong, "prediction")
    assert [round(score, 4) for score in scores] == [round(2 / 3, 4)] * len(wrong)  # "may" and "2023" of three


def test_longmemeval_export_carries_each_answer_in_its_style(dataset, exported):
    by_id = {row["question_id"]: row for row in rows_of(dataset)}
    instances = exported["longmemeval"]
    assert len(instances) == 12  # one wording per base question
    for instance in instances:
        assert instance["question_type"] == "temporal-reasoning"
        assert instance["answer"] == gold_in_style(by_id[instance["question_id"]], LONGMEMEVAL_DATES)


def judge(request) -> str:
    """A judge that says yes when the model's response contains the correct answer (what the prompt asks)."""
    prompt = request.last_user
    answer = prompt.split("Correct Answer: ", 1)[1].split("\n\nModel Response: ", 1)[0]
    response = prompt.split("\n\nModel Response: ", 1)[1].split("\n\nIs the model response correct?", 1)[0]
    return "yes" if answer.lower() in response.lower() else "no"


@pytest.mark.parametrize("_", [pytest.param(None, id="evaluate_qa", marks=extra_marks("test", "backoff"))])
def test_longmemeval_evaluate_qa_runs_unedited_and_scores_the_gold_answers_one(_, exported, tmp_path):
    references = tmp_path / "references.json"
    references.write_text(json.dumps(exported["longmemeval"]))
    hypotheses = tmp_path / "hypotheses.jsonl"
    lines = [{"question_id": i["question_id"], "hypothesis": i["answer"]} for i in exported["longmemeval"]]
    lines[0]["hypothesis"] = "I do not remember."  # one wrong answer: the judge must be able to say no
    hypotheses.write_text("".join(json.dumps(line) + "\n" for line in lines))
    script = REPO / "tests" / "official" / "longmemeval_evaluate_qa.py"
    with FakeOpenAI(judge, delay=0.0) as server:
        done = subprocess.run(
            [sys.executable, str(script), "gpt-4o-mini", str(hypotheses), str(references)],
            capture_output=True,
            text=True,
            env={"OPENAI_API_KEY": "test-key", "OPENAI_BASE_URL": server.base_url, "PATH": "/usr/bin:/bin"},
            timeout=120,
        )
        assert server.count == len(lines)
    assert done.returncode == 0, done.stderr
    assert f"Accuracy: {round((len(lines) - 1) / len(lines), 4)}" in done.stdout
    labels = [
        json.loads(line)["autoeval_label"]["label"]
        for line in Path(f"{hypotheses}.eval-results-gpt-4o-mini").read_text().splitlines()
    ]
    assert labels == [False] + [True] * (len(lines) - 1)


# --- gen eval --answers ----------------------------------------------------------------------------------------


def answers_file(path: Path, answers: dict[str, str]) -> Path:
    path.write_text("".join(json.dumps({"question_id": q, "answer": a}) + "\n" for q, a in answers.items()))
    return path


def test_gen_eval_answers_scores_exact_match_and_f1_per_test_and_pooled(dataset, tmp_path, capsys):
    rows = rows_of(dataset)
    answers = {row["question_id"]: row["answer"] for row in rows if row["test"] in ("last_mention", "which_first")}
    # every days_ago wording answered without "ago": F1 of ["N", "day"] against ["N", "day", "ago"] is 0.8, and
    # "today" against "0 days" shares nothing
    for row in rows:
        if row["test"] == "days_ago":
            answers[row["question_id"]] = f"{row['answer_value']['days']} days"
    # time_between left unanswered: 0
    scores = tmp_path / "scores.json"
    code, out, err = run_cli(
        ["eval", dataset, "--answers", answers_file(tmp_path / "a.jsonl", answers), "--json", scores], capsys
    )
    assert code == 0, err
    result = json.loads(scores.read_text())["configs"]["temporal_reasoning"]
    tests = result["tests"]
    assert tests["last_mention"] == {"questions": 9, "exact_match": 1.0, "f1": 1.0}
    assert tests["which_first"] == {"questions": 9, "exact_match": 1.0, "f1": 1.0}
    assert tests["time_between"] == {"questions": 9, "exact_match": 0.0, "f1": 0.0}
    assert tests["days_ago"]["exact_match"] == 0.0
    assert tests["days_ago"]["f1"] == pytest.approx((0.8 * 6 + 0.0 * 3) / 9)
    assert result["pooled"]["f1"] == pytest.approx((9 + 9 + 0.8 * 6) / 36)
    assert result["answered"] == 27
    assert "pooled" in out and "9 without an answer" in out


def test_gen_eval_answers_f1_is_locomos(dataset):
    from gen.eval.answer_metrics import exact_match, token_f1

    pairs = [
        ("The pottery classes!", "pottery class"),  # stemming: classes → class
        ("7 May, 2023", "7 May 2023"),
        ("running and walking", "ran, walked"),
        ("12 days ago", "twelve days ago"),
        ("", "today"),
    ]
    for prediction, gold in pairs:
        assert token_f1(prediction, gold) == pytest.approx(locomo_evaluation.f1_score(prediction, gold))
        same = locomo_evaluation.normalize_answer(prediction) == locomo_evaluation.normalize_answer(gold)
        assert exact_match(prediction, gold) == float(same)
    assert token_f1("The pottery classes!", "pottery class") == 1.0


def test_gen_eval_answers_refuses_bad_input_with_one_message(dataset, tmp_path, capsys):
    unknown = answers_file(tmp_path / "unknown.jsonl", {"no-such-question": "1 May 2023"})
    code, _, err = run_cli(["eval", dataset, "--answers", unknown], capsys)
    assert code == 2 and "unknown.jsonl" in err and "line 1" in err and "question_id" in err
    assert "Traceback" not in err
    question_id = rows_of(dataset)[0]["question_id"]
    not_text = tmp_path / "number.jsonl"
    not_text.write_text(json.dumps({"question_id": question_id, "answer": 3}) + "\n")
    code, _, err = run_cli(["eval", dataset, "--answers", not_text], capsys)
    assert code == 2 and "line 1" in err and "answer" in err
    code, _, err = run_cli(["eval", dataset], capsys)
    assert code == 2 and "--predictions" in err and "--answers" in err


def test_gen_eval_answers_needs_a_config_with_gold_answers(quickstart, tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    code, _, err = run_cli(["eval", quickstart, "--answers", empty], capsys)
    assert code == 2 and "no question config with gold answers" in err


@pytest.mark.integration
def test_locomo10_gets_every_test_and_passes_validation(tmp_path, capsys):
    source = require_shared("locomo/locomo10.json")
    recipe = write_recipe(
        tmp_path / "l10.yaml",
        {
            "name": "l10",
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(source)}],
            "products": [{"type": "log"}, {"type": "conversations"}, {"type": "temporal_reasoning"}],
        },
    )
    code, _, err = run_cli(["run", recipe, "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    rows = read_jsonl(tmp_path / "out" / "l10" / "temporal_reasoning" / "test.jsonl")
    per_conversation = {(row["conversation_id"], row["test"]) for row in rows}
    assert len(per_conversation) == 10 * 4  # every conversation has questions of every test


@pytest.mark.parametrize(
    ("text", "phrase", "topic"),
    [
        ("we took the pottery class", "pottery class", True),  # noun noun, after "the"
        ("I love my gaming team", "gaming team", True),  # -ing verb, noun, after "my"
        ("The doggy daycare was full", "doggy daycare", False),  # "doggy" can be an adjective
        ("it was a super important day", "super important", False),  # "super" can be an adjective
        ("we sat in the park outside", "park outside", False),  # "outside" can be an adverb
        ("we made a big decision", "big decision", False),  # adjective first word
        ("because pottery class was full", "pottery class", False),  # no article or possessive before it
        ("the kinda jobs I like", "kinda jobs", False),  # a first word the lexicon does not know
        ("the amazing news came", "amazing news", False),  # an -ing word that is also an adjective
        ("my pottery, class", "pottery class", False),  # across a comma
    ],
)
def test_a_topic_is_a_thing_named_after_an_article_or_a_possessive(text, phrase, topic):
    from gen.products import lexical
    from gen.products.reasoning.topics import candidate

    assert candidate(phrase, text, set(lexical.words(text)), frozenset()) is topic
