"""Recall and F2, per test and over tests, with every expected number worked out by hand; and `gen eval` on a
hand-made dataset, including each way a predictions file can be wrong (exit 2, file and line named)."""

from __future__ import annotations

import json

import pytest

from gen.eval.metrics import GroupScore, QuestionScore, mean_over_tests, means_per_test, pooled, question_score
from tests.conftest import gen_subprocess, run_cli
from tests.test_eval_dataset import hand_dataset  # noqa: F401 - a fixture

# --- one question ---------------------------------------------------------------------------------------


def test_perfect_retrieval_scores_one():
    assert question_score([1, 2, 3], [3, 2, 1]) == QuestionScore(1.0, 1.0)


def test_empty_retrieval_scores_zero():
    assert question_score([1, 2, 3], []) == QuestionScore(0.0, 0.0)


def test_retrieval_with_no_relevant_response_scores_zero():
    assert question_score([1, 2, 3], [7, 8]) == QuestionScore(0.0, 0.0)


def test_partial_retrieval():
    # 2 of 4 relevant among 5 retrieved: P = 0.4, R = 0.5, F2 = 5 * 0.4 * 0.5 / (1.6 + 0.5) = 1 / 2.1
    score = question_score([0, 1, 2, 3], [0, 1, 7, 8, 9])
    assert score.recall == pytest.approx(0.5)
    assert score.f2 == pytest.approx(1 / 2.1)


def test_a_superset_has_full_recall_and_pays_in_precision():
    # both relevant among 8: P = 0.25, R = 1, F2 = 5 * 0.25 / (1 + 1) = 0.625
    score = question_score([4, 5], [4, 5, 6, 7, 8, 9, 10, 11])
    assert score == QuestionScore(1.0, pytest.approx(0.625))


def test_k_cuts_the_ranking_before_scoring():
    # first 2 of [9, 1, 2]: one hit, P = R = 0.5, F2 = 5 * 0.25 / 2.5 = 0.5
    assert question_score([1, 2], [9, 1, 2], k=2) == QuestionScore(0.5, pytest.approx(0.5))
    # whole ranking: P = 2/3, R = 1, F2 = (10/3) / (8/3 + 1) = 10/11
    assert question_score([1, 2], [9, 1, 2]) == QuestionScore(1.0, pytest.approx(10 / 11))


def test_a_repeated_index_counts_once():
    # {1}: P = 1, R = 0.5, F2 = 2.5 / 4.5
    assert question_score([1, 2], [1, 1, 1]) == QuestionScore(0.5, pytest.approx(2.5 / 4.5))


# --- per test, then over tests ---------------------------------------------------------------------------


def test_each_test_weighs_the_same_whatever_its_size():
    scored = [
        ("dates", QuestionScore(1.0, 1.0)),
        ("dates", QuestionScore(0.0, 0.0)),
        ("session", QuestionScore(1.0, 0.5)),
        ("dates", QuestionScore(0.5, 0.2)),
    ]
    tests = means_per_test(scored)
    # dates: one of three questions found everything (recall 1), two found something
    assert tests == {
        "dates": GroupScore(3, pytest.approx(0.5), pytest.approx(0.4), pytest.approx(1 / 3), pytest.approx(2 / 3)),
        "session": GroupScore(1, 1.0, 0.5, 1.0, 1.0),
    }
    # (0.5 + 1) / 2 and (0.4 + 0.5) / 2
    assert mean_over_tests(tests) == QuestionScore(pytest.approx(0.75), pytest.approx(0.45))
    # pooling the 4 questions: (1 + 0 + 1 + 0.5) / 4, (1 + 0 + 0.5 + 0.2) / 4; all found 2/4, any 3/4
    assert pooled(tests) == GroupScore(4, pytest.approx(0.625), pytest.approx(0.425), 0.5, 0.75)


# --- gen eval on the hand-made dataset -------------------------------------------------------------------


def write_lines(path, lines):
    path.write_text("".join(line if isinstance(line, str) else json.dumps(line) + "\n" for line in lines))
    return path


def test_gen_eval_prints_and_writes_the_hand_computed_scores(hand_dataset, tmp_path, capsys):  # noqa: F811
    predictions = write_lines(
        tmp_path / "p.jsonl",
        [
            {"question_id": "q1", "retrieved": [0, 1, 2]},  # session: R 1, F2 1
            {"question_id": "q2", "retrieved": []},  # session: 0
            {"question_id": "q3", "retrieved": [3, 0]},  # dates: P 1/2, R 1/3, F2 (5/6) / (7/3) = 5/14
            # q4 (dates) has no line: empty, 0
        ],
    )
    code, out, err = run_cli(
        ["eval", hand_dataset, "--predictions", predictions, "--json", tmp_path / "s.json"], capsys
    )
    assert code == 0, err
    scores = json.loads((tmp_path / "s.json").read_text())
    tq = scores["configs"]["time_queries"]
    assert (tq["questions"], tq["predicted"], tq["missing"]) == (4, 3, 1)
    assert tq["tests"]["session"] == {"questions": 2, "recall": 0.5, "f2": 0.5, "all_found": 0.5, "any_found": 0.5}
    assert tq["tests"]["dates"]["recall"] == pytest.approx(1 / 6)
    assert tq["tests"]["dates"]["f2"] == pytest.approx(5 / 28)
    # (0.5 + 1/6) / 2 = 1/3; (0.5 + 5/28) / 2 = 19/56
    assert tq["mean_over_tests"] == {"recall": pytest.approx(1 / 3), "f2": pytest.approx(19 / 56)}
    assert scores["not_scored"] == ["ambiguous_time_queries", "time_content_questions"]
    assert "time_queries: 4 questions, 1 without a prediction" in out
    assert "mean over tests          4   0.333   0.339" in out
    # pooled over the 4 questions: recall (1 + 0 + 1/3 + 0) / 4 = 1/3, F2 (1 + 0 + 5/14 + 0) / 4 = 19/56,
    # all found 1/4 (q1), any found 2/4 (q1, q3) -- here equal to the mean over tests by the tests' equal sizes
    assert tq["pooled"] == {
        "questions": 4,
        "recall": pytest.approx(1 / 3),
        "f2": pytest.approx(19 / 56),
        "all_found": 0.25,
        "any_found": 0.5,
    }
    assert "pooled                   4   0.333   0.339      0.250      0.500" in out
    assert "LoCoMo's and LongMemEval's scripts" in out


def test_gen_eval_k_cuts_every_ranking(hand_dataset, tmp_path, capsys):  # noqa: F811
    predictions = write_lines(
        tmp_path / "p.jsonl",
        [{"question_id": "q1", "retrieved": [0, 1, 2]}, {"question_id": "q3", "retrieved": [3, 0]}],
    )
    code, _, err = run_cli(
        ["eval", hand_dataset, "--predictions", predictions, "--k", "1", "--json", tmp_path / "s.json"], capsys
    )
    assert code == 0, err
    tq = json.loads((tmp_path / "s.json").read_text())["configs"]["time_queries"]
    # q1 → [0] and q3 → [3]: P 1, R 1/3, F2 (5/3) / (13/3) = 5/13; each test averages it with a 0
    for test in ("session", "dates"):
        assert tq["tests"][test]["recall"] == pytest.approx(1 / 6)
        assert tq["tests"][test]["f2"] == pytest.approx(5 / 26)


def test_an_empty_predictions_file_scores_every_config_as_empty(hand_dataset, tmp_path, capsys):  # noqa: F811
    predictions = write_lines(tmp_path / "p.jsonl", [])
    code, out, _ = run_cli(["eval", hand_dataset, "--predictions", predictions], capsys)
    assert code == 0
    assert "time_content_questions: 1 questions, 1 without a prediction" in out
    assert out.count("\nmean over tests ") == 3 and out.count("\npooled ") == 3


BAD_LINES = [
    ('{"question_id": "q1", "retrieved": [0]\n', "line 2, column 40: not valid JSON"),
    ("[1, 2]\n", "line 2: the line is not a JSON object"),
    ('{"retrieved": [0]}\n', "line 2: question_id: question_id is missing or not a string"),
    ('{"question_id": "nope", "retrieved": [0]}\n', "line 2: question_id: unknown question id 'nope'"),
    ('{"question_id": "q4", "retrieved": [2, 3]}\n', "line 2: retrieved[1]: index 3 is outside conversation c2"),
    ('{"question_id": "q4", "retrieved": [-1]}\n', "line 2: retrieved[0]: index -1 is outside conversation c2"),
    ('{"question_id": "q4", "retrieved": ["2"]}\n', 'line 2: retrieved[0]: "2" is not a response index'),
    ('{"question_id": "q4", "retrieved": [true]}\n', "line 2: retrieved[0]: true is not a response index"),
    ('{"question_id": "q4", "retrieved": 2}\n', "line 2: retrieved: retrieved is missing or not a list"),
    ('{"question_id": "q1", "retrieved": []}\n', "line 2: question_id: question q1 already has a prediction on line 1"),
]


@pytest.mark.parametrize(("line", "message"), BAD_LINES)
def test_a_bad_predictions_line_is_one_error_naming_file_and_line(hand_dataset, tmp_path, capsys, line, message):  # noqa: F811
    predictions = write_lines(tmp_path / "p.jsonl", [{"question_id": "q1", "retrieved": [0]}, line])
    code, out, err = run_cli(["eval", hand_dataset, "--predictions", predictions], capsys)
    assert code == 2
    assert err.strip().startswith(f"error: {predictions}: {message}")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert out == ""


def test_the_error_of_a_real_process_has_no_traceback(hand_dataset, tmp_path):  # noqa: F811
    predictions = write_lines(tmp_path / "p.jsonl", ['{"question_id": "q4", "retrieved": [9]}\n'])
    done = gen_subprocess("eval", hand_dataset, "--predictions", predictions, timeout=120)
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {predictions}: line 1: retrieved[0]: index 9 is outside conversation c2 "
        "(expected a response_index from 0 to 2)\n"
    )


def test_missing_predictions_file_and_dataset_are_named(hand_dataset, tmp_path, capsys):  # noqa: F811
    code, _, err = run_cli(["eval", hand_dataset, "--predictions", tmp_path / "none.jsonl"], capsys)
    assert code == 2 and f"{tmp_path / 'none.jsonl'}: no such file" in err
    code, _, err = run_cli(["eval", tmp_path / "nothing", "--predictions", tmp_path / "none.jsonl"], capsys)
    assert code == 2 and f"{tmp_path / 'nothing'}: no such folder" in err
