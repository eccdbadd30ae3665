"""time_queries' abstention questions (option `abstentions`): questions about times inside the conversation's span
when nothing at all was said, with an empty relevant set and `abstention: true`. Worked out by hand on the timelines
of tests/fixtures/time_timelines.py; the end-to-end path (gold answers, exports, gen eval) is in
tests/test_abstention_exports.py.

Ann/Bob: responses on 2023-11-30, 2023-12-31, 2024-01-01, 2024-01-08, 2024-01-14 and 2024-01-15 (today, a Monday,
padding included). Cat/Dan: responses on 2023-01-10, 2023-06-05, 2024-01-10 and 2024-01-19 (today, a Friday, only
padding).
"""

from __future__ import annotations

import json
import random
from datetime import date, timedelta

import pytest

from gen.products.schema import as_features
from gen.products.temporal import time_queries
from gen.products.temporal.options import TimeQueriesOptions
from tests.conftest import read_jsonl, run_cli, write_recipe
from tests.fixtures.time_timelines import ann_bob, context, late_padding

ABSTAINING = ["dates", "month", "rel_day", "rel_month", "last_day"]
ALL = {"per_test": 1000}  # more than any conversation has: every empty window is asked


def build(*timelines, seed=0, **options):
    ctx = context(*timelines, seed=seed)
    opts = TimeQueriesOptions(**options)
    return ctx.build("time_queries", opts), ctx, opts


def flagged(rows, conversation_id=None) -> dict[str, list[dict]]:
    """test → the params of its abstention questions, in the order asked (one per base question)."""
    out: dict[str, list[dict]] = {}
    seen = set()
    for row in rows:
        if row["abstention"] and row["group_id"] not in seen and conversation_id in (None, row["conversation_id"]):
            seen.add(row["group_id"])
            out.setdefault(row["test"], []).append(row["params"])
    return out


def days(first: str, last: str) -> list[str]:
    """Every date from first to last, both included."""
    start, end = date.fromisoformat(first), date.fromisoformat(last)
    return [(start + timedelta(days=n)).isoformat() for n in range((end - start).days + 1)]


# Ann/Bob, by hand: the days strictly between 30 November (the first real date) and 15 January (today) with no
# response: 1-30 December, 2-7 January and 9-13 January (31 December, 1, 8 and 14 January have responses).
ANN_BOB_SILENT = days("2023-12-01", "2023-12-30") + days("2024-01-02", "2024-01-07") + days("2024-01-09", "2024-01-13")
DAYS_BEFORE_15_JANUARY = {d: (date(2024, 1, 15) - date.fromisoformat(d)).days for d in ANN_BOB_SILENT}


def test_every_empty_window_by_hand():
    rows, ctx, opts = build(ann_bob(), late_padding(), abstentions=ALL, max_variants_per_group=1)
    ann = flagged(rows, "hand/ann-bob")
    assert len(ANN_BOB_SILENT) == 41 and DAYS_BEFORE_15_JANUARY["2023-12-01"] == 45
    assert ann["dates"] == [{"date": d} for d in ANN_BOB_SILENT]
    assert ann["rel_day"] == [{"date": d, "days_ago": DAYS_BEFORE_15_JANUARY[d]} for d in ANN_BOB_SILENT]
    # 1 to 7 days before Monday 15 January: the 14th (yesterday) and the 8th (last Monday) have responses
    assert ann["last_day"] == [
        {"weekday": "Tuesday", "date": "2024-01-09", "days_ago": 6},
        {"weekday": "Wednesday", "date": "2024-01-10", "days_ago": 5},
        {"weekday": "Thursday", "date": "2024-01-11", "days_ago": 4},
        {"weekday": "Friday", "date": "2024-01-12", "days_ago": 3},
        {"weekday": "Saturday", "date": "2024-01-13", "days_ago": 2},
    ]
    # the only month strictly between November 2023 and January 2024 is December, and 31 December has responses
    assert "month" not in ann and "rel_month" not in ann

    cat = flagged(rows, "hand/cat-dan")
    # February to December 2023 lie between January 2023 and January 2024; June has responses. From January 2024,
    # month m of 2023 is 12 - m + 1 months back
    months = ["2023-02", "2023-03", "2023-04", "2023-05", "2023-07", "2023-08", "2023-09", "2023-10", "2023-11"]
    months.append("2023-12")
    assert cat["month"] == [{"month": m} for m in months]
    assert cat["rel_month"] == [{"month": m, "months_ago": 13 - int(m[5:])} for m in months]
    # 12 to 18 January 2024 (Friday to Thursday): the padding is on the 19th, the real session on the 10th
    assert [(p["weekday"], p["days_ago"]) for p in cat["last_day"]] == [
        ("Friday", 7),
        ("Saturday", 6),
        ("Sunday", 5),
        ("Monday", 4),
        ("Tuesday", 3),
        ("Wednesday", 2),
        ("Thursday", 1),
    ]
    # 2023-01-11 .. 2024-01-18 is 373 days, less 2023-06-05 and 2024-01-10
    assert len(cat["dates"]) == 371 and {"date": "2023-06-05"} not in cat["dates"]
    assert ctx.validate("time_queries", rows, opts).passed


def test_abstention_records_are_empty_and_say_so():
    rows, ctx, opts = build(ann_bob(), abstentions={"per_test": 2})
    asked = [row for row in rows if row["abstention"]]
    real = [row for row in rows if not row["abstention"]]
    assert asked and real and all(row["num_relevant"] > 0 for row in real)
    for row in asked:
        assert (row["relevant_response_indices"], row["num_relevant"]) == ([], 0)
        assert row["now"] == "2024-01-15T11:50:40" and row["current_session"] == 7
        assert row["time_expression"] in row["question"]
    # 2 per test that has empty windows (Ann/Bob has no empty month), 3 wordings each; after every real question
    assert len({row["group_id"] for row in asked}) == 2 * 3 and len(asked) == 6 * 3
    assert rows[-len(asked) :] == asked
    assert list(rows[0])[-1] == "abstention"  # the last field, as the features declare it
    checks = ctx.validate("time_queries", rows, opts)
    assert checks.passed, {k: v for k, v in checks.report().items() if v["failed"]}


def test_empty_by_construction_checked_from_the_log_alone():
    """Every abstention window, compared with the log's response dates directly (not through any window code):
    no response at all, padding included, is dated on its day or in its month, and it lies inside the span."""
    rows, ctx, _ = build(ann_bob(), late_padding(), abstentions={"per_test": 5})
    log = [record for records in ctx.build_all("log") for record in records["log"]]
    for row in (r for r in rows if r["abstention"]):
        said = [r["date"] for r in log if r["conversation_id"] == row["conversation_id"]]
        real = [r["date"] for r in log if r["conversation_id"] == row["conversation_id"] and not r["is_padding"]]
        today = max(said)  # both fixtures end with a padding session on "today"
        params = row["params"]
        if "date" in params:
            assert params["date"] not in said and min(real) < params["date"] < today
        else:
            assert not any(d.startswith(params["month"]) for d in said)
            assert min(real)[:7] < params["month"] < today[:7]


def test_the_draw_follows_from_the_seed_conversation_and_test():
    """Which empty windows are asked: the seeded draw the docs describe (random.Random("<seed>/time_queries/
    abstentions/<conversation>/<test>").sample of positions, in date order), redone here with random itself."""
    rows, _, _ = build(ann_bob(), seed=7, abstentions={"per_test": 2}, tests=["dates", "last_day"])
    positions = sorted(random.Random("7/time_queries/abstentions/hand/ann-bob/dates").sample(range(41), 2))
    assert flagged(rows)["dates"] == [{"date": ANN_BOB_SILENT[i]} for i in positions]
    recent = ["2024-01-09", "2024-01-10", "2024-01-11", "2024-01-12", "2024-01-13"]
    positions = sorted(random.Random("7/time_queries/abstentions/hand/ann-bob/last_day").sample(range(5), 2))
    assert [p["date"] for p in flagged(rows)["last_day"]] == [recent[i] for i in positions]

    again, _, _ = build(ann_bob(), seed=7, abstentions={"per_test": 2}, tests=["dates", "last_day"])
    assert again == rows
    # with Cat/Dan in the same run, Ann/Bob's questions are the same
    both, _, _ = build(late_padding(), ann_bob(), seed=7, abstentions={"per_test": 2}, tests=["dates", "last_day"])
    assert flagged(both, "hand/ann-bob") == flagged(rows)
    other, _, _ = build(ann_bob(), seed=8, abstentions={"per_test": 2}, tests=["dates", "last_day"])
    assert flagged(other) != flagged(rows)


def test_with_the_option_off_the_records_are_what_they_were():
    plain, _, _ = build(ann_bob(), late_padding())
    marked, _, _ = build(ann_bob(), late_padding(), abstentions={"per_test": 1})
    assert all("abstention" not in row for row in plain)
    assert [{k: v for k, v in row.items() if k != "abstention"} for row in marked if not row["abstention"]] == plain
    assert time_queries.TimeQueries(TimeQueriesOptions()).configs == time_queries.TimeQueries.configs


def test_records_fit_the_declared_features_with_the_option_on_and_off():
    from datasets import Dataset

    on = time_queries.TimeQueries(TimeQueriesOptions(abstentions={"per_test": 1})).configs[0]
    off = time_queries.TimeQueries.configs[0]
    assert [f["name"] for f in on.features] == [*(f["name"] for f in off.features), "abstention"]
    assert on.features[-1] == {"name": "abstention", "dtype": "bool"}
    rows, _, _ = build(ann_bob(), abstentions={"per_test": 1})
    loaded = Dataset.from_list(rows, features=as_features(on.features))
    assert loaded[-1]["abstention"] is True and loaded[0]["abstention"] is False
    assert loaded[-1]["relevant_response_indices"] == []


def test_validator_catches_a_flagged_real_window_and_an_unflagged_empty_one():
    rows, ctx, opts = build(ann_bob(), abstentions={"per_test": 1}, tests=["dates", "session"])

    def failures(changed):
        return {name for name, r in ctx.validate("time_queries", changed, opts).report().items() if r["failed"]}

    empty_group = next(row["group_id"] for row in rows if row["abstention"])
    assert failures(rows) == set()

    # the abstention's rows moved to 8 January, which has responses (their relevant set left empty)
    moved = [dict(row, params={"date": "2024-01-08"}) if row["group_id"] == empty_group else row for row in rows]
    assert {
        "an abstention's window, recomputed from the log, holds no response",
        "an abstention question is not a real window",
        "abstention questions are the seeded draw of the empty windows inside the span",
    } <= failures(moved)

    # a real question flagged as an abstention, with its relevant set emptied
    real_group = next(row["group_id"] for row in rows if row["test"] == "dates" and not row["abstention"])
    faked = [
        dict(row, abstention=True, relevant_response_indices=[], num_relevant=0)
        if row["group_id"] == real_group
        else row
        for row in rows
    ]
    assert {
        "an abstention's window, recomputed from the log, holds no response",
        "an abstention question is not a real window",
        "base questions are exactly the windows the test defines (time_queries)",
    } <= failures(faked)

    # the abstention's rows no longer flagged: an empty window asked as a real one
    unflagged = [dict(row, abstention=False) if row["group_id"] == empty_group else row for row in rows]
    assert {
        "relevant set is not empty and not only padding",
        "base questions are exactly the windows the test defines (time_queries)",
        "abstention questions are the seeded draw of the empty windows inside the span",
    } <= failures(unflagged)

    # a flagged row whose relevant set is not empty
    filled = [
        dict(row, relevant_response_indices=[0], num_relevant=1) if row["group_id"] == empty_group else row
        for row in rows
    ]
    assert "an abstention question has an empty relevant set" in failures(filled)

    # an abstention question left out
    dropped = [row for row in rows if row["group_id"] != empty_group]
    assert "abstention questions are the seeded draw of the empty windows inside the span" in failures(dropped)


def test_a_date_or_month_without_talk_goes_without_its_year_only_when_the_span_has_no_other():
    """Cat/Dan's span runs from 10 January 2023 to 19 January 2024: 15 January comes twice in it (2023 and 2024),
    14 February once; December once. (The January of the real questions needs its year too: they talked in both.)"""
    rows, _, _ = build(late_padding(), abstentions=ALL, max_variants_per_group="all", tests=["dates", "month"])
    by_param = {}
    for row in rows:
        if row["abstention"]:
            by_param.setdefault(json.dumps(row["params"]), set()).add(row["time_expression"])
    assert "on January 15th" not in by_param[json.dumps({"date": "2023-01-15"})]
    assert "on January 15th, 2023" in by_param[json.dumps({"date": "2023-01-15"})]
    assert "on February 14th" in by_param[json.dumps({"date": "2023-02-14"})]
    assert "in December" in by_param[json.dumps({"month": "2023-12"})]


@pytest.mark.parametrize(
    ("abstentions", "tests", "message"),
    [
        ({"per_test": 1}, ["session", "day_span"], "abstentions need at least one of the tests dates, month"),
        ({"per_test": 0}, None, "per_test"),
        ({"share": 0.1}, None, "missing key 'per_test'"),
    ],
)
def test_abstention_options_that_cannot_work_are_recipe_errors(tmp_path, capsys, abstentions, tests, message):
    entry = {"type": "time_queries", "abstentions": abstentions, **({"tests": tests} if tests else {})}
    recipe = write_recipe(
        tmp_path / "recipe.yaml",
        {
            "name": "bad",
            "sources": [{"format": "locomo", "path": str(SAMPLE)}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [{"type": "log"}, entry],
        },
    )
    code, _, err = run_cli(["run", recipe, "--output-dir", tmp_path / "out"], capsys)
    assert code == 2 and message in err and "products[1]" in err and "Traceback" not in err


SAMPLE = __import__("pathlib").Path(__file__).resolve().parents[1] / "gen" / "data" / "sample_locomo.json"


def test_a_run_declares_the_field_only_with_the_option(tmp_path, capsys):
    """run.json's questions entry and the card name `abstention` only when the recipe asks for abstentions."""
    reports = {}
    for name, entry in (("off", {}), ("on", {"abstentions": {"per_test": 1}})):
        recipe = write_recipe(
            tmp_path / f"{name}.yaml",
            {
                "name": name,
                "sources": [{"format": "locomo", "path": str(SAMPLE), "ids": ["sample-2"]}],
                "timeline": {"padding": {"mode": "none"}},
                "products": [{"type": "log"}, {"type": "time_queries", "tests": ["dates", "session"], **entry}],
            },
        )
        code, _, err = run_cli(["run", recipe, "--output-dir", tmp_path / "out"], capsys)
        assert code == 0, err
        folder = tmp_path / "out" / name
        reports[name] = (json.loads((folder / "run.json").read_text()), (folder / "README.md").read_text(), folder)
    off, on = reports["off"][0]["configs"]["time_queries"], reports["on"][0]["configs"]["time_queries"]
    assert "abstention_field" not in off["questions"] and on["questions"]["abstention_field"] == "abstention"
    assert "name: abstention" not in reports["off"][1] and "name: abstention\n    dtype: bool" in reports["on"][1]
    # sample-2 talks on 8 and 21 June and 16 July 2024 (today): one empty date drawn, three wordings of it
    assert on["summary"]["abstentions"]["total"] == {"base_questions": 1, "variants": 3}
    assert "abstentions" not in off["summary"]
    rows = read_jsonl(reports["on"][2] / "time_queries" / "test.jsonl")
    assert sum(row["abstention"] for row in rows) == 3 and on["records"] == len(rows)
    # without gold_answers in the run the question still says it is an abstention, and the exports mark it
    code, _, err = run_cli(
        ["export", reports["on"][2], "--format", "longmemeval", "--output", tmp_path / "lme"], capsys
    )
    assert code == 0, err
    instances = json.loads((tmp_path / "lme" / "time_queries.json").read_text())
    marked = [i for i in instances if i["question_id"].endswith("_abs")]
    assert len(marked) == 1 and marked[0]["answer"] == "" and marked[0]["answer_session_ids"] == []
    code, _, err = run_cli(["export", reports["off"][2], "--format", "longmemeval", "--output", tmp_path / "o"], capsys)
    assert code == 0 and not any(
        "_abs" in i["question_id"] for i in json.loads((tmp_path / "o" / "time_queries.json").read_text())
    )
