"""Source adapters: files (or Hugging Face datasets) → canonical conversations (gen/conversation.py).

The layout each format accepts is described in README.md; each adapter's module docstring gives the details."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol, TypeVar

from gen.conversation import Conversation
from gen.errors import GenError
from gen.recipe import SourceSpec
from gen.sources import cc, chat_logs, locomo, msc
from gen.sources._io import read_json, stream_records

# format → (what a file must hold, how to read it, how to parse the records)
Parser = Callable[[Any, Any, SourceSpec], Iterator[Conversation]]
Reader = Callable[[Path, str], Any]
FORMATS: dict[str, tuple[str, Reader, Parser]] = {
    "locomo": (
        locomo.EXPECTED_FILE,
        stream_records,
        lambda data, origin, spec: locomo.parse(data, origin, Path(str(origin)).stem),
    ),
    "msc": (
        "ParlAI MSC session records as JSON lines",
        stream_records,
        lambda data, origin, spec: msc.parse(data, origin),
    ),
    "msc_self_instruct": (
        "MSC-Self-Instruct records as JSON lines",
        stream_records,
        lambda data, origin, spec: msc.parse_self_instruct(data, origin),
    ),
    "msc_personas": (
        '{"train": [{"Speaker 1": [...], "Speaker 2": [...]}, ...], ...}',
        read_json,
        lambda data, origin, spec: msc.parse_personas(data, origin),
    ),
    "cc": (
        "Conversation Chronicles episodes (JSON lines or a JSON list)",
        stream_records,
        lambda data, origin, spec: cc.parse(
            data, origin, interval_phrases=spec.interval_phrases, default_interval=spec.default_interval
        ),
    ),
    "chat_logs": (
        chat_logs.EXPECTED,
        stream_records,
        lambda data, origin, spec: chat_logs.parse(
            data, origin, spec.dayfirst, spec.session_break_minutes or chat_logs.DEFAULT_BREAK_MINUTES
        ),
    ),
}


# format → the module of its reader, which declares `PERSONAL = True` when the format holds people's own logs
READERS: dict[str, ModuleType] = {
    "locomo": locomo,
    "msc": msc,
    "msc_self_instruct": msc,
    "msc_personas": msc,
    "cc": cc,
    "chat_logs": chat_logs,
}


def reads_own_logs(format: str) -> bool:
    """Whether a format's reader declares that it reads people's own logs (`PERSONAL = True`). A format this
    gen has no reader for (named in a run made by a gen with more readers) counts as own logs: asking once too
    often before publishing is the safe side."""
    reader = READERS.get(format)
    return True if reader is None else bool(getattr(reader, "PERSONAL", False))


def read_source(spec: SourceSpec) -> Iterator[Conversation]:
    """The conversations of one source entry, one at a time as the file is read (LoCoMo lists are streamed)."""
    expected, read, parse = FORMATS[spec.format]
    origin: str | Path
    if spec.path is not None:
        origin, data = spec.path, read(spec.path, expected)
    else:  # SourceSpec holds exactly one of path and hf
        origin, data = f"hf:{spec.hf}", load_hub_records(spec)
    seen: set[str] = set()
    for conversation in parse(data, origin, spec):
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
