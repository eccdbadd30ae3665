"""Source adapters: files (or Hugging Face datasets) → canonical conversations (gen/conversation.py).

The layout each format accepts is described in README.md; each adapter's module docstring gives the details."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Protocol, TypeVar

from gen.conversation import Conversation
from gen.errors import GenError
from gen.recipe import SourceSpec
from gen.sources import registry


def reads_own_logs(format: str) -> bool:
    """Whether a format declares that it reads people's own logs (`SourceFormat.personal`). A format no
    installed package registers (named in a run made where another reader was installed) counts as own logs:
    asking once too often before publishing is the safe side."""
    source = registry.formats().get(format)
    return True if source is None else source.personal


def read_source(spec: SourceSpec) -> Iterator[Conversation]:
    """The conversations of one source entry, one at a time as the file is read, through its format's reader
    (gen/sources/registry.py)."""
    source = registry.lookup(spec.format)
    options = registry.options_of(spec, spec.origin)
    origin: str | Path
    if spec.path is not None:
        origin, records = spec.path, source.read(spec.path, source.expected)
    else:  # SourceSpec holds exactly one of path and hf
        origin, records = f"hf:{spec.hf}", ((f"row {n}", row) for n, row in enumerate(load_hub_records(spec)))
    seen: set[str] = set()
    for conversation in source.parse(records, origin, spec, options):
        if conversation.conversation_id in seen:
            raise GenError(
                "duplicate conversation id",
                file=origin,
                record=conversation.conversation_id,
                expected="unique ids within a source",
            )
        seen.add(conversation.conversation_id)
        yield conversation


def load_hub_records(spec: SourceSpec) -> list[dict]:
    import datasets  # heavy import, only for Hub sources

    try:
        rows = datasets.load_dataset(spec.hf, spec.hf_config, split=spec.split or "train", revision=spec.revision)
    except Exception as exc:  # the Hub library raises many types; the user needs the name and the reason
        raise GenError(
            f"cannot load Hugging Face dataset: {type(exc).__name__}: {exc}",
            file=f"hf:{spec.hf}",
            field="hf",
            expected="a reachable dataset id (owner/name) with that configuration, split and revision",
        ) from None
    return [dict(row) for row in rows]


class Selectable(Protocol):
    """What selection reads of a conversation (a Conversation, or a stored conversation's Summary)."""

    @property
    def conversation_id(self) -> str: ...
    @property
    def session_count(self) -> int: ...
    @property
    def word_count(self) -> int: ...


AnyConversation = TypeVar("AnyConversation", bound=Selectable)


def select(conversations: Iterable[AnyConversation], spec: SourceSpec) -> list[AnyConversation]:
    """Apply `ids`, then `min_sessions`, then `longest`, then `limit`; the source order is kept."""
    chosen = list(conversations)
    if spec.ids:
        wanted = set(spec.ids)
        chosen = [c for c in chosen if c.conversation_id in wanted or c.conversation_id.split("/", 1)[1] in wanted]
        found = {c.conversation_id for c in chosen} | {c.conversation_id.split("/", 1)[1] for c in chosen}
        if missing := sorted(wanted - found):
            raise GenError(
                f"ids not found: {', '.join(missing)}",
                file=spec.origin,
                field="ids",
                expected="conversation ids present in the source",
            )
    if spec.min_sessions:
        chosen = [c for c in chosen if c.session_count >= spec.min_sessions]
    if spec.longest:
        keep = {id(c) for c in sorted(chosen, key=lambda c: -c.word_count)[: spec.longest]}
        chosen = [c for c in chosen if id(c) in keep]
    if spec.limit is not None:
        chosen = chosen[: spec.limit]
    return chosen
