"""Stable ids are sha256 over canonical JSON (sorted keys, no spaces, non-ASCII escaped), whichever encoder
produced the text."""

from __future__ import annotations

import hashlib
import json

from gen.hashing import PrefixedIds, canonical_json, stable_id


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
