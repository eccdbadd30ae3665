"""Canonical JSON and the short stable ids made from it (question ids, group ids, recipe fingerprints)."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import orjson


def canonical_json(value: Any, *, ascii_only: bool = True) -> str:
    """Sorted keys, no spaces: the same value always gives the same text. Ids are hashed over the ASCII
    form, the LLM cache keys over the UTF-8 form (`ascii_only=False`); neither may change, or every id
    (or every cached reply) would."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=ascii_only)


def canonical_utf8(value: Any) -> bytes:
    """``canonical_json(value, ascii_only=False)`` encoded as UTF-8. orjson writes the same bytes for plain JSON
    values (str keys; str, int, bool and None; lists; floats Python writes without an exponent), several times
    faster: the LLM cache key of every request is made from this. Anything else takes the slow path."""
    if plain(value):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except orjson.JSONEncodeError:  # an int past 64 bits, a lone surrogate: json's own answer (or error)
            pass
    return canonical_json(value, ascii_only=False).encode()


def plain(value: Any) -> bool:
    """Whether orjson and json write `value` alike: only JSON's own types (not subclasses), and floats whose
    shortest form has no exponent (json writes 1e-05 where orjson writes 0.00001)."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value) and "e" not in repr(value)
    if kind is dict:
        return all(type(key) is str and plain(item) for key, item in value.items())
    if kind is list or kind is tuple:
        return all(map(plain, value))
    return False


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
