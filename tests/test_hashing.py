"""Stable ids are sha256 over canonical JSON (sorted keys, no spaces, non-ASCII escaped), whichever encoder
produced the text."""

from __future__ import annotations

import hashlib
import json

import pytest

from gen.hashing import PrefixedIds, canonical_json, canonical_utf8, stable_id


def by_hand(value) -> str:
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode()).hexdigest()


def test_stable_ids_match_the_standard_library_encoding():
    values = [
        ("time_queries", "locomo/conv-26", "dates", {"date": "2023-05-08", "days_ago": 3}, "on {time}", "digits"),
        ["ambiguous", {"b": [1, 2, {"z": None, "a": True}], "a": -7}],
        ("café", "naïve — “quoted”", {"ключ": "значение"}),  # non-ASCII takes the standard path
    ]
    for value in values:
        assert stable_id(value) == by_hand(value)[:16]
        assert stable_id(value, length=40) == by_hand(value)[:40]
    assert canonical_json({"b": 1, "a": "é"}) == '{"a":"\\u00e9","b":1}'
    assert canonical_json({"b": 1, "a": "é"}, ascii_only=False) == '{"a":"é","b":1}'


def test_ids_made_from_a_shared_head_are_the_ids_of_the_whole_value():
    heads = [
        (
            "time_queries",
            "locomo/conv-26",
            "day_span",
            {"days": 7, "last_date": "2023-05-08", "first_date": "2023-05-01"},
        ),
        ("time_queries", "cc/épisode-1", "dates", {"date": "2023-05-08"}),  # a non-ASCII head
        (),
    ]
    tails = [("What did we talk about {time}?", "in the last 7 days", "digits"), ("à {time}", "hier", "words"), ()]
    for head in heads:
        ids = PrefixedIds(*head)
        for tail in tails:
            assert ids(*tail) == by_hand([*head, *tail])[:16]
    assert PrefixedIds("a", length=40)("b") == by_hand(["a", "b"])[:40]


class Text(str):
    """A str subclass: json writes it as its text, orjson would not be asked (slow path)."""


@pytest.mark.parametrize(
    "value",
    [
        {"model": "m", "messages": [{"role": "user", "content": "café “q” \u2028 \x00\x1f\x7f 😀"}], "top_p": 0.7},
        {"floats": [0.0, -0.0, 1.0, 1e-4, 1e-05, 2.5e-7, 1e15, 1e16, 1.7976931348623157e308, 1 / 3]},
        {"ints": [0, -1, 2**63 - 1, 2**64, -(2**70)], "bools": [True, False, None]},
        {"\uffff": 1, "😀": 2, "b": 3, "B": 4, "é": 5},  # keys sorted by code point either way
        {"tuple": (1, "a"), "sub": Text("x"), "nested": [[{"z": {"y": []}}]]},
    ],
)
def test_the_utf8_canonical_form_is_the_standard_librarys_bytes(value):
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert canonical_utf8(value) == expected


def test_the_utf8_canonical_form_refuses_what_json_refuses():
    with pytest.raises(UnicodeEncodeError):  # a lone surrogate cannot be UTF-8
        canonical_utf8({"a": "\ud800"})
    with pytest.raises(TypeError):
        canonical_utf8({"a": {1, 2}})
