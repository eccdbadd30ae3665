"""quality_labels' rules beyond the arithmetic of test_quality_labels: padding turns marked and left out of the
dialogue's means (unless include_padding), a negative word that answers the reply's yes/no question is not
feedback (by hand, and counted on LoCoMo), and persona_cosine, the reply's best cosine to its speaker's persona
facts. Runs use the stand-in encoder of test_quality_labels."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gen.products.quality import checking
from gen.products.quality.signals import FeedbackWords, words
from gen.templating import Templates
from tests.conftest import locomo_sample, read_jsonl, require_shared, write_json, write_recipe
from tests.test_load_types import offline  # noqa: F401  (the fixture)
from tests.test_quality_backends import DIALOG, PERSONAS, PREVIOUS, episode_recipe
from tests.test_quality_labels import SESSIONS, BagOfWords, bag_of_words  # noqa: F401  (the fixture)

# --- padding ---------------------------------------------------------------------------------------------

PADDING = [{"speaker": "Xi", "text": "I love pizza pizza"}, {"speaker": "Yu", "text": "Pizza is great great great"}]


def padded_run(tmp_path, **options):
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from gen.recipe import load_recipe

    source = write_json(tmp_path / "conv.json", [locomo_sample("s1", sessions=SESSIONS)])
    padding = write_json(tmp_path / "padding.json", PADDING)
    recipe = write_recipe(
        tmp_path / "q.yaml",
        {
            "name": "q",
            "sources": [{"format": "locomo", "path": str(source)}],
            "timeline": {"padding": {"mode": "file", "path": str(padding)}},
            "products": [{"type": "quality_labels", **options}],
        },
    )
    folder = run(load_recipe(recipe), RunOptions(output_dir=tmp_path / "out"))
    assert json.loads((folder / "run.json").read_text())["validation"]["quality_labels"]["passed"]
    (summary,) = read_jsonl(folder / "quality_dialogues" / "test.jsonl")
    return read_jsonl(folder / "quality_turns" / "test.jsonl"), summary


def test_padding_turns_are_marked_and_left_out_of_the_means(tmp_path, bag_of_words):  # noqa: F811
    rows, summary = padded_run(tmp_path)
    # the eight turns of the two sessions, then the padding session's two
    assert [r["padding"] for r in rows] == [False] * 8 + [True] * 2
    # distinct-1: every real turn repeats no word (1.0); "I love pizza pizza" 3/4, "Pizza is great great great" 3/5
    assert [r["r3_2"] for r in rows[8:]] == [0.75, 0.6]
    assert (summary["turns"], summary["padding_turns"]) == (10, 2)
    assert summary["mean_r3_2"] == 1.0
    # the padding session's two turns have no query and follow-up both: the feedback count is the real turns'
    assert summary["with_feedback"] == sum(r["feedback_reward"] is not None for r in rows[:8])

    rows, summary = padded_run(tmp_path / "with", include_padding=True)
    assert summary["mean_r3_2"] == pytest.approx((8 * 1.0 + 0.75 + 0.6) / 10)
    assert (summary["turns"], summary["padding_turns"]) == (10, 2)


def check_tampered(recipe, rows, summaries) -> set[str]:
    from gen.products.checks import Checks
    from gen.recipe import load_recipe
    from tests.harness import Harness

    harness = Harness.from_recipe(load_recipe(recipe))
    product = harness.product("quality_labels")
    checks = Checks()
    checking.check_conversation(harness.inputs(product)[0], rows, summaries, product.options, harness.ctx, checks)
    return {name for name, result in checks.report().items() if result["failed"]}


def test_a_padding_turn_unmarked_or_counted_fails_validation(tmp_path, bag_of_words):  # noqa: F811
    rows, summary = padded_run(tmp_path)
    rows[9]["padding"] = False
    assert "padding turns are marked" in check_tampered(tmp_path / "q.yaml", rows, [summary])
    rows[9]["padding"] = True
    summary["mean_r3_2"] = round((8 * 1.0 + 0.75 + 0.6) / 10, 6)  # the padding averaged in
    assert "the summary's counts and means are the turns'" in check_tampered(tmp_path / "q.yaml", rows, [summary])


# --- a negative answer to a yes/no question ----------------------------------------------------------------

WORDS = FeedbackWords(negative=("wrong", "nope", "no, i"), positive=("thanks",), answers=("no", "nope", "not really"))


@pytest.mark.parametrize(
    ("response", "follow_up", "negative"),
    [
        ("Ever been to one?", "Nope, never been to something like that.", []),  # answers the question
        ("Did you have pets growing up?", "No, I didn't.", []),  # "no, i" would match; "No" answers
        ("Any luck?  ", "Not really. Nope.", ["nope"]),  # only the opening answer is skipped
        ("Did I get it right?", "No, that's wrong.", ["wrong"]),  # the rest is still searched
        ("I think you were there.", "No, I wasn't.", ["no, i"]),  # no question: a correction
        ("Is it Tuesday? I think so.", "No, I said Monday.", ["no, i"]),  # the reply does not end with the question
        ("Was it fun?", "Honestly nope.", ["nope"]),  # not the opening
        ("Was it fun?", "Nobody asked, nope.", ["nope"]),  # "Nobody" is not "no"
    ],
)
def test_a_negative_answer_to_the_replys_question_is_not_feedback(response, follow_up, negative):
    assert WORDS.feedback(response, follow_up)[0] == negative
    searched = checking.after_answer(WORDS.answers, response, follow_up)  # the validator's own route
    assert checking.found(WORDS.negative, searched) == negative


def test_the_bundled_answers_are_read_and_a_bare_no_in_yaml_is_the_word_no(tmp_path):
    from gen.errors import GenError

    bundled = FeedbackWords.load(Templates())
    assert bundled.answers[:3] == ("no", "nope", "nah")
    folder = tmp_path / "templates" / "quality"
    folder.mkdir(parents=True)
    words = folder / "feedback_words.yaml"
    words.write_text("negative: [wrong]\npositive: [thanks]\nanswers: [no, nope]\n")
    assert FeedbackWords.load(Templates.of(tmp_path / "templates")).answers == ("no", "nope")  # YAML 1.2: no is a word
    words.write_text("negative: [wrong]\npositive: [thanks]\nanswers: [12, {a: b}]\n")
    with pytest.raises(GenError) as error:
        FeedbackWords.load(Templates.of(tmp_path / "templates"))
    assert error.value.field == "answers"


@pytest.mark.integration
def test_on_locomo_almost_every_negative_hit_was_an_answer_to_a_question(tmp_path, bag_of_words):  # noqa: F811
    """locomo10 has 19 follow-ups with a negative phrase (read by hand: 13 of them open with "No"/"Nope" right
    after a reply that ends with a yes/no question, e.g. "Ever been to one?" - "Nope, never been"); the labels
    keep the other 6 ("it's not right that...", "what went wrong", "I'm sure you're wrong")."""
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from gen.recipe import load_recipe

    locomo = require_shared("locomo/locomo10.json")
    recipe = write_recipe(
        tmp_path / "q.yaml",
        {
            "name": "q",
            "sources": [{"format": "locomo", "path": str(locomo)}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [{"type": "log"}, {"type": "quality_labels"}],
        },
    )
    folder = run(load_recipe(recipe), RunOptions(output_dir=tmp_path / "out"))
    assert json.loads((folder / "run.json").read_text())["validation"]["quality_labels"]["passed"]
    rows = read_jsonl(folder / "quality_turns" / "test.jsonl")
    log = {(r["conversation_id"], r["response_index"]): r["text"] for r in read_jsonl(folder / "log" / "test.jsonl")}
    bundled = FeedbackWords.load(Templates())
    with_follow_up = [r for r in rows if r["follow_up_index"] is not None and r["query_index"] is not None]
    before = [r for r in with_follow_up if bundled.hits(log[r["conversation_id"], r["follow_up_index"]])[0]]
    after = [r for r in rows if r["negative_hits"]]
    assert (len(before), len(after)) == (19, 6)
    for row in before:
        if row in after:
            continue
        reply, follow_up = (
            log[row["conversation_id"], row["response_index"]],
            log[row["conversation_id"], row["follow_up_index"]],
        )
        assert reply.rstrip().endswith("?") and words(follow_up)[0] in ("no", "nope"), (reply, follow_up)
    assert {hit for r in after for hit in r["negative_hits"]} == {"not right", "wrong"}


# --- persona_cosine ---------------------------------------------------------------------------------------


def test_persona_cosine_is_the_replys_best_cosine_to_its_speakers_facts(tmp_path, bag_of_words):  # noqa: F811
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from gen.recipe import load_recipe

    folder = run(load_recipe(episode_recipe(tmp_path, {})), RunOptions(output_dir=tmp_path / "out"))
    assert json.loads((folder / "run.json").read_text())["validation"]["quality_labels"]["passed"]
    rows = read_jsonl(folder / "quality_turns" / "test.jsonl")
    texts = PREVIOUS + DIALOG
    encoder = BagOfWords()
    for row, text in zip(rows, texts, strict=True):
        facts = PERSONAS[0 if row["speaker"] == "Speaker 1" else 1]
        expected = max(float(encoder.encode([fact])[0] @ encoder.encode([text])[0]) for fact in facts)
        assert row["persona_cosine"] == pytest.approx(expected, abs=1e-6)
    (summary,) = read_jsonl(folder / "quality_dialogues" / "test.jsonl")
    assert summary["mean_persona_cosine"] == pytest.approx(np.mean([r["persona_cosine"] for r in rows]), abs=1e-6)

    rows[4]["persona_cosine"] = 0.99
    summaries = read_jsonl(folder / "quality_dialogues" / "test.jsonl")
    failed = check_tampered(tmp_path / "q.yaml", rows, summaries)
    assert "persona_cosine is the reply's best cosine to its speaker's facts" in failed


def test_persona_cosine_is_null_without_persona_facts(tmp_path, bag_of_words):  # noqa: F811
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from gen.recipe import load_recipe

    source = write_json(tmp_path / "conv.json", [locomo_sample("s1", sessions=SESSIONS)])
    recipe = write_recipe(
        tmp_path / "q.yaml",
        {
            "name": "q",
            "sources": [{"format": "locomo", "path": str(source)}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [{"type": "quality_labels"}],
        },
    )
    folder = run(load_recipe(recipe), RunOptions(output_dir=tmp_path / "out"))
    rows = read_jsonl(folder / "quality_turns" / "test.jsonl")
    assert [r["persona_cosine"] for r in rows] == [None] * 8
    (summary,) = read_jsonl(folder / "quality_dialogues" / "test.jsonl")
    assert summary["mean_persona_cosine"] is None


# --- the encoder runs once per text ------------------------------------------------------------------------


def test_labels_and_their_validation_encode_each_text_once(tmp_path, monkeypatch):
    from gen.products.quality import vectors
    from tests.test_quality_labels import run_labels

    seen: list[str] = []

    class Counting(BagOfWords):
        def encode(self, texts):
            seen.extend(texts)
            return super().encode(texts)

    monkeypatch.setattr(vectors, "model", Counting)
    monkeypatch.setattr("gen.embedding.model_folder", lambda what="": tmp_path)
    folder, rows = run_labels(tmp_path)
    assert json.loads((folder / "run.json").read_text())["validation"]["quality_labels"]["passed"]
    texts = [text for _, session in SESSIONS for text in session]
    assert sorted(seen) == sorted(set(texts)) and len(rows) == len(texts)


def test_the_new_fields_load_with_their_declared_types(tmp_path, bag_of_words, offline):  # noqa: F811
    from tests.test_load_types import load

    padded_run(tmp_path)
    folder = tmp_path / "out" / "q"
    turns = load(folder, "quality_turns", tmp_path / "hf")
    assert turns.features["padding"].dtype == "bool" and turns.features["persona_cosine"].dtype == "float64"
    assert turns["padding"] == [False] * 8 + [True] * 2 and turns["persona_cosine"] == [None] * 10
    dialogues = load(folder, "quality_dialogues", tmp_path / "hf")
    assert dialogues["padding_turns"] == [2] and dialogues["mean_persona_cosine"] == [None]
