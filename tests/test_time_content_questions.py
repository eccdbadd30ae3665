"""time_content_questions: anchors, question checks, and generation through the real engine and
the `openai` client against the fake OpenAI-compatible server with scripted, realistic replies.

The scripted conversation is sample-1 of gen/data/sample_locomo.json (Maya and Tomas, six sessions). The
expectations (which anchors, which questions survive, which are rejected and why, each anchor's speaker,
date and session) are written out by hand below; the log records are read through gen.products.log.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import date, datetime, timedelta
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import itertools

from gen.errors import GenError, Stopped
from gen.llm.config import RunSettings
from gen.products import lexical
from gen.products.chat_log.log import records as log_records
from gen.products.registry import REGISTRY, bind, load
from gen.products.schema import field_names
from gen.products.time_content import steps as tcq_steps
from gen.products.time_content import time_content_questions as tcq
from gen.products.time_content.answer_rules import AnswerLimits, answer_problems, clean_answer
from gen.products.time_content.question_rules import (
    Facts,
    clean,
    copied_run,
    mentions_date,
    mentions_session,
    overlap,
    problems,
)
from gen.templating import Templates
from tests.conftest import write_recipe
from tests.fakes.openai_server import FakeOpenAI, Reply, passage_answer, tcq_question
from tests.harness import Harness

SAMPLE = ROOT / "gen" / "data" / "sample_locomo.json"
SEED_BASE = 100  # the endpoint's seed: the engine sends seed + sample, so the script can tell the attempts apart


# --- fixtures -------------------------------------------------------------------------------------------


def make_recipe(tmp_path, base_url="http://127.0.0.1:9/v1", **options):
    product = {"type": "time_content_questions", "per_conversation": 6, "anchor_size": {1: 2, 2: 1}, **options}
    data = {
        "name": "tcq-test",
        "seed": 13,
        "sources": [{"format": "locomo", "path": str(SAMPLE), "ids": ["sample-1"]}],
        "timeline": {"padding": {"mode": "donor", "after_minutes": 60, "target_words": 300}},
        "llm": {
            "main": {
                "model": "fake-model",
                "base_url": base_url,
                "api_key_env": None,
                "seed": SEED_BASE,
                "temperature": 0.7,
                "max_retries": 1,
                "timeout_s": 10,
                "structured_output": "json_schema",
                "max_reject_rate": 0.5,  # the scripts below reject 2 of 6 items; the limit has tests of its own
            }
        },
        "products": [product],
    }
    return load(write_recipe(tmp_path / "recipe.yaml", data))[0]


def context(recipe, tmp_path) -> Harness:
    from gen.llm.engine import Engine

    return Harness.from_recipe(
        recipe, engine=Engine(recipe.llm, RunSettings(cache_dir=tmp_path / "cache", progress="off"))
    )


def options_of(recipe):
    return next(b.product.options for b in bind(recipe) if b.name == "time_content_questions")


def plan_items(ctx: Harness, options):
    return tcq_steps.plan_items(ctx.units, ctx.ctx, options)


def turn_text(dia_id: str) -> str:
    """A turn of sample-1 read straight from the source file."""
    sample = next(s for s in json.loads(SAMPLE.read_text()) if s["sample_id"] == "sample-1")
    session = sample["conversation"][f"session_{dia_id[1:].split(':')[0]}"]
    turn = next(t for t in session if t["dia_id"] == dia_id)
    return f"{turn['speaker']}: {turn['text']}"


# The six anchors picked for sample-1 with seed 13, per_conversation 6, anchor sizes {1: 2, 2: 1}: one per
# session, the speakers alternating. Dates and sessions worked out by hand from the source: session 5 starts
# at 11:56 pm on 12 April, and D5:19 comes 579 words (266 s) later, after midnight, so it is on 13 April.
ANCHORS = {
    "locomo/sample-1/tcq-001": {
        "dia": ["D1:13"],
        "speaker": "Maya",
        "kind": "session",
        "session": 1,
        "date": "2024-03-22",
    },
    "locomo/sample-1/tcq-002": {
        "dia": ["D2:6", "D2:7"],
        "speaker": "Tomas",
        "kind": "session",
        "session": 2,
        "date": "2024-03-29",
    },
    "locomo/sample-1/tcq-003": {
        "dia": ["D3:17"],
        "speaker": "Maya",
        "kind": "session",
        "session": 3,
        "date": "2024-04-03",
    },
    "locomo/sample-1/tcq-004": {
        "dia": ["D4:1"],
        "speaker": "Tomas",
        "kind": "date",
        "session": 4,
        "date": "2024-04-04",
    },
    "locomo/sample-1/tcq-005": {
        "dia": ["D5:19"],
        "speaker": "Maya",
        "kind": "date",
        "session": 5,
        "date": "2024-04-13",
    },
    "locomo/sample-1/tcq-006": {
        "dia": ["D6:6"],
        "speaker": "Tomas",
        "kind": "date",
        "session": 6,
        "date": "2024-04-24",
    },
}

# What the "model" answers for each anchor (first dia id), one entry per sample index. {ref} is the time
# phrase the prompt asks for; the others are mistakes a real model makes.
GOOD = "good"
SCRIPT = {
    "D1:13": [
        ("not a question", "In their 1st session, Maya told Tomas about a job she had applied for."),
        (GOOD, "{Ref}, what did Maya say she had recently done about changing jobs?"),
    ],
    "D2:6": [(GOOD, "{Ref}, what did Tomas say about how his latest long training run went?")],
    "D3:17": [
        ("speaker not named", "{Ref}, which two places did Tomas say the couple were choosing between?"),
        ("speaker not named", "{Ref}, what options did Nadia have for her wedding venue?"),
        ("speaker not named", "Which wedding locations did Tomas describe {ref}?"),
    ],
    "D4:1": [
        ("date missing", "What did Tomas say about how the shelter's check of his home went?"),
        ("date missing", "On April 3rd, 2024, what did Tomas say about the shelter's visit to his home?"),
        (GOOD, "On April 4th, 2024, what did Tomas say about how the shelter's visit to his home went?"),
    ],
    "D5:19": [
        ("copies the anchor", "Did Maya say that Ines texted tonight that our mugs are out of the kiln {ref}?"),
        # the session began on 12 April, but this response was stamped after midnight
        ("date missing", "What pottery news did Maya share on April 12th, 2024?"),
        ("copies the anchor", "What did Maya mean {ref} when she said three of mine survived and one cracked?"),
    ],
    "D6:6": [(GOOD, "On 24 April 2024, what did Tomas say was the hardest part of his race?")],
}


# The gold answer the "model" writes beside each question, by hand from the anchor's words (turn_text above).
GOLD = {
    "D1:13": "She applied for a UX researcher job at Lumen Health and was asked to a first interview.",
    "D2:6": "He did 14 kilometers on Sunday; the last three were ugly, but he finished.",
    "D3:17": "A restored barn at Hollow Creek Farm or the boathouse at Alder Lake.",
    "D4:1": "The volunteer said his apartment was one of the tidiest she had seen.",
    "D5:19": "Three of her mugs survived the kiln and one cracked.",
    "D6:6": "Kilometers 17 to 19, a long hill by the harbor.",
}


class Script:
    """The fake model: finds the anchor in the prompt, answers by sample index, and logs what it saw.
    `gold` overrides an anchor's answer: one text for every call, a list (first reply, correction reply), or a dict
    by sample index."""

    def __init__(self, answers=SCRIPT, verdicts=None, broken=(), gold=None, answer_verdicts=None):
        self.answers, self.verdicts, self.broken = answers, verdicts or {}, set(broken)
        self.gold = {**GOLD, **(gold or {})}
        self.answer_verdicts = answer_verdicts or {}  # (dia, answer) -> (supported, reason)
        self.seen: list[tuple[str, str, int]] = []  # (step, first dia id, sample)
        self.produced: dict[tuple[str, int], str] = {}  # (first dia id, sample) -> the question sent back
        self.corrections: list[tuple[str, str]] = []  # (first dia id, what the correction round told the model)

    def answer(self, dia: str, correction: bool, sample: int) -> str:
        given = self.gold[dia]
        if isinstance(given, dict):  # by sample index
            return given[sample]
        return given if isinstance(given, str) else given[min(int(correction), len(given) - 1)]

    def first_dia(self, prompt: str) -> str:
        passage = prompt.split("\n\n")[1]
        for dia in self.answers:
            if passage.startswith(turn_text(dia)):
                return dia
        raise AssertionError(f"no scripted anchor in the passage: {passage[:120]!r}")

    def __call__(self, request):
        prompt = request.last_user if not request.is_correction else request.messages[1]["content"]
        dia = self.first_dia(prompt)
        sample = request.body["seed"] - SEED_BASE
        if request.system.startswith("You review"):  # verification calls are all sample 0: name the question's
            question = re.search(r"^Question: (.*)$", prompt, re.M).group(1)
            asked = next(k for (d, k), q in self.produced.items() if d == dia and q == question)
            self.seen.append(("verify", dia, asked))
            answered, reason = self.verdicts.get((dia, question), (True, "The passage answers it."))
            answer = re.search(r"^Proposed answer: (.*)$", prompt, re.M).group(1)
            supported, why = self.answer_verdicts.get((dia, answer), (True, ""))
            return {"answered": answered, "answer_supported": supported, "reason": why or reason}
        self.seen.append(("question", dia, sample))
        if request.is_correction:
            self.corrections.append((dia, request.last_user))
        if dia in self.broken:
            return Reply.malformed("Sure! Here is a question about Tomas's race")
        ref = re.search(r'with this phrase: "([^"]+)"', prompt).group(1)
        _, text = self.answers[dia][sample]
        question = text.format(ref=ref, Ref=ref[0].upper() + ref[1:])
        self.produced[(dia, sample)] = question
        return {"question": question, "answer": self.answer(dia, request.is_correction, sample)}


def expected_outcome(answers=SCRIPT, retries=2):
    """dia -> ("ok", sample) or ("reject", reason code, attempts), from the script table alone."""
    out = {}
    for dia, replies in answers.items():
        tried = replies[: retries + 1]
        good = [i for i, (kind, _) in enumerate(tried) if kind == GOOD]
        out[dia] = ("ok", good[0]) if good else ("reject", tried[-1][0], len(tried))
    return out


def run_build(recipe, tmp_path, script):
    ctx = context(recipe, tmp_path)
    try:
        rows = ctx.build("time_content_questions", options_of(recipe))
        engine_rejects = list(ctx.ctx.llm().rejects)
    finally:
        ctx.ctx.llm().close()
    return ctx, rows, engine_rejects


# --- anchors --------------------------------------------------------------------------------------------


def test_anchor_selection_on_sample_1(tmp_path):
    recipe = make_recipe(tmp_path)
    ctx = context(recipe, tmp_path)
    items = plan_items(ctx, options_of(recipe))
    got = {
        i.question_id: {
            "dia": [r.source_turn_id for r in i.anchor.responses],
            "speaker": i.anchor.speaker,
            "kind": i.slot.kind,
            "session": i.anchor.session_index,
            "date": i.anchor.date.isoformat(),
        }
        for i in items
    }
    assert got == ANCHORS


def test_anchor_rules_on_both_samples(tmp_path):
    """Deterministic by seed; spread over sessions and speakers; sizes and kinds apportioned exactly; no
    padding; every response long enough; multi-response anchors in one session on one date sharing a stem."""
    data = {
        "name": "a",
        "seed": 5,
        "sources": [{"format": "locomo", "path": str(SAMPLE)}],
        "timeline": {"padding": {"mode": "donor", "target_words": 800}},
        "llm": {"main": {"model": "m"}},
        "products": [
            {
                "type": "time_content_questions",
                "per_conversation": 12,
                "reference_mix": 0.25,
                "anchor_size": {1: 0.5, 2: 0.25, 3: 0.25},
                "min_anchor_words": 10,
            }
        ],
    }
    recipe = load(write_recipe(tmp_path / "r.yaml", data))[0]
    ctx = Harness.from_recipe(recipe)
    options = options_of(recipe)
    first = plan_items(ctx, options)
    again = plan_items(ctx, options)
    assert [(i.question_id, i.anchor.indices, i.slot.kind, i.reference) for i in first] == [
        (i.question_id, i.anchor.indices, i.slot.kind, i.reference) for i in again
    ]
    recipe2 = load(write_recipe(tmp_path / "r2.yaml", {**data, "seed": 6}))[0]
    other = plan_items(Harness.from_recipe(recipe2), options_of(recipe2))
    assert [i.anchor.indices for i in other] != [i.anchor.indices for i in first]

    for timeline in ctx.timelines:
        items = [i for i in first if i.timeline is timeline]
        assert len(items) == 12
        real_sessions = {r.session_index for r in timeline.responses if not r.is_padding}
        assert {i.anchor.session_index for i in items} == real_sessions
        assert {i.anchor.speaker for i in items} == set(timeline.conversation.speakers)
        kinds = [i.slot.kind for i in items]
        assert kinds.count("date") == 3 and kinds.count("session") == 9
        sizes = sorted(i.anchor.size for i in items)
        assert sizes.count(1) >= 6 and sizes.count(1) + sizes.count(2) + sizes.count(3) == 12
        used = [index for i in items for index in i.anchor.indices]
        assert len(used) == len(set(used))
        for item in items:
            responses = item.anchor.responses
            assert not any(r.is_padding for r in responses)
            assert all(len(r.text.split()) >= 10 for r in responses)
            assert len({r.session_index for r in responses}) == 1
            assert len({r.timestamp.date() for r in responses}) == 1
            assert [r.response_index for r in responses] == list(
                range(responses[0].response_index, responses[-1].response_index + 1)
            )
            drop = lexical.name_words(timeline.conversation.speakers)
            stems = [lexical.content_stems(r.text, drop) for r in responses]
            assert all(a & b for a, b in itertools.pairwise(stems)), item.anchor.text


def test_options_validation(tmp_path):
    with pytest.raises(GenError, match="anchor sizes are 1, 2 or 3"):
        make_recipe(tmp_path, anchor_size={4: 1})
    assert options_of(make_recipe(tmp_path, anchor_size=2)).anchor_size == {2: 1.0}
    assert options_of(make_recipe(tmp_path)).anchor_size == {1: 2.0, 2: 1.0}
    with pytest.raises(GenError):
        make_recipe(tmp_path, reference_mix=1.5)
    with pytest.raises(GenError, match="unknown LLM endpoint 'mian'"):
        make_recipe(tmp_path, endpoint="mian")


def test_registered():
    assert REGISTRY["time_content_questions"] is tcq.TimeContentQuestions


# --- question checks ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, yearless_ok, expected",
    [
        ("What did Jolene say on January 27th, 2023?", False, True),
        ("What did Jolene say on 27 January 2023?", False, True),
        ("What did Jolene say on January 27, 2023?", False, True),
        ("What did Jolene say on 2023-01-27?", False, True),
        ("What did Jolene say on the 27th of January, 2023?", False, True),
        ("What did Jolene say on Friday, Jan. 27th, 2023?", False, True),
        ("What did Jolene say on the twenty-seventh of January 2023?", False, True),
        ("What did Jolene say on January 27th?", False, False),  # the year is needed here
        ("What did Jolene say on January 27th?", True, True),
        ("What did Jolene say on January 27th, 2022?", True, False),  # a wrong year is not a missing one
        ("What did Jolene say on January 17th, 2023?", True, False),
        ("What did Jolene say on January 2, 2023?", True, False),
        ("What did Jolene say on 2023-01-28?", True, False),
    ],
)
def test_date_renderings(text, yearless_ok, expected):
    assert mentions_date(text, date(2023, 1, 27), yearless_ok) is expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("What did Tomas say in session 3?", True),
        ("What did Tomas say in session three?", True),
        ("What did Tomas say in the third session?", True),
        ("What did Tomas say in their 3rd session?", True),
        ("What did Tomas say during session number 3?", True),
        ("What did Tomas say in session #3?", True),
        ("What did Tomas say in their third conversation?", True),
        ("What did Tomas say in session 13?", False),
        ("What did Tomas say in the thirty-third session?", False),
        ("What did Tomas say in session 2 about 3 dogs?", False),
    ],
)
def test_session_renderings(text, expected):
    assert mentions_session(text, 3) is expected


def facts(
    kind="date",
    anchor="Tomas: I saw a physio yesterday. She thinks it's early shin splints, from adding "
    "distance too fast and running in worn-out shoes.",
):
    return Facts(
        speaker="Tomas",
        speakers=("Maya", "Tomas"),
        kind=kind,
        day=date(2024, 4, 3),
        session_index=3,
        yearless_ok=True,
        anchor_text=anchor,
    )


def codes(question, **kw):
    return [p.code for p in problems(clean(question), facts(**kw), max_overlap=0.5, max_copied_words=5)]


def test_question_checks():
    good = "What did Tomas say a professional told him about his leg on April 3rd, 2024?"
    assert codes(good) == []
    assert codes(f'"{good}"') == []  # quotes around the reply are dropped
    assert codes(good.replace("Tomas", "Maya")) == ["speaker not named"]
    assert codes("What did Tomas say a professional told him about his leg?") == ["date missing"]
    assert codes("In session 3, what did Tomas say a professional told him about his leg?", kind="session") == []
    assert codes("In session 4, what did Tomas say a professional told him about his leg?", kind="session") == [
        "session missing"
    ]
    assert codes("Tomas described what a professional told him about his leg on April 3rd, 2024.") == ["not a question"]
    assert codes("What did Tomas say on April 3rd, 2024? And why?") == ["not a question"]
    copy = "Did Tomas say it's early shin splints, from adding distance too fast on April 3rd, 2024?"
    assert codes(copy) == ["copies the anchor", "overlap too high"]
    # every content word of the anchor, none in a run of more than five: too close to a keyword match
    dense = (
        "On April 3rd, 2024, what did Tomas's physio think of the early splints in his shin, given the "
        "distance added fast and running shoes worn out?"
    )
    assert copied_run(dense, facts().anchor_text) <= 5
    assert overlap(dense, facts()) >= 0.5
    assert codes(dense) == ["overlap too high"]


def test_overlap_ignores_names_and_time_words():
    f = facts(anchor="Tomas: Maya, on April 3rd we talked about the lighthouse.")
    assert overlap("What did Tomas tell Maya on April 3rd, 2024?", f) == 0.0
    assert overlap("What did Tomas say about the lighthouse on April 3rd, 2024?", f) == 1.0


# --- the answer rule ---------------------------------------------------------------------------------------

HOME_VISIT = "Tomas: " + turn_text("D4:1").split(": ", 1)[1]
HOME_QUESTION = "On April 4th, 2024, what did Tomas say about how the shelter's visit to his home went?"


def answer_codes(answer, limits=AnswerLimits(20, 0.5)):
    f = Facts("Tomas", ("Maya", "Tomas"), "date", date(2024, 4, 4), 4, True, HOME_VISIT)
    return [str(p) for p in answer_problems(clean_answer(answer), HOME_QUESTION, f, limits)]


def test_answer_rule():
    # content words (stop words, names, time words and numbers left out) against D4:1's, counted by hand:
    # volunteer, apartment, tidiest, seen: all four in the anchor
    assert answer_codes("The volunteer said his apartment was one of the tidiest she had seen.") == []
    assert answer_codes('  "The volunteer said his apartment was one of the tidiest she had seen."  ') == []
    # volunteer, praised, tidy, apartment: 2 of 4 in the anchor, 50%, just enough
    assert answer_codes("The volunteer praised how tidy his apartment was.") == []
    # volunteer, praised, tidy, clean, apartment: 2 of 5, 40%
    assert answer_codes("The volunteer praised how tidy and clean his apartment looked.") == [
        'answer not from the anchor: "praised", "tidy", "clean" are not in the passage '
        "(40% of its content words are; at least 50% must be)"
    ]
    # made up (another conversation's words): nothing from the anchor, so nothing the question lacks either
    assert answer_codes("He adopted a greyhound called Biscuit.") == [
        "answer repeats the question: it adds nothing from the passage the question lacks",
        'answer not from the anchor: "adopted", "greyhound", "called", "biscuit" are not in the passage '
        "(0% of its content words are; at least 50% must be)",
    ]
    # home and visit are in the anchor, but the question holds both
    assert answer_codes("The home visit.") == [
        "answer repeats the question: it adds nothing from the passage the question lacks"
    ]
    # the speaker's name, the month (a time word) and numbers are no content
    assert answer_codes("On April 4th, 2024, Tomas.") == [
        "answer says nothing: it names only the speakers or the time, not what was said"
    ]
    assert answer_codes("  ") == ["answer empty: the reply holds no answer"]
    long = "The volunteer said his apartment was one of the tidiest she had seen, which he called a lie but took it."
    assert answer_codes(long) == ["answer too long: 21 words; an answer has at most 20"]
    assert answer_codes(long, AnswerLimits(21, 0.5)) == []
    # the share is a recipe option: 2 of 4 fails a stricter one
    assert answer_codes("The volunteer praised how tidy his apartment was.", AnswerLimits(20, 0.6))[0].startswith(
        "answer not from the anchor"
    )


# --- generation through the engine and the fake server ---------------------------------------------------


def test_generation_keeps_good_questions_regenerates_bad_ones_and_rejects_the_rest(tmp_path):
    script = Script()
    with FakeOpenAI(script) as server:
        recipe = make_recipe(tmp_path, base_url=server.base_url)
        ctx, rows, engine_rejects = run_build(recipe, tmp_path, script)
        requests = server.count
    expected = expected_outcome()
    by_dia = {a["dia"][0]: qid for qid, a in ANCHORS.items()}

    # exactly the good questions, each at the sample where the script first answered well
    kept = {dia: ("ok", row["sample"]) for row in rows for dia in [ANCHORS[row["question_id"]]["dia"][0]]}
    assert kept == {dia: v for dia, v in expected.items() if v[0] == "ok"}
    assert kept == {"D1:13": ("ok", 1), "D2:6": ("ok", 0), "D4:1": ("ok", 2), "D6:6": ("ok", 0)}
    for row in rows:
        assert row["question"] == script.produced[(ANCHORS[row["question_id"]]["dia"][0], row["sample"])]
        assert row["answer"] == GOLD[ANCHORS[row["question_id"]]["dia"][0]]
    assert script.corrections == []  # every answer kept the rule at once

    # bad ones were asked again with the next sample index, and only as often as the retry budget allows
    calls = {}
    for _step, dia, sample in script.seen:
        calls.setdefault(dia, []).append(sample)
    assert calls == {
        "D1:13": [0, 1],
        "D2:6": [0],
        "D3:17": [0, 1, 2],
        "D4:1": [0, 1, 2],
        "D5:19": [0, 1, 2],
        "D6:6": [0],
    }
    assert requests == 13

    # the rest are rejects with their reason
    rejects = {r["item_id"]: r for r in ctx.rejects}
    assert set(rejects) == {by_dia["D3:17"], by_dia["D5:19"]}
    for dia in ("D3:17", "D5:19"):
        reject = rejects[by_dia[dia]]
        _, code, attempts = expected[dia]
        assert reject["product"] == "time_content_questions"
        assert reject["reason"].startswith(f"{code}: ") and reject["reason"].endswith(f"(after {attempts} attempts)")
        assert [a["sample"] for a in reject["attempts"]] == list(range(attempts))
        assert [a["problems"][0].split(":")[0] for a in reject["attempts"]] == [k for k, _ in SCRIPT[dia]]
        assert json.loads(reject["raw_text"])["question"] == reject["attempts"][-1]["question"]
        assert reject["relevant_response_indices"] == log_indices(ctx, ANCHORS[by_dia[dia]]["dia"])
    assert "it names Tomas instead" in rejects[by_dia["D3:17"]]["reason"]
    assert engine_rejects == []

    # ground truth: the anchor, checked against the log records
    for row in rows:
        anchor = ANCHORS[row["question_id"]]
        assert row["relevant_response_indices"] == log_indices(ctx, anchor["dia"])
        log = log_rows(ctx, anchor["dia"])
        main = [r for r in log if r["speaker"] == anchor["speaker"]]
        assert main and row["speaker"] == anchor["speaker"]
        assert row["date"] == anchor["date"] == log[0]["date"]
        assert row["session_index"] == anchor["session"] == log[0]["session_index"]
        assert row["reference_kind"] == anchor["kind"]
        assert row["anchor_text"] == "\n".join(turn_text(d) for d in anchor["dia"])
        assert row["model"] == "fake-model"
        assert re.fullmatch(r"[0-9a-f]{12}", row["prompt_id"])
        assert list(row) == field_names(tcq.features())
        # the clock fields every question config carries, from the log: last response + 50 minutes (the default
        # now_offset_minutes), and the sessions (padding included) + 1
        log = [r for t in ctx.timelines for r in log_records(t) if r["conversation_id"] == row["conversation_id"]]
        last = max(datetime.fromisoformat(r["timestamp"]) for r in log)
        assert row["now"] == (last + timedelta(minutes=50)).isoformat()
        assert row["current_session"] == len({r["session_index"] for r in log}) + 1
        assert row["num_relevant"] == len(row["relevant_response_indices"])

    checks = ctx.validate("time_content_questions", rows, options_of(recipe))
    assert checks.passed, checks.report()
    assert ctx.summary("time_content_questions", rows) == {
        "questions": 4,
        "conversations": 1,
        "by_reference_kind": {
            "date": {"questions": 2, "first_try": 1, "regenerated": 1},
            "session": {"questions": 2, "first_try": 1, "regenerated": 1},
        },
        "by_anchor_size": {"1 response": 3, "2 responses": 1},
    }


def log_rows(ctx, dias):
    records = [r for t in ctx.timelines for r in log_records(t)]
    return [next(r for r in records if r["source_turn_id"] == d and not r["is_padding"]) for d in dias]


def log_indices(ctx, dias):
    return [r["response_index"] for r in log_rows(ctx, dias)]


def test_verifier_no_regenerates_and_engine_failures_stay_with_the_engine(tmp_path):
    # D2:6's first question passes the checks, but the verifier says the passage does not answer it: it is
    # written again (sample 1) and verified again. D6:6's replies are never JSON: after the engine's correction
    # round the engine rejects it; the product neither retries nor records it a second time.
    # D5:19 gets a good third answer here: by the log it was said on 13 April (after midnight).
    answers = {
        **SCRIPT,
        "D2:6": [SCRIPT["D2:6"][0], (GOOD, "{Ref}, how did Tomas say his most recent long run had gone?")],
        "D5:19": [
            *SCRIPT["D5:19"][:2],
            (GOOD, "How did Maya say her latest pottery pieces turned out on April 13th, 2024?"),
        ],
    }
    first = answers["D2:6"][0][1].format(ref="in the second session", Ref="In the second session")
    verdicts = {("D2:6", first): (False, "The passage gives a distance and pace, not how training is going overall.")}
    script = Script(answers, verdicts=verdicts, broken={"D6:6"})
    with FakeOpenAI(script) as server:
        recipe = make_recipe(tmp_path, base_url=server.base_url, verify=True)
        ctx, rows, engine_rejects = run_build(recipe, tmp_path, script)

    assert {ANCHORS[r["question_id"]]["dia"][0]: r["sample"] for r in rows} == {
        "D1:13": 1,
        "D2:6": 1,
        "D4:1": 2,
        "D5:19": 2,
    }
    verified = [(dia, sample) for step, dia, sample in script.seen if step == "verify"]
    # only questions that passed the checks are verified, once each (requests arrive in any order)
    assert sorted(verified) == [("D1:13", 1), ("D2:6", 0), ("D2:6", 1), ("D4:1", 2), ("D5:19", 2)]
    late = next(r for r in rows if r["question_id"] == "locomo/sample-1/tcq-005")
    assert late["date"] == "2024-04-13" == log_rows(ctx, ["D5:19"])[0]["date"]
    assert late["session_index"] == 5 == log_rows(ctx, ["D5:19"])[0]["session_index"]
    questions = [(dia, sample) for step, dia, sample in script.seen if step == "question"]
    assert questions.count(("D6:6", 0)) == 2  # the first call and the engine's one correction round
    assert ("D6:6", 1) not in questions

    assert [(r["step"], r["item_id"]) for r in engine_rejects] == [
        ("time_content_questions", "locomo/sample-1/tcq-006")
    ]
    product_rejects = {r["item_id"] for r in ctx.rejects}
    assert product_rejects == {"locomo/sample-1/tcq-003"}
    assert ctx.validate("time_content_questions", rows, options_of(recipe)).passed


MADE_UP = "He signed up for a marathon in Lisbon next spring."  # nothing of D2:6-7 in it
FROM_D5_19 = "Ines texted that their mugs were out of the kiln."  # Maya's words in another session


def test_answers_that_break_the_rule_go_to_the_correction_round_then_are_kept_or_rejected(tmp_path):
    # D2:6 answers something made up, twice; D4:1 answers "" (the schema refuses it), then blank (the rule does);
    # D6:6 first answers with another response's words, then, corrected, with its anchor's
    gold = {"D2:6": MADE_UP, "D4:1": ["", "   "], "D6:6": [FROM_D5_19, GOLD["D6:6"]]}
    script = Script(gold=gold)
    with FakeOpenAI(script) as server:
        recipe = make_recipe(tmp_path, base_url=server.base_url, max_reject_rate=1.0)
        ctx, rows, engine_rejects = run_build(recipe, tmp_path, script)
        requests = server.count

    kept = {ANCHORS[r["question_id"]]["dia"][0]: (r["sample"], r["answer"]) for r in rows}
    assert kept == {"D1:13": (1, GOLD["D1:13"]), "D6:6": (0, GOLD["D6:6"])}
    # the server saw one correction call for each of the three, naming what was wrong
    told = dict(script.corrections)
    assert sorted(told) == ["D2:6", "D4:1", "D6:6"]
    assert '"signed", "marathon", "lisbon", "spring" are not in the passage' in told["D2:6"]
    assert '"ines", "texted", "mugs", "kiln" are not in the passage' in told["D6:6"]
    assert "answer" in told["D4:1"] and "at least 1 character" in told["D4:1"]
    # D1:13 twice (sample 0 fails a question check), D3:17 and D5:19 three times, the others once and corrected
    assert requests == 2 + 2 + 3 + 2 + 3 + 2
    # a reply still breaking the rule after its correction round is the engine's reject; the item is not
    # written again with the next sample (as any reply that fails to parse)
    failed = {r["item_id"]: r for r in engine_rejects}
    by_dia = {a["dia"][0]: qid for qid, a in ANCHORS.items()}
    assert sorted(failed) == [by_dia["D2:6"], by_dia["D4:1"]]
    assert "answer not from the anchor" in failed[by_dia["D2:6"]]["reason"]
    assert "after one correction round" in failed[by_dia["D2:6"]]["reason"]
    assert "answer empty" in failed[by_dia["D4:1"]]["reason"]
    assert ("question", "D2:6", 1) not in script.seen and ("question", "D4:1", 1) not in script.seen
    assert {r["item_id"] for r in ctx.rejects} == {by_dia["D3:17"], by_dia["D5:19"]}
    assert ctx.validate("time_content_questions", rows, options_of(recipe)).passed


def test_verifier_judges_the_answer_too(tmp_path):
    # the verifier finds D6:6's first answer unsupported: question and answer are written again (sample 1)
    later = "On 24 April 2024, which stretch of his race did Tomas say was the hardest?"
    answers = {**SCRIPT, "D6:6": [SCRIPT["D6:6"][0], (GOOD, later)]}
    better = "The long hill by the harbor, kilometers 17 to 19."
    doubted = {("D6:6", GOLD["D6:6"]): (False, "The hill is what made it hard, not the distance.")}
    script = Script(answers, gold={"D6:6": {0: GOLD["D6:6"], 1: better}}, answer_verdicts=doubted)
    with FakeOpenAI(script) as server:
        recipe = make_recipe(tmp_path, base_url=server.base_url, verify=True)
        ctx, rows, _ = run_build(recipe, tmp_path, script)
    row = next(r for r in rows if r["question_id"] == "locomo/sample-1/tcq-006")
    assert (row["sample"], row["question"], row["answer"]) == (1, later, better)
    assert sorted(k for step, dia, k in script.seen if step == "verify" and dia == "D6:6") == [0, 1]
    assert ctx.validate("time_content_questions", rows, options_of(recipe)).passed


def test_rerun_with_warm_cache_makes_no_request_and_writes_the_same_rows(tmp_path):
    script = Script()
    with FakeOpenAI(script) as server:
        recipe = make_recipe(tmp_path, base_url=server.base_url)
        _, first, _ = run_build(recipe, tmp_path, script)
        before = server.count
        ctx, second, _ = run_build(recipe, tmp_path, script)
        assert server.count == before
    assert second == first
    assert len(ctx.rejects) == 2


def test_validator_catches_wrong_records(tmp_path):
    script = Script()
    with FakeOpenAI(script) as server:
        recipe = make_recipe(tmp_path, base_url=server.base_url)
        ctx, rows, _ = run_build(recipe, tmp_path, script)
    options = options_of(recipe)
    assert ctx.validate("time_content_questions", rows, options).passed

    def failing(change):
        broken = [dict(row) for row in rows]
        change(broken[0])
        report = ctx.validate("time_content_questions", broken, options).report()
        return sorted(name for name, result in report.items() if result["failed"])

    def shift(row):
        row["relevant_response_indices"] = [i + 1 for i in row["relevant_response_indices"]]

    assert "anchor_text is the log's text" in failing(shift)
    assert failing(lambda row: row.update(speaker="Tomas")) == [
        "question check: speaker not named",
        "speaker is the anchor's main speaker in the log",
    ]
    assert failing(lambda row: row.update(date="2024-03-23")) == ["date matches the log"]
    assert failing(lambda row: row.update(session_index=2)) == ["session_index matches the log"]
    assert failing(lambda row: row.update(question=row["question"].replace("Maya", "Tomas"))) == [
        "question check: speaker not named"
    ]
    assert failing(lambda row: row.update(question=row["question"].replace("1st", "2nd"))) == [
        "question check: session missing"
    ]
    assert failing(lambda row: row.update(relevant_response_indices=[5, 7], num_relevant=2)) == [
        "relevant indices are 1-3 consecutive responses of the log"
    ]
    assert failing(lambda row: row.update(num_relevant=row["num_relevant"] + 1)) == [
        "num_relevant is the number of relevant responses"
    ]
    assert failing(lambda row: row.update(now="2000-01-01T00:00:00")) == ["now and current_session agree with the log"]
    assert failing(lambda row: row.update(current_session=row["current_session"] - 1)) == [
        "now and current_session agree with the log"
    ]
    assert failing(lambda row: row.update(prompt_id="000000000000")) == ["prompt_id is the template's"]
    # answers edited by hand (the first row is D1:13's, Maya applying for a job at Lumen Health)
    assert failing(lambda row: row.update(answer=FROM_D5_19)) == [
        "answer check: answer not from the anchor",
        "answer check: answer repeats the question",
    ]
    # lumen, health in the anchor; kiln, mug, ines not: 2 of 5
    assert failing(lambda row: row.update(answer="Lumen Health, and Ines's mugs from the kiln")) == [
        "answer check: answer not from the anchor"
    ]
    assert failing(lambda row: row.update(answer="")) == ["answer check: answer empty"]
    assert failing(lambda row: row.update(answer="In session 1, Maya.")) == ["answer check: answer says nothing"]
    assert failing(lambda row: row.update(answer=" ".join(["Lumen"] * 21))) == ["answer check: answer too long"]
    assert failing(lambda row: row.update(answer=" Lumen Health")) == ["answer is a text on one line"]
    assert failing(lambda row: row.update(answer=None)) == ["answer is a text on one line"]
    # a wrong year is a missing date
    date_row = next(r for r in rows if r["reference_kind"] == "date")
    assert (
        ctx.validate(
            "time_content_questions", [{**date_row, "question": date_row["question"].replace("2024", "2023")}], options
        ).report()["question check: date missing"]["failed"]
        == 1
    )


def test_tasks_for_plan_and_preview(tmp_path):
    recipe = make_recipe(tmp_path)
    ctx = context(recipe, tmp_path)
    product = ctx.product("time_content_questions", options_of(recipe))
    [(step, tasks, most_calls)] = product.llm_tasks(ctx.units, ctx.ctx)
    # six items × (first try + two regenerations) × (the call + its correction round)
    assert step == "time_content_questions" and most_calls == 6 * 3 * 2
    assert [t.item_id for t in tasks] == list(ANCHORS)
    assert all(t.sample == 0 and t.endpoint == "main" and t.parser.model is tcq_steps.Question for t in tasks)
    system, user = tasks[4].messages
    assert system["role"] == "system" and user["role"] == "user"
    assert "Reply with a JSON object" in system["content"]
    # the passage, its session and date (13 April: after midnight), the context, the time phrase to use
    assert user["content"].split("\n\n")[1] == turn_text("D5:19")
    assert "session 5, on Saturday, 13 April 2024" in user["content"]
    assert turn_text("D5:18") in user["content"] and turn_text("D5:20") in user["content"]
    assert turn_text("D5:16") not in user["content"]  # two lines of context on each side
    phrase = re.search(r'with this phrase: "([^"]+)"', user["content"]).group(1)
    assert mentions_date(phrase, date(2024, 4, 13), False)
    assert "names Maya" in user["content"]
    assert '{"question": "...", "answer": "..."}' in system["content"] and "at most 20 words" in user["content"]


def test_reference_phrases_are_all_accepted_by_the_checks():
    for day, session in ((date(2024, 4, 13), 5), (date(2023, 1, 1), 21)):
        for phrase in tcq_steps.reference_phrases("date", day, session, Templates()):
            assert mentions_date(phrase, day, False), phrase
        for phrase in tcq_steps.reference_phrases("session", day, session, Templates()):
            assert mentions_session(phrase, session), phrase


@pytest.mark.integration
def test_locomo10_end_to_end_with_plain_questions(tmp_path):
    """All ten LoCoMo conversations: 20 anchors each, half by date; a model that always answers "What did
    <speaker> talk about <time phrase>?" gets every question accepted on the first try, and the validator agrees."""
    from tests.conftest import require_shared

    path = require_shared("locomo/locomo10.json")

    with FakeOpenAI(tcq_question) as server:
        data = {
            "name": "l",
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(path)}],
            "llm": {
                "main": {
                    "model": "fake-model",
                    "base_url": server.base_url,
                    "api_key_env": None,
                    "structured_output": "json_schema",
                }
            },
            "products": [{"type": "time_content_questions"}],
        }
        recipe = load(write_recipe(tmp_path / "r.yaml", data))[0]
        ctx, rows, engine_rejects = run_build(recipe, tmp_path, tcq_question)
        assert server.count == 200
    assert len(rows) == 200 and ctx.rejects == [] and engine_rejects == []
    assert sum(r["reference_kind"] == "date" for r in rows) == 100
    assert all(r["sample"] == 0 for r in rows)
    checks = ctx.validate("time_content_questions", rows, options_of(recipe))
    assert checks.passed, checks.report()


# --- max_reject_rate and what a stop keeps ----------------------------------------------------------------
def nameless(request):
    """A model that never names anyone: every question fails the speaker check (its answers pass)."""
    return {"question": NAMELESS, "answer": passage_answer(request.last_user)}


NAMELESS = "What was talked about back then, in their own words?"


def build_with(tmp_path, script, endpoint=None, **options):
    with FakeOpenAI(script) as server:
        recipe = make_recipe(tmp_path, server.base_url, **options)
        for name, value in (endpoint or {}).items():
            setattr(recipe.llm["main"], name, value)
        return run_build(recipe, tmp_path, script)


def test_the_endpoints_max_reject_rate_stops_the_step_with_every_rejected_item(tmp_path):
    # 6 items; 0.2 allows floor(1.2) = 1 reject; all 6 fail, each after 3 attempts (18 calls, which are not items)
    with pytest.raises(Stopped) as info:
        build_with(tmp_path, nameless, endpoint={"max_reject_rate": 0.2})
    stop = info.value
    assert "6 of 6 items rejected, more than max_reject_rate 20%" in str(stop)
    assert (
        "a higher max_reject_rate (in the time_content_questions product entry, or for every step on llm "
        "endpoint 'main')" in str(stop)
    )
    assert [r["item_id"] for r in stop.rejects] == [f"locomo/sample-1/tcq-{n:03d}" for n in range(1, 7)]
    first = stop.rejects[0]
    assert first["product"] == "time_content_questions" and first["reason"].startswith("speaker not named")
    assert first["reason"].endswith("(after 3 attempts)") and len(first["attempts"]) == 3
    assert json.loads(first["raw_text"])["question"] == NAMELESS
    assert {"conversation_id", "reference_kind", "speaker", "relevant_response_indices"} <= set(first)


def test_the_products_max_reject_rate_wins_over_the_endpoints(tmp_path):
    ctx, rows, _ = build_with(tmp_path / "a", nameless, max_reject_rate=1.0)
    assert rows == [] and len(ctx.rejects) == 6
    ctx, rows, _ = build_with(tmp_path / "b", nameless, endpoint={"max_reject_rate": 1.0})  # 6 of 6 allowed
    assert len(ctx.rejects) == 6
    with pytest.raises(Stopped) as info:  # floor(0.1 x 6) = 0
        build_with(tmp_path / "c", nameless, endpoint={"max_reject_rate": 1.0}, max_reject_rate=0.1)
    assert "max_reject_rate 10%" in str(info.value)
    assert "a higher max_reject_rate in the time_content_questions product entry" in str(info.value)


def test_a_stop_between_rounds_keeps_the_items_waiting_for_their_next_round(tmp_path):
    def script(request):  # round 0 (seed + 0) writes nameless questions; the regeneration rounds meet 429s
        return nameless(request) if request.body["seed"] == SEED_BASE else Reply.rate_limited(0.01)

    with pytest.raises(Stopped) as info:  # no reject limit and retries enough: the breaker decides
        build_with(tmp_path, script, endpoint={"max_retries": 10, "max_reject_rate": None})
    stop = info.value
    assert "keeps answering 429" in str(stop)
    assert len(stop.rejects) == 6
    assert all(r["reason"].endswith("(after 1 attempt; the run stopped before the next)") for r in stop.rejects)
    assert all(len(r["attempts"]) == 1 and r["raw_text"] for r in stop.rejects)
