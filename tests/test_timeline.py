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
