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
