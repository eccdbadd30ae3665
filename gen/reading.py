"""The one way gen reads a file a user hands it: recipes, corpora, predictions, answers, harness results, batch
files, templates, run folders read back. Every reader goes through here, so every input gets the same limits:

- only a regular file is opened: a folder, a named pipe (opening one blocks until a writer comes), a device
  (/dev/zero never ends) or a socket is refused by `os.stat` before `open`, and checked again on the open file;
- a text read whole is at most MAX_TEXT_BYTES (recipes, YAML, templates) or `max_record_bytes()` (a JSON
  document); a file read line by line or item by item holds no line or item larger than `max_record_bytes()`,
  so memory is bounded by the limit, never by the file;
- text is UTF-8: a UTF-8 byte-order mark is accepted and dropped (editors on Windows write one), UTF-16 and
  UTF-32 are refused with the advice to save as UTF-8, and a byte that is not UTF-8 is named with its line;
- YAML (`load_yaml`): no key twice in one mapping (PyYAML would keep the last silently), no nesting past
  MAX_YAML_DEPTH, and anchors and aliases allowed only while the document they expand to stays under
  MAX_YAML_NODES nodes (a few hundred bytes of aliases can otherwise stand for billions of values), whole
  numbers of at most MAX_YAML_DIGITS digits.

JSON's own rules (nesting, repeated keys, NaN, lone surrogates) stay in gen/strict_json.py.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import yaml

from gen import strict_json
from gen.errors import GenError

MAX_TEXT_BYTES = 1 << 20  # a recipe, a YAML file, a template: real ones are a few kilobytes
DEFAULT_MAX_RECORD_MB = 256  # one JSON document read whole, one line, one item of a list
RECORD_LIMIT_VARIABLE = "GEN_MAX_RECORD_MB"
MAX_YAML_DEPTH = 64  # lists and mappings inside each other; a real recipe nests 4 or 5 deep
MAX_YAML_NODES = 100_000  # values a YAML document stands for, each alias counted as what it repeats
MAX_YAML_DIGITS = 100  # digits of a whole number in YAML (Python refuses to read more than 4,300)

BOMS_REFUSED = {
    codecs.BOM_UTF32_LE: "UTF-32",  # before UTF-16: its mark starts with UTF-16's
    codecs.BOM_UTF32_BE: "UTF-32",
    codecs.BOM_UTF16_LE: "UTF-16",
    codecs.BOM_UTF16_BE: "UTF-16",
}


def max_record_bytes() -> int:
    """The largest JSON document, line or list item read: GEN_MAX_RECORD_MB megabytes (default 256)."""
    value = os.environ.get(RECORD_LIMIT_VARIABLE, "")
    if not value:
        return DEFAULT_MAX_RECORD_MB << 20
    if not value.isdigit() or not 1 <= int(value) <= 1 << 20:
        raise GenError(
            f"{value[:40]!r} is not a size",
            field=RECORD_LIMIT_VARIABLE,
            expected="a whole number of megabytes, 1 or more",
        )
    return int(value) << 20


KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a named pipe"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def not_a_file(mode: int) -> str | None:
    """What a path is when it is not a regular file (None when it is one)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in KINDS if test(mode)), "not a regular file")


def open_input(path: Path, expected: str) -> IO[bytes]:
    """`path` opened for reading in binary, positioned after a UTF-8 byte-order mark; only a regular file is
    opened. The path is looked at before it is opened (a named pipe would block `open`), and the open file again
    (the path may have changed in between; it is opened without blocking, so even then nothing waits)."""
    path = Path(path)
    try:
        kind = not_a_file(os.stat(path).st_mode)
    except FileNotFoundError:
        raise GenError("no such file", file=path, expected=expected) from None
    except OSError as exc:
        raise GenError(f"cannot read the file ({exc.strerror or exc})", file=path, expected=expected) from None
    if kind is None:
        try:
            descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        except OSError as exc:
            raise GenError(f"cannot read the file ({exc.strerror or exc})", file=path, expected=expected) from None
        kind = not_a_file(os.fstat(descriptor).st_mode)
        if kind is None:
            os.set_blocking(descriptor, True)
            handle = os.fdopen(descriptor, "rb")
            if handle.read(3) != codecs.BOM_UTF8:
                handle.seek(0)
            return handle
        os.close(descriptor)
    raise GenError(f"this is {kind}, not a file", file=path, expected=expected)


def read_bytes(path: Path, expected: str, limit: int) -> bytes:
    """The whole file (after a UTF-8 byte-order mark), refused past `limit` bytes: at most limit + 1 are read,
    whatever the file says its size is."""
    with open_input(path, expected) as handle:
        raw = handle.read(limit + 1)
    if len(raw) > limit:
        raise GenError(f"the file is larger than {size_text(limit)}", file=path, expected=expected)
    return raw


def size_text(size: int) -> str:
    return f"{size >> 20:,} MB" if size >= 1 << 20 else f"{size:,} bytes"


def read_text(path: Path, expected: str, limit: int = MAX_TEXT_BYTES) -> str:
    """The file's text: UTF-8, at most `limit` bytes (MAX_TEXT_BYTES unless the caller reads a data file), and no
    NUL byte (text never holds one; a picture or an archive given by mistake does)."""
    raw = read_bytes(path, expected, limit)
    refuse_other_encodings(raw, path, expected)
    if b"\0" in raw:
        line = raw.count(b"\n", 0, raw.index(b"\0")) + 1
        raise GenError(
            "this is a binary file (it holds a NUL byte), not text", file=path, record=f"line {line}", expected=expected
        )
    return decode(raw, path, expected)


def decode(raw: bytes, path: Path, expected: str, line: int | None = None) -> str:
    """UTF-8 bytes as text, or one error naming the line of the first byte that is not UTF-8 (`line` is the
    line `raw` starts at, when it is one line of a longer file)."""
    if line in (None, 1):
        refuse_other_encodings(raw, path, expected)
    if raw.startswith(codecs.BOM_UTF8) and line in (None, 1):
        raw = raw[len(codecs.BOM_UTF8) :]  # open_input skips it; a text given as bytes may still hold it
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        number = (line or 1) + raw.count(b"\n", 0, exc.start)
        raise GenError(
            f"not UTF-8 text: byte 0x{raw[exc.start]:02x} cannot be read; save it as UTF-8",
            file=path,
            record=f"line {number}",
            expected=expected,
        ) from None


def refuse_other_encodings(start: bytes, path: Path, expected: str) -> None:
    """Refuse a text whose byte-order mark says UTF-16 or UTF-32 (`start`: its first bytes)."""
    refused = next((name for mark, name in BOMS_REFUSED.items() if start.startswith(mark)), None)
    if refused:
        raise GenError(f"the file is {refused} text; save it as UTF-8", file=path, expected=expected)


def text_lines(path: Path, expected: str) -> Iterator[tuple[int, str]]:
    """(line number, text) of every line of the file, blank lines skipped; a line longer than
    max_record_bytes() is refused when its first max_record_bytes() + 1 bytes have been read."""
    limit = max_record_bytes()
    with open_input(path, expected) as handle:
        yield from lines_of(handle, path, expected, limit)


def lines_of(
    handle: IO[bytes], path: Path, expected: str, limit: int, first: int = 1, keep_blank: bool = False
) -> Iterator[tuple[int, str]]:
    """The numbered, decoded, non-blank lines of a binary handle (numbered from `first`), each at most `limit`
    bytes; blank ones too with `keep_blank` (a table's quoted cell may hold one)."""
    number = first - 1
    while raw := handle.readline(limit + 1):
        number += 1
        if len(raw) > limit and not raw.endswith(b"\n"):
            raise GenError(
                f"the line is longer than {size_text(limit)}",
                file=path,
                record=f"line {number}",
                expected=f"{expected}; a longer line needs {RECORD_LIMIT_VARIABLE} set higher",
            )
        if keep_blank or raw.strip():
            yield number, decode(raw, path, expected, number)


# JSON (its rules are gen/strict_json.py's; here, only where a broken text is named)


def json_problem(error: Exception) -> tuple[str, int | None]:
    """What is wrong with a JSON text, and its offset in the text (None where it is not known)."""
    if isinstance(error, strict_json.Broken):
        return error.reason, error.offset
    assert isinstance(error, json.JSONDecodeError)
    return f"not valid JSON ({error.msg})", error.pos


def json_error(path: Path, text: str, error: Exception, expected: str | None, record: str | None = None) -> GenError:
    """One message for a JSON text that is not accepted: what is wrong and where (record, line and column)."""
    reason, offset = json_problem(error)
    place = ", ".join(
        part for part in (record, strict_json.line_and_column(text, offset) if offset is not None else None) if part
    )
    return GenError(reason, file=path, record=place or None, expected=expected)


def read_json(path: Path, expected: str) -> Any:
    """A file that holds one JSON document, read whole (at most max_record_bytes())."""
    text = read_text(path, expected, max_record_bytes())
    try:
        return strict_json.loads(text)
    except (strict_json.Broken, json.JSONDecodeError) as exc:
        raise json_error(path, text, exc, expected) from None


def json_line(path: Path, text: str, number: int, expected: str | None) -> Any:
    """Line `number` of a JSON lines file, parsed; an error names the line and the column."""
    try:
        return strict_json.loads(text)
    except (strict_json.Broken, json.JSONDecodeError) as exc:
        reason, offset = json_problem(exc)
        where = f"line {number}" + (f", column {offset + 1}" if offset is not None else "")
        raise GenError(reason, file=path, record=where, expected=expected) from None


def json_lines(path: Path, expected: str) -> Iterator[tuple[int, Any]]:
    """(line number, value) of every non-blank line of a JSON lines file."""
    for number, text in text_lines(path, expected):
        yield number, json_line(path, text, number, expected)


# YAML


class YamlRefused(yaml.MarkedYAMLError):
    """A YAML document that parses but breaks one of gen's rules."""


MERGE_TAG = "tag:yaml.org,2002:merge"


class BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a key twice in one mapping and whole numbers too long to read."""

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            refuse_repeated_keys(self, node)
        return super().construct_mapping(node, deep)

    def construct_yaml_int(self, node: Any) -> int:
        digits = sum(ch.isdigit() for ch in str(node.value))
        if digits > MAX_YAML_DIGITS:
            raise YamlRefused(problem=f"a whole number of {digits:,} digits", problem_mark=node.start_mark, note=None)
        return super().construct_yaml_int(node)


BoundedLoader.add_constructor("tag:yaml.org,2002:int", BoundedLoader.construct_yaml_int)


def yaml_12_resolvers() -> dict[str, list[tuple[str, re.Pattern[str]]]]:
    """PyYAML reads plain words the YAML 1.1 way: `off`, `no`, `on`, `yes` become booleans (so
    `structured_output: off` arrived as False) and `1:30` becomes 90. A recipe is read the YAML 1.2 way instead:
    only true and false are booleans (a boolean option still takes yes/no/on/off, which its model reads), and
    a word with a colon is never a number."""
    resolvers: dict[str, list[tuple[str, re.Pattern[str]]]] = {}
    for first, entries in yaml.SafeLoader.yaml_implicit_resolvers.items():
        for tag, pattern in entries:
            if tag == BOOL_TAG:
                continue
            if tag in NUMBER_TAGS:
                pattern = re.compile("^(?!.*:)" + pattern.pattern[1:], pattern.flags)
            resolvers.setdefault(first, []).append((tag, pattern))
    for first in "tTfF":
        resolvers.setdefault(first, []).append((BOOL_TAG, re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")))
    return resolvers


BOOL_TAG = "tag:yaml.org,2002:bool"
NUMBER_TAGS = ("tag:yaml.org,2002:int", "tag:yaml.org,2002:float")
BoundedLoader.yaml_implicit_resolvers = yaml_12_resolvers()


def refuse_repeated_keys(loader: BoundedLoader, node: yaml.MappingNode) -> None:
    """Each key of the mapping as written (merged `<<` keys may be overridden: that is what merging is for)."""
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == MERGE_TAG or not isinstance(key_node, yaml.ScalarNode):
            continue
        key = loader.construct_object(key_node)
        if key in seen:
            raise YamlRefused(
                problem=f"the key {str(key)[:80]!r} appears twice in one mapping (YAML would keep only the last)",
                problem_mark=key_node.start_mark,
            )
        seen.add(key)


def check_nesting(text: str) -> None:
    """Refuse YAML nested past MAX_YAML_DEPTH before PyYAML's recursive composer builds it (it fails with
    RecursionError); the event parser walked here does not recurse."""
    depth = 0
    for event in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                raise YamlRefused(
                    problem=f"nested deeper than {MAX_YAML_DEPTH} lists or mappings",
                    problem_mark=event.start_mark,  # type: ignore[arg-type]  # libyaml's Mark has the same fields
                )
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def check_expansion(root: yaml.Node) -> None:
    """Refuse a document that stands for more than MAX_YAML_NODES values, each alias counted as the whole value
    it repeats, or that holds itself. Each node is sized once (aliases share their node), without recursion."""
    sizes: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    open_nodes: set[int] = set()
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = node_children(node)
        if children_done:
            open_nodes.discard(id(node))
            sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
            if sizes[id(node)] > MAX_YAML_NODES:
                raise YamlRefused(
                    problem=f"it stands for more than {MAX_YAML_NODES:,} values (an alias counts as all it repeats)",
                    problem_mark=node.start_mark,
                )
            continue
        if id(node) in open_nodes:
            raise YamlRefused(problem="an alias refers to a value that holds it", problem_mark=node.start_mark)
        open_nodes.add(id(node))  # open nodes are the path from the root to here: meeting one again is a loop
        stack.append((node, True))
        stack.extend((child, False) for child in children if id(child) not in sizes)


def node_children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_yaml(text: str, path: Path, expected: str | None = None) -> Any:
    """One YAML document from `text` (read from `path`), within the limits above; any problem is one GenError
    naming the file and the line."""
    try:
        check_nesting(text)
        loader = BoundedLoader(text)
        try:
            root = loader.get_single_node()
            if root is None:
                return None
            check_expansion(root)
            return loader.construct_document(root)
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        problem = getattr(exc, "problem", None) or str(exc)
        raise GenError(
            problem if isinstance(exc, YamlRefused) else f"not valid YAML: {problem}",
            file=path,
            record=f"line {mark.line + 1}, column {mark.column + 1}" if mark else None,
            expected=expected,
        ) from None


def read_yaml(path: Path, expected: str) -> Any:
    """A YAML file read and loaded within the limits."""
    return load_yaml(read_text(path, expected), path, expected)
