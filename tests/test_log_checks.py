"""The `log` validator on hand-written records: what it counts on a sound conversation, and which check
catches each kind of damage, naming the response."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest

from gen.products.chat_log.checking import check_conversation
from gen.products.checks import Checks

GAP = timedelta(minutes=30)


def row(index: int, session: int, turn: int, stamp: str, day_name: str, week: str, padding: bool = False) -> dict:
    return {
        "response_index": index,
        "session_index": session,
        "turn_index": turn,
        "timestamp": stamp,
        "date": stamp[:10],
        "time": stamp[11:],
        "day_name": day_name,
        "week": week,
        "is_padding": padding,
    }


SOUND = [  # 8 May 2023 was a Monday in ISO week 19; 14 May a Sunday, still week 19; 15 May a Monday of week 20
    row(0, 1, 0, "2023-05-08T13:56:04", "Monday", "2023-W19"),
    row(1, 1, 1, "2023-05-08T13:56:10", "Monday", "2023-W19"),
    row(2, 2, 0, "2023-05-14T23:59:58", "Sunday", "2023-W19"),
    row(3, 2, 1, "2023-05-15T00:00:03", "Monday", "2023-W20"),
    row(4, 3, 0, "2023-05-15T01:00:00", "Monday", "2023-W20", padding=True),
]


def report(rows: list[dict]) -> dict:
    checks = Checks()
    check_conversation("c", rows, GAP, checks)
    return checks.report()


def test_a_sound_conversation_passes_every_check_counted_by_hand():
    assert report(SOUND) == {
        "response_index is 0..n-1 in order": {"checked": 5, "failed": 0},
        "date, time, day_name and week agree with timestamp": {"checked": 5, "failed": 0},
        "timestamps never decrease": {"checked": 4, "failed": 0},
        "turn_index counts up within a session": {"checked": 2, "failed": 0},  # 0→1 and 2→3
        "gaps within a session stay below session_gap_minutes": {"checked": 2, "failed": 0},
        "sessions follow in order": {"checked": 2, "failed": 0},  # 1→2 and 3→4
        "gaps between sessions exceed session_gap_minutes": {"checked": 2, "failed": 0},
        "padding responses come last": {"checked": 1, "failed": 0},
    }


def test_a_conversation_that_opens_with_a_one_turn_session_lists_the_session_checks_first():
    rows = [SOUND[1] | {"response_index": 0, "turn_index": 0}, *SOUND[2:]]
    rows = [r | {"response_index": i} for i, r in enumerate(rows)]
    names = list(report(rows))
    assert names.index("sessions follow in order") < names.index("turn_index counts up within a session")


def damaged(change) -> list[dict]:
    rows = copy.deepcopy(SOUND)
    change(rows)
    return rows


@pytest.mark.parametrize(
    ("change", "check", "example"),
    [
        (lambda rows: rows[3].update(response_index=7), "response_index is 0..n-1 in order", "c response 7"),
        (lambda rows: rows[2].update(day_name="Monday"), "date, time, day_name and week agree with timestamp",
         "c response 2"),
        (lambda rows: rows[2].update(week="2023-W20"), "date, time, day_name and week agree with timestamp",
         "c response 2"),
        (lambda rows: rows[1].update(timestamp="2023-05-08T13:56:00", time="13:56:00"), "timestamps never decrease",
         "c response 1"),
        (lambda rows: rows[3].update(turn_index=2), "turn_index counts up within a session", "c response 3"),
        (lambda rows: rows[1].update(timestamp="2023-05-08T14:26:04", time="14:26:04"),
         "gaps within a session stay below session_gap_minutes", "c response 1: 0:30:00"),
        (lambda rows: rows[4].update(session_index=4), "sessions follow in order", "c response 4"),
        (lambda rows: rows[4].update(timestamp="2023-05-15T00:30:03", time="00:30:03"),
         "gaps between sessions exceed session_gap_minutes", "c response 4: 0:30:00"),
        (lambda rows: rows[1].update(is_padding=True), "padding responses come last", "c"),
    ],
)  # fmt: skip
def test_each_kind_of_damage_fails_its_check_and_names_the_response(change, check, example):
    result = report(damaged(change))
    assert result[check]["failed"] == 1 and result[check]["examples"] == [example]
    assert [name for name, r in result.items() if r["failed"]] == [check]
