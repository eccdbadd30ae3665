"""Hostile values and the mutations that put them into valid inputs: structure mutations of a parsed tree
(recipe, source record, prediction line) and byte mutations of a file's text. Each mutation is a small
tuple that says what it did, so a failing case reads as "valid input X + these changes"."""

from __future__ import annotations

import json
from copy import deepcopy
from typing import Any

from hypothesis import strategies as st

SPECIAL_PATHS = ["/dev/zero", "/dev/urandom", "/dev/null", "/dev/full", "/proc/self/environ", "/", "/etc"]

ODD_STRINGS = [
    "",
    " ",
    "\t\n",
    "\x00",
    "a\x00b",
    "\u202eevil",  # right-to-left override
    "\ufeffbom",
    "\u200b",  # zero-width space
    "ｆｕｌｌ",
    "e\u0301",  # a combining accent
    "😀" * 3,
    "null",
    "~",
    "yes",
    "no",
    "NaN",
    "1e999",
    "-0",
    "0x10",
    "2023-02-30",
    "../../outside",
    "{{ 7 * 7 }}",
    "${HOME}",
    "%s%s%n",
    "a" * 5000,
    "x" * 200_000,
]

NUMBERS = [0, -1, 1, 2**31, 2**63, -(2**63) - 1, 10**30, 10**400, 0.5, -0.0, 1e308, float("inf"), float("-inf")]
NUMBERS_NAN = float("nan")


def deep(depth: int, kind: str) -> Any:
    """A list or mapping nested `depth` levels."""
    value: Any = 1
    for _ in range(depth):
        value = [value] if kind == "list" else {"a": value}
    return value


scalars = st.one_of(
    st.sampled_from([None, True, False, NUMBERS_NAN, *NUMBERS]),
    st.sampled_from(ODD_STRINGS + SPECIAL_PATHS),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
)
containers = st.one_of(
    st.just([]),
    st.just({}),
    st.builds(deep, st.sampled_from([30, 100]), st.sampled_from(["list", "dict"])),  # deeper: as text (INSERTS)
    st.lists(scalars, max_size=4),
    st.dictionaries(st.text(max_size=6), scalars, max_size=3),
)
hostile_values = st.one_of(scalars, scalars, containers)


def tree_paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    """Every node's path (keys and indices) in a parsed JSON or YAML tree, the root first."""
    found = [prefix]
    if isinstance(tree, dict):
        for key, value in tree.items():
            found += tree_paths(value, (*prefix, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            found += tree_paths(value, (*prefix, index))
    return found


def copy(tree: Any) -> Any:
    return json.loads(json.dumps(tree))


def get(tree: Any, path: tuple) -> Any:
    for part in path:
        tree = tree[part]
    return tree


def apply(tree: Any, mutation: tuple) -> Any:
    """`tree` with one mutation applied: ("set", path, value), ("delete", path), ("add", path, key, value),
    ("repeat", path) (a list's item twice, or a mapping's key again under a case-changed name)."""
    op, path = mutation[0], mutation[1]
    if op in ("set", "add"):  # a fresh copy: st.just([]) hands every example the same list, which a later
        mutation = (*mutation[:-1], deepcopy(mutation[-1]))  # change could then put inside itself
    if not path:
        return mutation[2] if op == "set" else tree
    parent = get(tree, path[:-1])
    last = path[-1]
    if op == "set":
        parent[last] = mutation[2]
    elif op == "delete":
        del parent[last]
    elif op == "add":
        target = parent[last]
        if isinstance(target, dict):
            target[mutation[2]] = mutation[3]
        elif isinstance(target, list):
            target.append(mutation[3])
        else:
            parent[last] = {mutation[2]: mutation[3]}
    elif op == "repeat":
        target = parent[last]
        if isinstance(parent, list):
            parent.insert(last, copy(target))
        else:
            parent[str(last).upper() if str(last).upper() != last else f"{last}_"] = copy(target)
    return tree


@st.composite
def mutations(draw, tree: Any, most: int = 3) -> list[tuple]:
    """1 to `most` structure mutations of `tree`, each at a node drawn from its paths."""
    paths = tree_paths(tree)
    found = []
    for _ in range(draw(st.integers(1, most))):
        path = paths[draw(st.integers(0, len(paths) - 1))]
        op = draw(st.sampled_from(["set", "set", "set", "delete", "add", "repeat"]))
        if op == "set":
            found.append(("set", path, draw(hostile_values)))
        elif op == "add":
            found.append(("add", path, draw(st.sampled_from(["unknown", "extra_key", "", "\u00e9"])), draw(scalars)))
        else:
            found.append((op, path))
    return found


def mutated(tree: Any, changes: list[tuple]) -> Any:
    """`tree` (copied) with each change applied in turn; a change whose path an earlier one removed is skipped."""
    result = copy(tree)
    for change in changes:
        try:
            result = apply(result, change)
        except (KeyError, IndexError, TypeError):
            continue
    return result


def to_json(tree: Any) -> bytes:
    """JSON as Python writes it: NaN and Infinity stay literals (as some tools write them), huge ints exact."""
    return json.dumps(tree, ensure_ascii=False).encode("utf-8", "surrogatepass")


# -- byte mutations of a file's text ------------------------------------------------------------------------
BYTE_EDITS = ["truncate", "insert", "bom", "nul", "invalid-utf8", "lone-surrogate", "repeat-line", "crlf", "tabs"]
INSERTS = [
    b"\xff\xfe",
    b"\x00",
    b"\xed\xa0\x80",  # a surrogate encoded in UTF-8, which no decoder accepts
    b'"\\ud800"',
    b"\r",
    b"\x1b[31m",
    b"&a [*a, *a]",
    b"!!binary",
    b"{",
    b"[" * 50_000,  # nesting deeper than any recursive parser's stack
    b'{"a":' * 50_000,
    b"- " * 20_000,
]


@st.composite
def byte_edits(draw, text: bytes, most: int = 2) -> list[tuple]:
    """1 to `most` edits of a file's bytes: (edit, position[, inserted bytes])."""
    found = []
    for _ in range(draw(st.integers(1, most))):
        edit = draw(st.sampled_from(BYTE_EDITS))
        position = draw(st.integers(0, max(0, len(text) - 1)))
        found.append((edit, position, draw(st.sampled_from(INSERTS))) if edit == "insert" else (edit, position))
    return found


def edited(text: bytes, edits: list[tuple]) -> bytes:
    for edit in edits:
        name, position = edit[0], min(edit[1], len(text))
        if name == "truncate":
            text = text[:position]
        elif name == "insert":
            text = text[:position] + edit[2] + text[position:]
        elif name == "bom":
            text = b"\xef\xbb\xbf" + text
        elif name == "nul":
            text = text[:position] + b"\x00" + text[position:]
        elif name == "invalid-utf8":
            text = text[:position] + b"\xc3\x28" + text[position:]
        elif name == "lone-surrogate":
            text = text[:position] + b"\\ud800" + text[position:]
        elif name == "repeat-line":
            lines = text.splitlines(keepends=True)
            if lines:
                index = position % len(lines)
                lines.insert(index, lines[index])
            text = b"".join(lines)
        elif name == "crlf":
            text = text.replace(b"\n", b"\r\n")
        elif name == "tabs":
            text = text.replace(b"  ", b"\t")
    return text


def describe(changes: list[tuple]) -> str:
    """The changes in one line, long values cut."""
    parts = []
    for change in changes:
        shown = [repr(part)[:60] if not isinstance(part, str) or len(part) > 60 else repr(part) for part in change]
        parts.append("(" + ", ".join(shown) + ")")
    return "; ".join(parts)
