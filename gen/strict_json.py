"""JSON read with limits, for every file a user hands gen: nesting at most MAX_DEPTH deep, no repeated key in an
object, no NaN or Infinity (they are not JSON, and Python's parser takes them silently).

The standard library's C parser does the work; it stops by itself a little under 1,000 levels deep, so memory
stays flat however deep a hostile file nests. A record is then walked once for its depth (cheaper than parsing
it). Where a file breaks a rule, `locate` scans its text once more to give the line and column.

A string escape of half a surrogate pair ("\\ud800" alone) is refused too: Python's parser keeps it, but the
string it makes cannot be written as UTF-8, so it would fail later, far from the file, when a record is written.
Only a text holding such an escape at all is searched for one.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 64
CONSTANTS = ("NaN", "Infinity", "-Infinity")
# A string (skipped whole), a bracket, or a bare NaN / Infinity outside a string
TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]|-?Infinity|NaN')
LONG_NUMBER = re.compile(rf"\d{{{sys.get_int_max_str_digits() + 1},}}")
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")
# In a string: an escape (a pair of surrogate escapes taken together, so that a whole pair is never refused)
ESCAPE = re.compile(r"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|\\u[0-9a-fA-F]{4}|\\.")
LONE = "holds half a surrogate pair (\\ud800 to \\udfff alone), which is not a character"


@dataclass
class Broken(Exception):
    """Why a text is not accepted, and where: a 0-based offset into it (None where it is not known)."""

    reason: str
    offset: int | None = None
    key: str | None = None


def pairs_without_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        seen: set[str] = set()
        repeated = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise Broken(f"the key {repeated!r} appears twice in one object (JSON keeps only the last)", key=repeated)
    return found


def refuse_constant(name: str) -> Any:
    raise Broken(f"{name} is not a JSON number")


DECODER = json.JSONDecoder(object_pairs_hook=pairs_without_repeats, parse_constant=refuse_constant)


def depth(value: Any, limit: int = MAX_DEPTH) -> int:
    """How deep lists and objects nest in a parsed value (a scalar is 0), level by level without recursion; it
    stops counting past `limit`. (The parser makes plain dicts and lists only, hence the exact type tests.)"""
    level, frontier = 0, [value] if type(value) in (dict, list) else []
    while frontier and level <= limit:
        level += 1
        below = []
        for item in frontier:
            for child in item.values() if type(item) is dict else item:
                if type(child) is dict or type(child) is list:
                    below.append(child)
        frontier = below
    return level


def locate(text: str, start: int = 0) -> int | None:
    """The offset of the first place in `text` (from `start`) that nests deeper than MAX_DEPTH or holds NaN /
    Infinity outside a string."""
    level = 0
    for token in TOKEN.finditer(text, start):
        first = token.group()[0]
        if first in "[{":
            level += 1
            if level > MAX_DEPTH:
                return token.start()
        elif first in "]}":
            level -= 1
        elif first != '"':
            return token.start()
    return None


def decode(text: str, start: int = 0) -> tuple[Any, int]:
    """One JSON value of `text` from `start` (leading blanks skipped): (value, offset after it). Raises Broken
    for a rule broken, json.JSONDecodeError for text that is not JSON."""
    start = len(text) - len(text[start:].lstrip()) if text[start : start + 1].isspace() else start
    try:
        value, end = DECODER.raw_decode(text, start)
    except RecursionError:
        raise Broken(f"nested more than {MAX_DEPTH} levels deep", locate(text, start)) from None
    except Broken as broken:
        if broken.key is None:  # NaN or Infinity: find it
            broken.offset = locate(text, start)
        raise
    except json.JSONDecodeError:
        raise
    except ValueError:  # Python reads no whole number of more than sys.get_int_max_str_digits() digits
        long_number = LONG_NUMBER.search(text, start)
        raise Broken("a number too long to read", long_number.start() if long_number else None) from None
    if depth(value) > MAX_DEPTH:
        raise Broken(f"nested more than {MAX_DEPTH} levels deep", locate(text, start))
    if SURROGATE_ESCAPE.search(text, start, end) and has_lone_surrogate(value):
        raise Broken(f"a string {LONE}", locate_lone_surrogate(text, start, end))
    return value, end


def has_lone_surrogate(value: Any) -> bool:
    """Whether a string or a key anywhere in a parsed value cannot be encoded as UTF-8 (walked without
    recursion; the value's depth is already known to be at most MAX_DEPTH)."""
    pending = [value]
    while pending:
        item = pending.pop()
        if type(item) is str:
            if not item.isascii():
                try:
                    item.encode("utf-8")
                except UnicodeEncodeError:
                    return True
        elif type(item) is dict:
            pending.extend(item)
            pending.extend(item.values())
        elif type(item) is list:
            pending.extend(item)
    return False


def locate_lone_surrogate(text: str, start: int, end: int) -> int | None:
    """The offset of the first lone surrogate escape in the strings of text[start:end]."""
    for token in TOKEN.finditer(text, start, end):
        if token.group()[0] == '"':
            for escape in ESCAPE.finditer(text, token.start(), token.end()):
                if len(escape.group()) == 6 and SURROGATE_ESCAPE.fullmatch(escape.group()):
                    return escape.start()
    return None


def loads(text: str) -> Any:
    """A whole text that must be exactly one JSON value."""
    value, end = decode(text)
    if text[end:].strip():
        raise json.JSONDecodeError("Extra data", text, end + len(text[end:]) - len(text[end:].lstrip()))
    return value


def line_and_column(text: str, offset: int) -> str:
    line = text.count("\n", 0, offset) + 1
    return f"line {line}, column {offset - (text.rfind(chr(10), 0, offset) + 1) + 1}"
