"""Canonical JSON and the short stable ids made from it (question ids, group ids, recipe fingerprints)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson


def canonical_json(value: Any, *, ascii_only: bool = True) -> str:
    """Sorted keys, no spaces: the same value always gives the same text. Ids are hashed over the ASCII
    form, the LLM cache keys over the UTF-8 form (`ascii_only=False`); neither may change, or every id
    (or every cached reply) would."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii_only)


def stable_id(value: Any, length: int = 16) -> str:
    """The first `length` hex digits of the sha256 of the value's canonical JSON (ASCII form). orjson writes
    the same text as `canonical_json` for ASCII-only values, several times faster; others take the slow path."""
    text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    if not text.isascii():
        text = canonical_json(value).encode()
    return hashlib.sha256(text).hexdigest()[:length]


class PrefixedIds:
    """`stable_id([*head, *tail])` for many tails that share one head (the question ids of a base question):
    the head's JSON is hashed once and each id hashes only its tail, so the ids are the same bytes, at a
    fraction of the cost. Ids with a character outside ASCII take `stable_id`'s own path."""

    def __init__(self, *head: Any, length: int = 16) -> None:
        self.head, self.length = head, length
        text = orjson.dumps(head, option=orjson.OPT_SORT_KEYS)
        # the head's list without its closing bracket: each tail continues it
        self.hashed = hashlib.sha256(text[:-1]) if text.isascii() and head else None

    def __call__(self, *tail: Any) -> str:
        if self.hashed is None or not tail:
            return stable_id([*self.head, *tail], self.length)
        text = orjson.dumps(tail, option=orjson.OPT_SORT_KEYS)
        if not text.isascii():
            return stable_id([*self.head, *tail], self.length)
        digest = self.hashed.copy()
        digest.update(b"," + text[1:])  # "[a,b]" continued by ",c]" is "[a,b,c]"
        return digest.hexdigest()[: self.length]
