"""The source registry: format name → `SourceFormat`, found through the `gen.sources` entry point group
(gen/plugins.py), where gen's own readers are registered exactly as an outside package registers its
(docs/adding-a-source.md). A recipe's `format` is checked against the group's names when the recipe is read
(gen/recipe.py, with "did you mean"), without importing any reader; a format's `options:` are checked by
gen/recipe.py (`check_source_options`) against the reader's own model, so a bad option stops `gen validate`
before any file is read.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from gen.conversation import Conversation
from gen.plugins import SOURCES, registered
from gen.recipe import SourceSpec
from gen.sources._io import numbered_records
from gen.validation import InputModel, validate_model

Records = Iterable[tuple[str, Any]]  # (place, record): "line 3", "item 0", "row 7"...


class NoOptions(InputModel):
    """The options of a format that takes none: any key given is refused, naming it."""


@dataclass(frozen=True)
class SourceFormat:
    """How to read one format.

    `expected` says what a file must hold (it ends every error about the file). `read` turns a local file into
    (place, record) pairs, streamed (default: JSON lines or a JSON list, gen/sources/_io.py). `parse` turns those
    records into conversations, one at a time; it is given the records, the origin to name in errors (the path,
    or hf:owner/name), the source entry and the entry's `options:` validated by `Options`. `personal` says the
    format holds people's own conversations (exports of their chats), not a published corpus: the card says so
    and `gen push` asks for consent (gen/personal.py)."""

    expected: str
    parse: Callable[[Records, Any, SourceSpec, Any], Iterator[Conversation]]
    read: Callable[[Path, str], Records] = numbered_records
    Options: type[BaseModel] = NoOptions
    personal: bool = False


def discover() -> dict[str, SourceFormat]:
    # the entry point's name is the format's (a SourceFormat has none of its own)
    expected = "a gen.sources.registry.SourceFormat"
    return registered(SOURCES, "source format", expected, lambda item: isinstance(item, SourceFormat), None)


_FORMATS: dict[str, SourceFormat] = {}


def formats() -> dict[str, SourceFormat]:
    """Every installed format, loaded at first use."""
    if not _FORMATS:
        _FORMATS.update(discover())
    return _FORMATS


def lookup(name: str) -> SourceFormat:
    # the recipe checked the name against the entry points already: a miss here is a plugin that failed to load
    return formats()[name]


def options_of(spec: SourceSpec, file: Any, index: int | None = None) -> Any:
    """The entry's `options:` validated by its format's model; errors name sources[index].options.<key>."""
    model = lookup(spec.format).Options
    prefix = ("sources", index, "options") if index is not None else ("options",)
    return validate_model(model, spec.options or {}, file, prefix=prefix)
