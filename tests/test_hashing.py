"""Stable ids are sha256 over canonical JSON (sorted keys, no spaces, non-ASCII escaped), whichever encoder
produced the text."""

from __future__ import annotations

import hashlib
import json

from gen.hashing import canonical_json, stable_id


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
