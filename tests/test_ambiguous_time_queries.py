"""ambiguous_time_queries on the hand-built timelines of tests/fixtures/time_timelines.py."""

from __future__ import annotations

from collections import Counter

import pytest

from gen.errors import GenError
from gen.products.schema import as_features
from gen.products.temporal import ambiguous_time_queries as ambiguous
from gen.products.temporal.options import AmbiguousTimeQueriesOptions, TimeQueriesOptions
from gen.products.temporal.windows import TESTS
from gen.products.temporal.wordings import Wordings
from gen.templating import Templates
from tests.fixtures.time_timelines import ann_bob, context, late_padding

PAPER_FRAMES = {"calendar", "remember", "confirm"}


def build_both(*timelines, templates_dir=None, **options):
    ctx = context(*timelines, templates_dir=templates_dir)
    tq_options, amb_options = TimeQueriesOptions(**options), AmbiguousTimeQueriesOptions(**options)
    tq_rows = ctx.build("time_queries", tq_options)
    rows = ctx.build("ambiguous_time_queries", amb_options)
    return rows, tq_rows, ctx, amb_options


def test_dialogues_anchor_the_time_then_ask_without_it():
    rows, _, ctx, options = build_both(ann_bob(), late_padding())
    assert {r["test"] for r in rows} == set(TESTS)
    for row in rows:
        turns = row["dialogue"]
        speakers = ("Ann", "Bob") if row["conversation_id"] == "hand/ann-bob" else ("Cat", "Dan")
        assert turns[-1]["speaker"] == speakers[0] and {t["speaker"] for t in turns} == set(speakers)
        assert row["final_utterance"] == turns[-1]["text"]
        assert row["time_expression"] not in row["final_utterance"]
        assert any(row["time_expression"] in t["text"] for t in turns[:-1])
        assert row["time_expression"] in row["resolved_question"]
    checks = ctx.validate("ambiguous_time_queries", rows, options)
    assert checks.passed, {k: v for k, v in checks.report().items() if v["failed"]}
    assert checks.report()["relevant set equals the time_queries group's with the same group_id"]["checked"] == len(
        rows
    )


def test_groups_and_relevant_sets_are_those_of_time_queries():
    rows, tq_rows, _, _ = build_both(ann_bob())
    unambiguous = {r["group_id"]: (r["test"], r["params"], r["relevant_response_indices"]) for r in tq_rows}
    assert {r["group_id"] for r in rows} == set(unambiguous)
    for row in rows:
        assert unambiguous[row["group_id"]] == (row["test"], row["params"], row["relevant_response_indices"])
    last_monday = [r for r in rows if r["params"].get("weekday") == "Monday"]
    assert last_monday and all(r["relevant_response_indices"] == [5, 6] for r in last_monday)


def test_the_paper_frames_and_our_own_each_with_variants():
    rows, _, _, _ = build_both(ann_bob(), tests=["session"], max_variants_per_group="all")
    variants = {
        (r["frame"], tuple(t["text"].replace(r["time_expression"], "{time}") for t in r["dialogue"]))
        for r in rows
        if r["params"]["session"] == 3
    }
    frames = Counter(frame for frame, _ in variants)  # frame → number of wording variants
    assert set(frames) > PAPER_FRAMES and len(frames) >= 4
    assert all(n >= 2 for n in frames.values())
    calendar = next(r for r in rows if r["frame"] == "calendar" and r["params"]["session"] == 3)
    assert calendar["dialogue"][1]["speaker"] == "Bob"
    assert calendar["final_utterance"] == "Can you summarize what we discussed?"
    assert calendar["resolved_question"] == f"Can you summarize what we discussed {calendar['time_expression']}?"


def test_rotate_pairs_each_dialogue_once_and_all_crosses_with_every_phrase():
    rotate, _, _, _ = build_both(ann_bob(), tests=["last_day"], max_variants_per_group="all")
    ctx = context(ann_bob())
    every = {"tests": ["last_day"], "pairing": "all", "max_variants_per_group": "all"}
    crossed = ctx.build("ambiguous_time_queries", AmbiguousTimeQueriesOptions(**every))
    dialogues = len(Wordings(Templates(), ["digits"]).dialogues("last_day", ("Ann", "Bob")))
    assert dialogues >= 8
    assert set(Counter(r["group_id"] for r in rotate).values()) == {dialogues}
    # Sunday (1 day back) has 3 phrasings, Monday (7 days back) 2
    assert sorted(Counter(r["group_id"] for r in crossed).values()) == [2 * dialogues, 3 * dialogues]
    phrases = Counter(r["time_expression"] for r in rotate if r["params"]["weekday"] == "Sunday")
    assert len(phrases) == 3 and max(phrases.values()) - min(phrases.values()) <= 1  # spread evenly
    assert ctx.validate("ambiguous_time_queries", crossed, AmbiguousTimeQueriesOptions(**every)).passed


def test_validator_catches_a_final_utterance_that_gives_the_time_away():
    rows, _, ctx, options = build_both(ann_bob(), tests=["rel_day"])
    bad = [dict(r) for r in rows]
    row = next(r for r in bad if r["time_expression"] == "yesterday")
    row["dialogue"] = [*row["dialogue"][:-1], {"speaker": "Ann", "text": "What did we discuss yesterday?"}]
    row["final_utterance"] = "What did we discuss yesterday?"
    failed = {name for name, r in ctx.validate("ambiguous_time_queries", bad, options).report().items() if r["failed"]}
    assert "the final utterance contains none of its base question's time expressions" in failed
    swapped = [dict(r) for r in rows]
    swapped[0]["relevant_response_indices"] = swapped[0]["relevant_response_indices"][:-1]
    swapped[0]["num_relevant"] -= 1
    failed = {
        name for name, r in ctx.validate("ambiguous_time_queries", swapped, options).report().items() if r["failed"]
    }
    assert "relevant set equals the window recomputed from the log" in failed
    assert "relevant set equals the time_queries group's with the same group_id" in failed


def test_frames_option_and_a_user_frame(tmp_path):
    folder = tmp_path / "templates" / "ambiguous" / "frames"
    folder.mkdir(parents=True)
    (folder / "diary.j2").write_text(
        "A: My diary says we met {{ time }}, {{ speaker_b }}.\nB: It does?\nA: What did we talk about?\n"
    )
    rows, _, ctx, _ = build_both(
        ann_bob(), templates_dir=tmp_path / "templates", tests=["dates"], max_variants_per_group="all"
    )
    assert "diary" in {r["frame"] for r in rows}
    only = ctx.build("ambiguous_time_queries", AmbiguousTimeQueriesOptions(tests=["dates"], frames=["diary"]))
    assert {r["frame"] for r in only} == {"diary"}
    assert only[0]["dialogue"][0]["text"].endswith(", Bob.")
    with pytest.raises(GenError, match="unknown dialogue frame"):
        ctx.build("ambiguous_time_queries", AmbiguousTimeQueriesOptions(frames=["diaries"]))


def test_a_dialogue_that_names_the_time_in_its_last_turn_is_rejected(tmp_path):
    folder = tmp_path / "templates" / "ambiguous" / "frames"
    folder.mkdir(parents=True)
    (folder / "calendar.j2").write_text("A: Hello.\nB: Hi.\nA: What did we discuss {{ time }}?\n")
    with pytest.raises(GenError, match="before the last"):
        build_both(ann_bob(), templates_dir=tmp_path / "templates")


def test_summary_and_features():
    from datasets import Dataset

    rows, _, ctx, _ = build_both(ann_bob())
    summary = ctx.summary("ambiguous_time_queries", rows)
    assert summary["total"]["base_questions"] == 39 and summary["total"]["variants"] == len(rows)
    assert set(summary["by_frame"]) >= PAPER_FRAMES
    dataset = Dataset.from_list(rows[:20], features=as_features(ambiguous.features()))
    assert dataset[0]["dialogue"][0]["speaker"] == "Ann"


def test_by_default_three_dialogues_per_base_question_drawn_from_all_of_them():
    rows, _, ctx, options = build_both(ann_bob())
    every, _, _, _ = build_both(ann_bob(), max_variants_per_group="all")
    dialogues = len(Wordings(Templates(), ["digits"]).dialogues("session", ("Ann", "Bob")))
    assert dialogues >= 8  # rotate pairing: one per dialogue variant, so far more than 3 to draw from
    per_group = Counter(r["group_id"] for r in rows)
    assert set(per_group.values()) == {3} and set(per_group) == {r["group_id"] for r in every}
    all_ids = {r["question_id"] for r in every}
    assert {r["question_id"] for r in rows} <= all_ids
    assert ctx.validate("ambiguous_time_queries", rows, options).passed
    too_many = [*rows, next(r for r in every if r["question_id"] not in {x["question_id"] for x in rows})]
    report = ctx.validate("ambiguous_time_queries", too_many, options).report()
    assert report["at most max_variants_per_group variants per base question"]["failed"] == 1


def test_validator_catches_dialogues_that_are_not_the_seeded_draw():
    rows, _, ctx, options = build_both(ann_bob(), tests=["session"])
    every, _, _, _ = build_both(ann_bob(), tests=["session"], max_variants_per_group="all")
    kept = {r["question_id"] for r in rows}
    swapped = [dict(r) for r in rows]
    other = next(r for r in every if r["group_id"] == rows[0]["group_id"] and r["question_id"] not in kept)
    swapped[0] = {**other}  # a dialogue of the same base question, but not one the seed drew
    report = ctx.validate("ambiguous_time_queries", swapped, options).report()
    assert {name for name, r in report.items() if r["failed"]} == {
        "each base question keeps its seeded sample of dialogues"
    }
    # the same records checked as the run of a recipe with another seed
    reseeded = context(ann_bob(), seed=1)
    reseeded.build("time_queries", TimeQueriesOptions(tests=["session"]))
    report = reseeded.validate("ambiguous_time_queries", rows, options).report()
    seeded = report["each base question keeps its seeded sample of dialogues"]
    assert seeded["checked"] == len({r["group_id"] for r in every}) and seeded["failed"] > 0
