"""time_queries  on hand-built timelines: every window of the 11 tests worked out by hand, wordings,
options, and a validator that catches wrong records. The timelines are described in tests/fixtures/time_timelines.py."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from gen.errors import GenError
from gen.products.chat_log.log import records as log_records
from gen.products.schema import as_features
from gen.products.temporal import time_queries
from gen.products.temporal.checking import LogView
from gen.products.temporal.options import TimeQueriesOptions
from gen.products.temporal.windows import TESTS, base_questions
from tests.conftest import write_json, write_recipe
from tests.fixtures.time_timelines import ann_bob, context, late_padding, make_timeline


# Ann/Bob: test → {params as JSON: relevant response indices}, all worked out by hand from the table in the fixture.
def J(**params) -> str:
    return json.dumps(params, sort_keys=True)


ANN_BOB_WINDOWS = {
    "session": {
        J(session=1): [0, 1],
        J(session=2): [2, 3, 4],
        J(session=3): [5, 6],
        J(session=4): [7, 8, 9],
        J(session=5): [10, 11],
    },
    "session_span": {
        J(first_session=1, last_session=3): [0, 1, 2, 3, 4, 5, 6],
        J(first_session=2, last_session=4): [2, 3, 4, 5, 6, 7, 8, 9],
        J(first_session=3, last_session=5): [5, 6, 7, 8, 9, 10, 11],
    },
    # current session is 7 (5 real + padding + 1): session 5 is "the session before last"
    "rel_session": {
        J(session=5, sessions_ago=2): [10, 11],
        J(session=4, sessions_ago=3): [7, 8, 9],
        J(session=3, sessions_ago=4): [5, 6],
        J(session=2, sessions_ago=5): [2, 3, 4],
        J(session=1, sessions_ago=6): [0, 1],
    },
    # session 2 crosses midnight into 2024: its last response is on 1 January; today's window takes the padding too
    "dates": {
        J(date="2023-11-30"): [0, 1],
        J(date="2023-12-31"): [2, 3],
        J(date="2024-01-01"): [4],
        J(date="2024-01-08"): [5, 6],
        J(date="2024-01-14"): [7, 8],
        J(date="2024-01-15"): [9, 10, 11, 12, 13, 14],
    },
    # a session's date is its first response's: run 2-4 ends on 14 January, so response 9 (15 January) is outside
    "date_span": {
        J(first_date="2023-11-30", last_date="2024-01-08"): [0, 1, 2, 3, 4, 5, 6],
        J(first_date="2023-12-31", last_date="2024-01-14"): [2, 3, 4, 5, 6, 7, 8],
        J(first_date="2024-01-08", last_date="2024-01-15"): [5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
    },
    "month": {
        J(month="2023-11"): [0, 1],
        J(month="2023-12"): [2, 3],
        J(month="2024-01"): [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
    },
    # 30 Nov → 15 Jan is 1 + 31 + 14 = 46 days
    "rel_day": {
        J(date="2023-11-30", days_ago=46): [0, 1],
        J(date="2023-12-31", days_ago=15): [2, 3],
        J(date="2024-01-01", days_ago=14): [4],
        J(date="2024-01-08", days_ago=7): [5, 6],
        J(date="2024-01-14", days_ago=1): [7, 8],
        J(date="2024-01-15", days_ago=0): [9, 10, 11, 12, 13, 14],
    },
    # December 2023 is "last month" in January 2024
    "rel_month": {
        J(month="2023-11", months_ago=2): [0, 1],
        J(month="2023-12", months_ago=1): [2, 3],
        J(month="2024-01", months_ago=0): [4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
    },
    # 3 days: 12-15 January; 7 days: 8-15 January (0 <= today - date <= N)
    "day_span": {
        J(days=3, first_date="2024-01-12", last_date="2024-01-15"): [7, 8, 9, 10, 11, 12, 13, 14],
        J(days=7, first_date="2024-01-08", last_date="2024-01-15"): [5, 6, 7, 8, 9, 10, 11, 12, 13, 14],
    },
    # today is Monday: "last Monday" is 8 January, 7 days back; Sunday is yesterday; 9-13 January are empty
    "last_day": {
        J(weekday="Sunday", date="2024-01-14", days_ago=1): [7, 8],
        J(weekday="Monday", date="2024-01-08", days_ago=7): [5, 6],
    },
    "earlier_today": {J(date="2024-01-15"): [9, 10, 11, 12, 13, 14]},
}


def windows_by_generator(timeline, **options) -> dict:
    out: dict = {}
    for base in base_questions(timeline, TimeQueriesOptions(**options)):
        out.setdefault(base.test, {})[json.dumps(base.params, sort_keys=True)] = list(base.relevant)
    return out


def build(*timelines, templates_dir=None, **options):
    ctx = context(*timelines, templates_dir=templates_dir)
    opts = TimeQueriesOptions(**options)
    rows = ctx.build("time_queries", opts)
    return rows, ctx, opts


def test_the_hand_built_timeline_is_what_the_fixture_says():
    timeline = ann_bob()
    assert str(timeline.now) == "2024-01-15 11:50:40" and timeline.today.strftime("%A") == "Monday"
    assert timeline.current_session == 7 and timeline.num_real_sessions == 5


@pytest.mark.parametrize("test", TESTS)
def test_generator_windows_match_hand_computed(test):
    assert windows_by_generator(ann_bob())[test] == ANN_BOB_WINDOWS[test]


@pytest.mark.parametrize("test", TESTS)
def test_validator_windows_match_hand_computed(test):
    view = LogView(list(log_records(ann_bob())), now_offset_minutes=50)
    expected = {json.dumps(p, sort_keys=True) for p in view.expected(test, 3, [3, 7])}
    assert expected == set(ANN_BOB_WINDOWS[test])
    for params, indices in ANN_BOB_WINDOWS[test].items():
        assert view.window(test, json.loads(params)) == indices


def test_windows_holding_only_padding_or_nothing_are_not_asked():
    # Cat/Dan: today is Friday 19 January 2024 and only the padding session falls in the last 8 days
    windows = windows_by_generator(late_padding(), day_spans=[3, 7, 10])
    assert "earlier_today" not in windows and "last_day" not in windows
    assert windows["day_span"] == {J(days=10, first_date="2024-01-09", last_date="2024-01-19"): [4, 5, 6, 7]}
    assert windows["rel_day"] == {
        J(date="2023-01-10", days_ago=374): [0, 1],
        J(date="2023-06-05", days_ago=228): [2, 3],
        J(date="2024-01-10", days_ago=9): [4, 5],
    }
    assert windows["rel_month"] == {
        J(month="2023-01", months_ago=12): [0, 1],
        J(month="2023-06", months_ago=7): [2, 3],
        J(month="2024-01", months_ago=0): [4, 5, 6, 7],
    }
    rows, ctx, opts = build(late_padding(), day_spans=[3, 7, 10])
    assert all(row["relevant_response_indices"] != [6, 7] for row in rows)
    assert ctx.validate("time_queries", rows, opts).passed


def test_special_phrasings_and_numerals():
    rows, _, _ = build(ann_bob(), max_variants_per_group="all")
    questions = {row["question"] for row in rows}
    for expected in [
        "What did we discuss today?",
        "What did we discuss yesterday?",
        "What did we discuss last Monday?",
        "What did we discuss last Sunday?",
        "What did we discuss on Sunday?",  # 1 day back: "on Sunday" is clear
        "What did we discuss in the session before last?",
        "What did we discuss 3 sessions ago?",
        "What did we discuss three sessions ago?",
        "What did we discuss last month?",
        "What did we discuss this month?",
        "What did we discuss in the last week?",
        "What did we discuss in the last 3 days?",
        "What did we discuss over the past three days?",
        "What did we discuss earlier today?",
        "What did we discuss in session 5?",
        "What did we discuss in session five?",
        "What did we discuss in our 5th session?",
        "What did we discuss in our fifth conversation?",
        "What did we discuss on December 31st, 2023?",
        "What did we discuss on December thirty-first, 2023?",
        "What did we discuss on 31 December 2023?",
        "What did we discuss on December 31st?",
        "What did we discuss on Monday, January 8th, 2024?",
        "What did we discuss in November 2023?",
        "What did we discuss in November?",
        "What did we discuss 46 days ago?",
        "What did we discuss forty-six days ago?",
        "What did we discuss a week ago today?",
        "What did we discuss between December 31st, 2023 and January 14th, 2024?",
        "What did we discuss in sessions 1 to 3?",
        "What did we discuss from our first to our third conversation?",
    ]:
        assert expected in questions, expected
    # today is Monday: "on Monday" would be ambiguous, so last Monday is only "last Monday" / "this past Monday"
    assert "What did we discuss on Monday?" not in questions
    # frames: at least 3 per test, and at least 2 phrasings per test
    per_test = {}
    for row in rows:
        per_test.setdefault(row["test"], {"phrases": set(), "questions": set()})
        per_test[row["test"]]["phrases"].add(row["time_expression"])
    assert set(per_test) == set(TESTS)
    assert all(len(v["phrases"]) >= 2 for v in per_test.values())
    frames = {row["question"].replace(row["time_expression"], "{time}") for row in rows}
    assert len(frames) >= 3


def test_without_padding_the_last_real_session_is_last_time():
    timeline = make_timeline(
        "hand/no-padding",
        ("Eve", "Fay"),
        [["2024-02-28T10:00:00", "2024-02-28T10:00:30"], ["2024-02-29T10:00:00"], ["2024-03-01T09:00:00"]],
    )
    rows, ctx, opts = build(
        timeline, tests=["rel_session", "rel_day", "day_span"], numeral_styles=["words"], max_variants_per_group="all"
    )
    asked = {(r["time_expression"], tuple(r["relevant_response_indices"])) for r in rows}
    # current session 4: session 3 is "last time", session 2 "the session before last"; leap day is yesterday
    assert {
        ("last time", (3,)),
        ("in the session before last", (2,)),
        ("three sessions ago", (0, 1)),
        ("yesterday", (2,)),
        ("the day before yesterday", (0, 1)),
        ("today", (3,)),
        ("over the past three days", (0, 1, 2, 3)),
    } <= asked
    assert ctx.validate("time_queries", rows, opts).passed


def test_a_phrase_table_that_renders_nothing_is_a_clear_error(tmp_path):
    folder = tmp_path / "templates" / "time_queries" / "phrases"
    folder.mkdir(parents=True)
    (folder / "month.j2").write_text("{% if month == 'May' %}in May{% endif %}\n")
    with pytest.raises(GenError, match="no time phrase for month"):
        build(ann_bob(), templates_dir=tmp_path / "templates", tests=["month"])


def test_yearless_phrasing_only_when_unambiguous():
    # Cat/Dan talked on 10 January 2023 and 10 January 2024: neither may be called "January 10th" alone
    rows, _, _ = build(late_padding(), max_variants_per_group="all")
    expressions = {row["time_expression"] for row in rows}
    assert "on January 10th, 2023" in expressions and "on January 10th" not in expressions
    assert "in January 2024" in expressions and "in January" not in expressions
    assert "on June 5th" in expressions and "in June" in expressions
    assert "228 days ago" in expressions and "two hundred and twenty-eight days ago" not in expressions


def test_records_fields_ids_and_validation_pass():
    rows, ctx, opts = build(ann_bob(), late_padding(), max_variants_per_group="all")
    row = next(r for r in rows if r["question"] == "What did we discuss last Monday?")
    assert row["params"] == {"weekday": "Monday", "date": "2024-01-08", "days_ago": 7}
    assert row["relevant_response_indices"] == [5, 6] and row["num_relevant"] == 2
    assert row["now"] == "2024-01-15T11:50:40" and row["current_session"] == 7
    assert row["time_expression"] == "last Monday" and row["test"] == "last_day"
    assert len({r["question_id"] for r in rows}) == len(rows)
    for conversation in ("hand/ann-bob", "hand/cat-dan"):
        texts = [r["question"] for r in rows if r["conversation_id"] == conversation]
        assert len(texts) == len(set(texts))
    groups = {}
    for r in rows:
        groups.setdefault(r["group_id"], set()).add((r["test"], json.dumps(r["params"], sort_keys=True)))
    assert all(len(v) == 1 for v in groups.values())
    checks = ctx.validate("time_queries", rows, opts)
    assert checks.passed, {k: v for k, v in checks.report().items() if v["failed"]}
    again, _, _ = build(ann_bob(), late_padding(), max_variants_per_group="all")
    assert [r["question_id"] for r in again] == [r["question_id"] for r in rows]


def test_validator_catches_wrong_records():
    rows, ctx, opts = build(ann_bob())

    def failures(changed):
        return {name for name, r in ctx.validate("time_queries", changed, opts).report().items() if r["failed"]}

    wrong = [dict(r) for r in rows]
    target = next(r for r in wrong if r["test"] == "date_span" and r["params"]["first_date"] == "2023-12-31")
    target["relevant_response_indices"] = [2, 3, 4, 5, 6, 7, 8, 9]  # "the whole of session 4" is not the date window
    target["num_relevant"] = 8
    assert "relevant set equals the window recomputed from the log" in failures(wrong)

    without_yesterday = [r for r in rows if not (r["test"] == "rel_day" and r["params"]["days_ago"] == 1)]
    assert "base questions are exactly the windows the test defines (time_queries)" in failures(without_yesterday)

    duplicated = [*rows, dict(rows[0], question_id="x")]
    assert "no duplicate question text within a conversation" in failures(duplicated)

    reworded = [dict(r) for r in rows]
    reworded[0]["question"] = "What did we discuss back then?"
    assert failures(reworded) == {
        "the question contains its time expression",
        "each base question keeps its seeded sample of wordings",  # the text is no longer one it drew
    }

    padding_only = [dict(r) for r in rows]
    padding_only[0].update(relevant_response_indices=[12, 13, 14], num_relevant=3)
    assert "relevant set is not empty and not only padding" in failures(padding_only)


def test_validator_checks_each_variant_of_a_base_question_not_only_its_first():
    """The rows of a base question share their relevant list and repeat their time expressions; a later row
    that differs is still caught, and its base question's other rows are not blamed."""
    rows, ctx, opts = build(ann_bob(), max_variants_per_group="all")
    month_rows = [i for i, r in enumerate(rows) if r["test"] == "month"]
    first, last = month_rows[0], max(i for i in month_rows if rows[i]["group_id"] == rows[month_rows[0]]["group_id"])
    assert last > first

    def failed(changed):
        return {name: r["failed"] for name, r in ctx.validate("time_queries", changed, opts).report().items()}

    shorter = [dict(r) for r in rows]
    indices = list(rows[last]["relevant_response_indices"])
    assert len(indices) > 1
    shorter[last].update(relevant_response_indices=indices[:-1], num_relevant=len(indices) - 1)
    report = failed(shorter)
    assert report["relevant set equals the window recomputed from the log"] == 1
    assert report["the variants of a base question share test, params and relevant set"] == 1

    unnamed = [dict(r) for r in rows]
    month = unnamed[last]["params"]["month"]
    unnamed[last].update(time_expression="back then", question=f"What did we discuss back then? ({month})")
    report = failed(unnamed)
    assert report["time expression names its month or weekday"] == 1
    assert report["each base question keeps its seeded sample of wordings"] == 1
    assert sum(report.values()) == 2


def test_options_choose_tests_styles_spans_and_variant_limit():
    chosen = {
        "tests": ["session_span", "day_span", "rel_day"],
        "span_length": 2,
        "day_spans": [1],
        "numeral_styles": ["digits"],
        "max_variants_per_group": 4,
    }
    rows, ctx, opts = build(ann_bob(), **chosen)
    assert {r["test"] for r in rows} == {"session_span", "day_span", "rel_day"}
    spans = {(r["params"]["first_session"], r["params"]["last_session"]) for r in rows if r["test"] == "session_span"}
    assert spans == {(1, 2), (2, 3), (3, 4), (4, 5)}
    day_span = {
        json.dumps(r["params"], sort_keys=True): r["relevant_response_indices"] for r in rows if r["test"] == "day_span"
    }
    assert day_span == {J(days=1, first_date="2024-01-14", last_date="2024-01-15"): [7, 8, 9, 10, 11, 12, 13, 14]}
    assert not any("three" in r["question"] or "five" in r["question"] for r in rows)
    assert max(Counter(r["group_id"] for r in rows).values()) == 4
    assert ctx.validate("time_queries", rows, opts).passed
    again, _, _ = build(ann_bob(), **chosen)
    assert [r["question"] for r in again] == [r["question"] for r in rows]


def test_unknown_option_values_are_recipe_errors(tmp_path):
    from gen.products.registry import load

    data = write_json(tmp_path / "c.json", [])
    recipe = {
        "name": "r",
        "sources": [{"format": "locomo", "path": str(data)}],
        "products": [{"type": "time_queries", "tests": ["session", "weekly"]}],
    }
    with pytest.raises(GenError) as caught:
        load(write_recipe(tmp_path / "r.yaml", recipe))
    assert "products[0].tests[1]" in str(caught.value)
    recipe["products"] = [{"type": "time_queries", "test": ["session"]}]
    with pytest.raises(GenError, match="did you mean 'tests'"):
        load(write_recipe(tmp_path / "r.yaml", recipe))


def test_a_user_adds_a_wording_by_editing_templates(tmp_path):
    folder = tmp_path / "templates" / "time_queries"
    (folder / "phrases").mkdir(parents=True)
    (folder / "frames.j2").write_text("What did we discuss {{ time }}?\nWhat was on our minds {{ time }}?\n")
    (folder / "phrases" / "last_day.j2").write_text("last {{ weekday }}\nthe {{ weekday }} just gone\n")
    rows, ctx, opts = build(
        ann_bob(), templates_dir=tmp_path / "templates", tests=["last_day"], max_variants_per_group="all"
    )
    assert {r["question"] for r in rows if r["params"]["weekday"] == "Monday"} == {
        "What did we discuss last Monday?",
        "What was on our minds last Monday?",
        "What did we discuss the Monday just gone?",
        "What was on our minds the Monday just gone?",
    }
    assert ctx.validate("time_queries", rows, opts).passed


def test_a_frame_without_the_time_slot_is_a_clear_error(tmp_path):
    folder = tmp_path / "templates" / "time_queries"
    folder.mkdir(parents=True)
    (folder / "frames.j2").write_text("What did we discuss?\n")
    with pytest.raises(GenError, match=r"exactly once"):
        build(ann_bob(), templates_dir=tmp_path / "templates")


def test_summary_counts_base_questions_and_variants():
    rows, ctx, _ = build(
        ann_bob(), tests=["last_day", "earlier_today"], numeral_styles=["digits"], max_variants_per_group="all"
    )
    summary = ctx.summary("time_queries", rows)
    # last_day: 2 base questions; Sunday (1 day back) has 3 phrasings, Monday (7 back) 2; × 5 frames
    assert summary["by_test"]["last_day"] == {"base_questions": 2, "variants": 25, "conversations": 1}
    assert summary["by_test"]["earlier_today"] == {"base_questions": 1, "variants": 15, "conversations": 1}
    assert summary["total"] == {"base_questions": 3, "variants": 40, "conversations": 1}
    default, ctx, _ = build(ann_bob(), tests=["last_day", "earlier_today"], numeral_styles=["digits"])
    summary = ctx.summary("time_queries", default)  # 3 of each base question's wordings
    assert summary["total"] == {"base_questions": 3, "variants": 9, "conversations": 1}


def test_by_default_three_wordings_per_base_question_chosen_by_seed():
    rows, ctx, opts = build(ann_bob())
    every, _, _ = build(ann_bob(), max_variants_per_group="all")
    by_group, all_by_group = {}, {}
    for row in rows:
        by_group.setdefault(row["group_id"], []).append(row["question"])
    for row in every:
        all_by_group.setdefault(row["group_id"], []).append(row["question"])
    # every base question has at least 5 frames (x its phrasings), so the default keeps exactly 3 of them
    assert min(map(len, all_by_group.values())) >= 5
    assert set(by_group) == set(all_by_group) and {len(texts) for texts in by_group.values()} == {3}
    assert all(set(texts) <= set(all_by_group[group]) for group, texts in by_group.items())
    assert ctx.validate("time_queries", rows, opts).passed
    # the draw depends on the seed and on this conversation only: not on the other conversations built with it
    along, _, _ = build(late_padding(), ann_bob())
    assert [r for r in along if r["conversation_id"] == "hand/ann-bob"] == rows
    reseeded = context(ann_bob(), seed=1).build("time_queries", opts)
    assert {r["group_id"] for r in reseeded} == set(by_group)
    assert {r["question_id"] for r in reseeded} != {r["question_id"] for r in rows}


def test_validator_catches_a_wording_that_is_not_the_seeded_draw():
    rows, ctx, opts = build(ann_bob(), tests=["session"])
    every, _, _ = build(ann_bob(), tests=["session"], max_variants_per_group="all")
    kept = {r["question"] for r in rows}
    swapped = [dict(r) for r in rows]
    other = next(r for r in every if r["group_id"] == rows[0]["group_id"] and r["question"] not in kept)
    swapped[0].update(question=other["question"], time_expression=other["time_expression"])
    report = ctx.validate("time_queries", swapped, opts).report()
    assert {name for name, r in report.items() if r["failed"]} == {
        "each base question keeps its seeded sample of wordings"
    }


def test_validator_catches_a_sample_drawn_with_another_seed():
    rows, _, _ = build(ann_bob())
    other_seed = context(ann_bob(), seed=1)  # the same records, checked as the run of a recipe with seed 1
    report = other_seed.validate("time_queries", rows, TimeQueriesOptions()).report()
    assert {name for name, r in report.items() if r["failed"]} == {
        "each base question keeps its seeded sample of wordings"
    }
    seeded = report["each base question keeps its seeded sample of wordings"]
    assert seeded["checked"] == 39 and seeded["failed"] > 0  # 5 + 3 + 5 + 6 + 3 + 3 + 6 + 3 + 2 + 2 + 1 windows


def test_validator_lists_the_base_questions_in_the_order_they_are_asked():
    # the wordings a question may use depend on the questions before it (a text is used once), so the
    # validator's own list of windows must come in the build's order
    for timeline in (ann_bob(), late_padding()):
        options = TimeQueriesOptions(day_spans=[7, 3, 10])
        view = LogView(list(log_records(timeline)), now_offset_minutes=50)
        assert view.base_questions(options) == [(b.test, b.params) for b in base_questions(timeline, options)]


def test_a_wording_an_earlier_question_used_is_dropped_and_the_validator_expects_that(tmp_path):
    folder = tmp_path / "templates" / "time_queries"
    (folder / "phrases").mkdir(parents=True)
    # the first frame twice: its second copy is a repeat within the same base question
    (folder / "frames.j2").write_text(
        "What did we discuss {{ time }}?\nWhat did we discuss {{ time }}?\nWhat came up {{ time }}?\n"
    )
    (folder / "phrases" / "dates.j2").write_text("on {{ month }} {{ day_ordinal }}\n")
    (folder / "phrases" / "rel_day.j2").write_text("on {{ month }} {{ day_ordinal }}\n{{ days_ago }} days ago\n")
    options = dict(tests=["dates", "rel_day"], numeral_styles=["digits"], max_variants_per_group="all")
    rows, ctx, opts = build(ann_bob(), templates_dir=tmp_path / "templates", **options)
    by_group: dict = {}
    for row in rows:
        by_group.setdefault((row["test"], row["params"]["date"]), []).append(row["question"])
    # 8 January: the dates question keeps 2 of its 3 texts; the rel_day question (7 days back) asks the same
    # date, so of its 6 texts only the 2 with "7 days ago" are new
    assert by_group["dates", "2024-01-08"] == ["What did we discuss on January 8th?", "What came up on January 8th?"]
    assert by_group["rel_day", "2024-01-08"] == ["What did we discuss 7 days ago?", "What came up 7 days ago?"]
    assert {len(texts) for texts in by_group.values()} == {2} and len(by_group) == 12  # 6 dates, 2 tests
    assert len(ctx.rejects) == 6 * 1 + 6 * 4
    assert ctx.validate("time_queries", rows, opts).passed

    def failures(changed):
        return {name for name, r in ctx.validate("time_queries", changed, opts).report().items() if r["failed"]}

    dropped = [r for r in rows if r["question"] != "What came up 7 days ago?"]
    assert failures(dropped) == {"each base question keeps its seeded sample of wordings"}
    at = [i for i, r in enumerate(rows) if r["question"].endswith("7 days ago?")]
    reordered = list(rows)
    reordered[at[0]], reordered[at[1]] = rows[at[1]], rows[at[0]]
    assert failures(reordered) == {"each base question keeps its seeded sample of wordings"}


def test_max_variants_per_group_takes_a_number_or_all():
    assert TimeQueriesOptions().max_variants_per_group == 3
    assert TimeQueriesOptions(max_variants_per_group="all").variant_limit is None
    assert TimeQueriesOptions(max_variants_per_group=None).variant_limit is None  # null, as older recipes wrote it
    for wrong in ("some", 0, 2.5, True):
        with pytest.raises(ValueError, match="is neither a number of wordings"):
            TimeQueriesOptions(max_variants_per_group=wrong)


def test_records_fit_the_declared_features():
    from datasets import Dataset

    rows, _, _ = build(ann_bob())
    dataset = Dataset.from_list(rows[:50] + rows[-50:], features=as_features(time_queries.features()))
    assert dataset[0]["params"]["session"] == 1 and dataset[0]["params"]["date"] is None


@pytest.mark.integration
def test_locomo10_every_conversation_gets_every_test(tmp_path):
    """The full LoCoMo build (default timeline and options): validators pass, every test but last_day asks
    something of every conversation, and last_day appears exactly where a real response is 1-7 days old."""
    from datetime import date, datetime, timedelta

    from gen.products.chat_log.log import records
    from gen.recipe import load_recipe
    from tests.conftest import require_shared
    from tests.harness import Harness

    locomo = require_shared("locomo/locomo10.json")
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "tq",
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(locomo)}],
            "products": [{"type": "time_queries"}, {"type": "ambiguous_time_queries"}],
        },
    )
    ctx = Harness.from_recipe(load_recipe(recipe))
    rows = ctx.build("time_queries")
    ambiguous_rows = ctx.build("ambiguous_time_queries")
    for product, product_rows in (("time_queries", rows), ("ambiguous_time_queries", ambiguous_rows)):
        checks = ctx.validate(product, product_rows)
        assert checks.passed, {k: v for k, v in checks.report().items() if v["failed"]}
    conversations = [t.conversation_id for t in ctx.timelines]
    assert len(conversations) == 10
    tests_by_conversation = {c: set() for c in conversations}
    for row in rows:
        tests_by_conversation[row["conversation_id"]].add(row["test"])
    assert all(set(TESTS) - {"last_day"} <= tests for tests in tests_by_conversation.values())
    for conversation in conversations:
        texts = [r["question"] for r in rows if r["conversation_id"] == conversation]
        assert len(texts) == len(set(texts))
    with_last_day = set()
    for timeline in ctx.timelines:
        log = list(records(timeline))
        today = (datetime.fromisoformat(log[-1]["timestamp"]) + timedelta(minutes=50)).date()  # now's date
        if any(not r["is_padding"] and 1 <= (today - date.fromisoformat(r["date"])).days <= 7 for r in log):
            with_last_day.add(timeline.conversation_id)
    assert with_last_day == {c for c, tests in tests_by_conversation.items() if "last_day" in tests}
    assert ctx.summary("time_queries", rows)["by_test"]["last_day"]["conversations"] == len(with_last_day) == 9
