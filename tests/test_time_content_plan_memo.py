"""The memo of time+content plans beside the LLM cache: a conversation planned before is not planned again, and
what it gives is what planning gives; any change to a plan's inputs plans again; a memo that cannot be used
is left aside."""

from __future__ import annotations

import dataclasses
import sqlite3
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gen.llm.config import RunSettings
from gen.llm.engine import Engine
from gen.products.registry import bind, load
from gen.products.time_content import anchors
from gen.products.time_content import steps as tcq_steps
from gen.products.time_content.plan_memo import FILE, PlanMemo, code_digest, plan_key
from tests.conftest import write_recipe
from tests.harness import Harness

SAMPLE = ROOT / "gen" / "data" / "sample_locomo.json"


def harness(tmp_path: Path, seed: int = 13) -> Harness:
    data = {
        "name": "memo-test",
        "seed": seed,
        "sources": [{"format": "locomo", "path": str(SAMPLE)}],
        "timeline": {"padding": {"mode": "donor", "after_minutes": 60, "target_words": 300}},
        "llm": {"main": {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}},
        "products": [{"type": "time_content_questions", "per_conversation": 8}],
    }
    recipe = load(write_recipe(tmp_path / f"recipe-{seed}.yaml", data))[0]
    engine = Engine(recipe.llm, RunSettings(cache_dir=tmp_path / "cache", progress="off"))
    return Harness.from_recipe(recipe, engine=engine)


@pytest.fixture
def sample(tmp_path):
    made = harness(tmp_path)
    yield made
    made.ctx.llm().close()


def options_of(h: Harness):
    return next(b.product.options for b in bind(h.ctx.recipe) if b.name == "time_content_questions")


def fresh_items(h: Harness, options) -> list:
    """The items as planning gives them, without any memo."""
    book = tcq_steps.PhraseBook(h.ctx.templates)
    return [
        item
        for u in h.units
        for item in tcq_steps.items_of(u.stamped, tcq_steps.choose(u.stamped, options, h.ctx.seed, book), options, book)
    ]


@pytest.fixture
def selections(monkeypatch):
    """The conversations whose anchors are chosen (anchor selection, counted)."""
    chosen: list[str] = []
    select = anchors.select

    def counting(timeline, **kwargs):
        chosen.append(timeline.conversation_id)
        return select(timeline, **kwargs)

    monkeypatch.setattr(anchors, "select", counting)
    return chosen


def stored_rows(h: Harness) -> list[tuple[str, str]]:
    with sqlite3.connect(h.ctx.llm().cache.path.parent / FILE) as conn:
        return conn.execute("SELECT key, plan FROM plans").fetchall()


def test_a_conversation_planned_before_is_read_from_the_memo(sample, selections):
    options = options_of(sample)
    expected = fresh_items(sample, options)
    selections.clear()
    first = tcq_steps.plan_items(sample.units, sample.ctx, options)
    assert len(selections) == 2 and len(stored_rows(sample)) == 2  # both planned, both kept
    second = tcq_steps.plan_items(sample.units, sample.ctx, options)
    assert len(selections) == 2  # nothing chosen again
    assert first == expected and second == expected
    assert len(expected) == 16 and {item.reference for item in second} == {item.reference for item in expected}


def test_any_change_to_the_inputs_plans_again(sample, selections, tmp_path):
    options = options_of(sample)
    tcq_steps.plan_items(sample.units, sample.ctx, options)
    # another option: both conversations are planned again, and that plan is what planning gives
    fewer = options.model_copy(update={"per_conversation": 5})
    assert tcq_steps.plan_items(sample.units, sample.ctx, fewer) == fresh_items(sample, fewer)
    assert len(selections) == 2 + 2 + 2  # (fresh_items chooses both again too)
    # another seed, another response text: other keys
    timeline = sample.units[0].stamped
    settings = {"options": options.model_dump(mode="json"), "seed": 13}
    code = code_digest(tcq_steps)
    key = plan_key(timeline, settings, code)
    assert plan_key(timeline, {**settings, "seed": 14}, code) != key
    first = timeline.responses[0]
    edited = dataclasses.replace(
        timeline, responses=(dataclasses.replace(first, text=first.text + "!"), *timeline.responses[1:])
    )
    assert plan_key(edited, settings, code) != key
    assert plan_key(timeline, settings, code) == key


def test_a_plan_whose_time_phrases_changed_in_number_is_made_again(sample, selections, monkeypatch):
    options = options_of(sample)
    tcq_steps.plan_items(sample.units, sample.ctx, options)
    rendered = tcq_steps.reference_phrases
    monkeypatch.setattr(tcq_steps, "reference_phrases", lambda *args: [*rendered(*args), "at that very moment"])
    selections.clear()
    again = tcq_steps.plan_items(sample.units, sample.ctx, options)
    assert selections == [u.conversation_id for u in sample.units]  # the stored plans no longer fit
    assert again == fresh_items(sample, options)  # drawn from five phrases, as planning draws them


def test_a_damaged_row_is_planned_again(sample, selections):
    options = options_of(sample)
    expected = tcq_steps.plan_items(sample.units, sample.ctx, options)
    key = stored_rows(sample)[0][0]
    with sqlite3.connect(sample.ctx.llm().cache.path.parent / FILE) as conn:
        conn.execute("UPDATE plans SET plan = ? WHERE key = ?", ('[[0, 99999, 1, "Maya"]]', key))
    selections.clear()
    assert tcq_steps.plan_items(sample.units, sample.ctx, options) == expected
    assert len(selections) == 1


def test_a_memo_that_cannot_be_opened_is_left_aside(sample, selections):
    options = options_of(sample)
    (sample.ctx.llm().cache.path.parent / FILE).mkdir()  # a folder where the file should be
    assert PlanMemo(sample.ctx.llm().cache.path.parent).plans(["x"], [sample.units[0].stamped]) == {}
    expected = fresh_items(sample, options)
    assert tcq_steps.plan_items(sample.units, sample.ctx, options) == expected
    assert tcq_steps.plan_items(sample.units, sample.ctx, options) == expected
    assert len(selections) == 2 + 2 + 2  # planned every time
