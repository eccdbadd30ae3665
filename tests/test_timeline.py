"""The timeline (docs/timestamps.md, docs/padding-and-now.md) on small conversations, with every expected time
worked out by hand."""

from __future__ import annotations

from datetime import datetime

import pytest

from gen.errors import GenError
from gen.recipe import PaddingSpec, TimelineSpec
from gen.sources import locomo
from gen.timeline import build_timeline
from tests.conftest import locomo_sample, write_json


def words(n: int, word: str = "word") -> str:
    return " ".join([word] * n)


ANN_BOB = locomo_sample(
    "a",
    ("Ann", "Bob"),
    [
        ("1:56 pm on 8 May, 2023", ["one two three", "four five six seven eight", "nine"]),
        ("11:58 pm on 9 May, 2023", [words(100), words(200)]),  # crosses midnight
    ],
)
CAT_DAN = locomo_sample("b", ("Cat", "Dan"), [("9:00 am on 1 June, 2023", ["alpha beta", "gamma delta epsilon"])])


def conversations(*samples):
    return list(locomo.parse(list(samples), "fixture.json"))


def stamps(timeline) -> list[str]:
    return [r.timestamp.isoformat(timespec="seconds") for r in timeline.responses]


def test_stamps_follow_the_speaking_rate_rule_without_padding():
    (ann,) = conversations(ANN_BOB)
    timeline = build_timeline(ann, TimelineSpec(padding=PaddingSpec(mode="none")))
    # cumulative words 3, 8, 9 → floor(1.38)=1, floor(3.68)=3, floor(4.14)=4 seconds after 13:56:00;
    # session 2: 100 → 46 s, 300 → 138 s after 23:58:00 (past midnight)
    assert stamps(timeline) == [
        "2023-05-08T13:56:01",
        "2023-05-08T13:56:03",
        "2023-05-08T13:56:04",
        "2023-05-09T23:58:46",
        "2023-05-10T00:00:18",
    ]
    assert [r.response_index for r in timeline.responses] == [0, 1, 2, 3, 4]
    assert [(r.session_index, r.turn_index) for r in timeline.responses] == [(1, 0), (1, 1), (1, 2), (2, 0), (2, 1)]
    assert timeline.now == datetime(2023, 5, 10, 0, 50, 18)  # last response + 50 minutes
    assert timeline.current_session == 3
    assert str(timeline.today) == "2023-05-10"


def test_exact_arithmetic_where_floating_point_would_round_down():
    sample = locomo_sample("x", ("Ann", "Bob"), [("1:00 pm on 8 May, 2023", [words(100)])])
    (ann,) = conversations(sample)
    timeline = build_timeline(ann, TimelineSpec(seconds_per_word=0.57, padding=PaddingSpec(mode="none")))
    # 0.57 × 100 = 57 exactly (the float product is 56.99999…)
    assert stamps(timeline) == ["2023-05-08T13:00:57"]


def test_donor_padding_starts_an_hour_after_the_last_session_start_and_renames_speakers():
    ann, cat = conversations(ANN_BOB, CAT_DAN)
    timeline = build_timeline(ann, TimelineSpec(), donors=[ann, cat], seed=13)
    padding = [r for r in timeline.responses if r.is_padding]
    # later of 23:58:00 + 60 min = 00:58:00 and 00:00:18 + 20 min + 1 min = 00:21:18
    assert [r.timestamp.isoformat() for r in padding] == ["2023-05-10T00:58:00", "2023-05-10T00:58:02"]
    assert [(r.speaker, r.text) for r in padding] == [("Ann", "alpha beta"), ("Bob", "gamma delta epsilon")]
    assert all(r.session_index == 3 and r.source_turn_id is None for r in padding)
    assert timeline.now == datetime(2023, 5, 10, 1, 48, 2)
    assert timeline.current_session == 4
    assert timeline.padding_donors == ("locomo/b",)


def test_padding_start_waits_for_the_session_gap_when_after_minutes_is_short():
    ann, cat = conversations(ANN_BOB, CAT_DAN)
    spec = TimelineSpec(padding=PaddingSpec(mode="donor", after_minutes=10))
    timeline = build_timeline(ann, spec, donors=[ann, cat])
    assert timeline.session_starts[-1] == datetime(2023, 5, 10, 0, 21, 18)  # 00:00:18 + 21 min beats 00:08:00


def test_donor_padding_reaches_the_word_target_with_consecutive_sessions():
    donor = locomo_sample(
        "d", ("Cat", "Dan"), [(f"9:00 am on {day} June, 2023", [words(40), words(40)]) for day in range(1, 6)]
    )
    ann, cat = conversations(ANN_BOB, donor)
    timeline = build_timeline(ann, TimelineSpec(padding=PaddingSpec(target_words=200)), donors=[ann, cat], seed=1)
    padding = [r for r in timeline.responses if r.is_padding]
    assert len(padding) == 6  # 80 words per donor session: three sessions reach 240 >= 200


def test_donor_padding_with_no_other_conversation_says_so():
    (ann,) = conversations(ANN_BOB)
    with pytest.raises(GenError, match="needs another conversation from the same source"):
        build_timeline(ann, TimelineSpec(), donors=[ann])


def test_file_padding_maps_its_speakers_in_order_of_appearance(tmp_path):
    path = write_json(
        tmp_path / "padding.json", [{"speaker": "X", "text": "hello there"}, {"speaker": "Y", "text": "hi"}]
    )
    (ann,) = conversations(ANN_BOB)
    timeline = build_timeline(ann, TimelineSpec(padding=PaddingSpec(mode="file", path=path)))
    assert [(r.speaker, r.text, r.timestamp.isoformat()) for r in timeline.responses if r.is_padding] == [
        ("Ann", "hello there", "2023-05-10T00:58:00"),
        ("Bob", "hi", "2023-05-10T00:58:01"),
    ]  # 2 → 0 s, 3 → 1 s


OVERLAPPING = locomo_sample(
    "o",
    ("Ann", "Bob"),
    [
        ("1:00 pm on 8 May, 2023", [words(3000)]),  # floor(1380) s = 23 min: ends 13:23:00
        ("1:30 pm on 8 May, 2023", ["hi"]),  # only 7 minutes later
    ],
)


def test_sessions_closer_than_the_gap_are_an_error_naming_both():
    (overlapping,) = conversations(OVERLAPPING)
    with pytest.raises(GenError) as error:
        build_timeline(overlapping, TimelineSpec(padding=PaddingSpec(mode="none")))
    assert "session_1 ends at 2023-05-08 13:23:00" in str(error.value)
    assert "session_2 starts at 2023-05-08 13:30:00" in str(error.value)
    assert "locomo/o" in str(error.value)


def test_shift_overlapping_moves_the_later_session():
    (overlapping,) = conversations(OVERLAPPING)
    timeline = build_timeline(overlapping, TimelineSpec(shift_overlapping=True, padding=PaddingSpec(mode="none")))
    assert timeline.session_starts[1] == datetime(2023, 5, 8, 13, 44)  # 13:23:00 + 21 minutes


def test_relative_gaps_place_msc_sessions_from_the_anchor(tmp_path):
    from gen.sources import msc

    record = {
        "metadata": {"initial_data_id": "test_9"},
        "previous_dialogs": [
            {"dialog": [{"text": "one two"}, {"text": "three four five six"}], "time_num": 2, "time_unit": "days"},
            {"dialog": [{"text": "a b c d e f g h i j"}], "time_num": 3, "time_unit": "hours"},
        ],
        "dialog": [{"text": "x y z", "id": "Speaker 1"}, {"text": "last words", "id": "50997"}],
        "personas": [["I run."], ["I swim."]],
    }
    (conversation,) = msc.parse([record], "msc.txt")
    spec = TimelineSpec(anchor_start=datetime(2023, 1, 2, 10, 0), padding=PaddingSpec(mode="none"))
    timeline = build_timeline(conversation, spec)
    # session 1 at the anchor: 2 → 0 s, 6 → 2 s; session 2 two days after 10:00:02: 10 → 4 s;
    # session 3 three hours after 10:00:04 on Jan 4: 3 → 1 s, 5 → 2 s
    assert stamps(timeline) == [
        "2023-01-02T10:00:00",
        "2023-01-02T10:00:02",
        "2023-01-04T10:00:06",
        "2023-01-04T13:00:07",
        "2023-01-04T13:00:08",
    ]
    assert [r.speaker for r in timeline.responses] == ["Speaker 1", "Speaker 2", "Speaker 1", "Speaker 1", "Speaker 2"]


# --- the padding offset: one value, a seeded choice from a list, or a seeded range ---------------------------


def padding_start_minutes(after_minutes, seed: int) -> float:
    """Minutes from Ann/Bob's last session start (23:58:00 on 9 May) to the padding session's start."""
    ann, cat = conversations(ANN_BOB, CAT_DAN)
    spec = TimelineSpec(padding=PaddingSpec(after_minutes=after_minutes))
    timeline = build_timeline(ann, spec, donors=[ann, cat], seed=seed)
    assert timeline.padding_after_minutes is not None
    gap = (timeline.session_starts[-1] - datetime(2023, 5, 9, 23, 58)).total_seconds() / 60
    assert gap == timeline.padding_after_minutes  # every offset here beats last response + 21 min (00:21:18)
    return gap


def test_a_list_of_offsets_gives_each_conversation_one_of_them_by_seed():
    drawn = [padding_start_minutes([30, 90, 240], seed) for seed in range(12)]
    assert set(drawn) <= {30, 90, 240} and len(set(drawn)) > 1  # the seed decides, and does vary it
    assert drawn == [padding_start_minutes([30, 90, 240], seed) for seed in range(12)]  # and always the same way


def test_a_range_of_offsets_gives_a_seeded_whole_number_of_minutes_within_it():
    drawn = [padding_start_minutes({"min": 30.5, "max": 35}, seed) for seed in range(12)]
    assert set(drawn) <= {31, 32, 33, 34, 35} and len(set(drawn)) > 1
    assert padding_start_minutes({"min": 45, "max": 45}, 3) == 45


def test_the_offset_draw_leaves_the_donor_choice_alone():
    ann, cat = conversations(ANN_BOB, CAT_DAN)
    donors = []
    for after in (60, [30, 90], {"min": 30, "max": 300}):
        timeline = build_timeline(ann, TimelineSpec(padding=PaddingSpec(after_minutes=after)), [ann, cat], seed=5)
        donors.append([(r.speaker, r.text) for r in timeline.responses if r.is_padding])
    assert donors[0] == donors[1] == donors[2]


def test_without_padding_there_is_no_offset():
    (ann,) = conversations(ANN_BOB)
    timeline = build_timeline(ann, TimelineSpec(padding=PaddingSpec(mode="none", after_minutes=[5, 10])))
    assert timeline.padding_after_minutes is None


@pytest.mark.parametrize(
    "value, message",
    [
        ({"min": 50, "max": 40}, "{min, max} was expected: min must not exceed max"),
        ({"min": 30.2, "max": 30.8}, "a whole number of minutes must lie between them"),
        ({"min": 30}, "{min, max} was expected (max): Field required"),
        ([], "a list of minutes was expected: List should have at least 1 item"),
        ([10, -1], "a list of minutes was expected ([1]): Input should be greater than or equal to 0"),
        ("soon", "a number of minutes was expected"),
    ],
)
def test_a_bad_padding_offset_is_one_clear_recipe_error(tmp_path, value, message):
    from gen.recipe import load_recipe
    from tests.conftest import write_recipe

    data = write_json(tmp_path / "c.json", [ANN_BOB, CAT_DAN])
    recipe = {
        "name": "r",
        "sources": [{"format": "locomo", "path": str(data)}],
        "timeline": {"padding": {"after_minutes": value}},
        "products": [{"type": "log"}],
    }
    with pytest.raises(GenError) as caught:
        load_recipe(write_recipe(tmp_path / "r.yaml", recipe))
    assert caught.value.field == "timeline.padding.after_minutes" and message in caught.value.message


def test_the_conversations_validator_checks_the_offset_and_the_padding_start(tmp_path):
    from gen.recipe import load_recipe
    from tests.conftest import write_recipe
    from tests.harness import Harness

    data = write_json(tmp_path / "c.json", [ANN_BOB, CAT_DAN])
    recipe = {
        "name": "r",
        "seed": 7,
        "sources": [{"format": "locomo", "path": str(data)}],
        "timeline": {"padding": {"after_minutes": {"min": 120, "max": 180}}},
        "products": [{"type": "log"}, {"type": "conversations"}],
    }
    harness = Harness.from_recipe(load_recipe(write_recipe(tmp_path / "r.yaml", recipe)))
    rows = harness.build("conversations")
    assert all(120 <= row["padding_after_minutes"] <= 180 for row in rows)
    assert harness.validate("conversations", rows).passed

    def failed(change) -> set[str]:
        changed = [dict(row) for row in rows]
        change(changed[0])
        return {name for name, r in harness.validate("conversations", changed).report().items() if r["failed"]}

    assert failed(lambda row: row.update(padding_after_minutes=181.0)) == {
        "the padding offset is one timeline.padding.after_minutes allows"
    }
    assert failed(lambda row: row.update(padding_after_minutes=150.5)) == {
        "the padding offset is one timeline.padding.after_minutes allows"
    }
    late = 121.0 if rows[0]["padding_after_minutes"] != 121 else 122.0  # allowed, but not where the session starts
    assert failed(lambda row: row.update(padding_after_minutes=late)) == {
        "the padding session starts at the later of (last start + offset) and (last response + gap + 1 minute)"
    }


def test_a_response_too_long_for_the_session_gap_is_refused_naming_it():
    """A reply of 2,607 words after a 2-word one: floor(0.46 × 2,609) − floor(0.46 × 2) = 1,200 − 0 = 1,200 s
    between them, a gap of 20 minutes that the log validator refuses inside a session (the run failed
    validation after building everything; found by the fuzzer, a 3,000-word table cell). 2,606 words take
    floor(0.46 × 2,608) = 1,199 s and are kept."""
    long = locomo_sample("long", ("Ann", "Bob"), [("1:00 pm on 8 May, 2023", ["hi there", words(2607)])])
    (conversation,) = conversations(long)
    with pytest.raises(GenError) as error:
        build_timeline(conversation, TimelineSpec(padding=PaddingSpec(mode="none")))
    message = str(error.value)
    assert "locomo/long" in message and "timeline.session_gap_minutes" in message
    assert "response 2 of session_1 has 2,607 words, which take 1,200 s" in message
    kept = locomo_sample("kept", ("Ann", "Bob"), [("1:00 pm on 8 May, 2023", ["hi there", words(2606), "ok"])])
    (conversation,) = conversations(kept)
    timeline = build_timeline(conversation, TimelineSpec(padding=PaddingSpec(mode="none")))
    assert stamps(timeline) == ["2023-05-08T13:00:00", "2023-05-08T13:19:59", "2023-05-08T13:20:00"]
