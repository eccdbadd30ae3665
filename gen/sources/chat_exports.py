"""Readers for the chat layouts people export or download, each record one conversation (or one session of one):

- `messages`: the Hugging Face chat layout, JSON lines or a JSON list of {"messages": [{"role", "content",
  "timestamp"?}], ...}; option `group` names a field whose equal values make the records sessions of one
  relationship, option `id` a field naming the conversation;
- `sharegpt`: {"id"?, "conversations": [{"from", "value"}]}, JSON lines or a JSON list;
- `chatgpt`: a ChatGPT data export's conversations.json, a list of conversations whose `mapping` is a tree of
  message nodes; the conversation is the current branch: from `current_node`, parent after parent, to the root.

Rules shared by the three: a system or tool message (role `system`, `tool`, `function`; ShareGPT's `system`),
a message whose text is empty, and a ChatGPT node without a message, with content other than text, or hidden
from the conversation are skipped: they are instructions and machinery, not what the two speakers said. The
speakers are the roles as written (`user`, `assistant`; ShareGPT's `human`, `gpt`). A message's time is a Unix
time (seconds, UTC) or a text time (as in chat_logs); from there gen/sources/messages.py applies the clock,
ordering, speaker and session rules of every message reader.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pydantic import Field

from gen.conversation import Conversation
from gen.errors import GenError
from gen.recipe import SourceSpec
from gen.sources.chat_logs import TimeReader
from gen.sources.messages import Rules, Said, conversations, from_unix
from gen.sources.registry import Records
from gen.validation import InputModel

SKIPPED_ROLES = frozenset({"system", "tool", "function", "developer"})
MESSAGES_EXPECTED = 'records of {"messages": [{"role": ..., "content": ..., "timestamp": ...}, ...]}'
SHAREGPT_EXPECTED = 'records of {"conversations": [{"from": ..., "value": ...}, ...]}'
CHATGPT_EXPECTED = "a ChatGPT export's conversations.json: a list of conversations with mapping and current_node"


class MessagesOptions(InputModel):
    group: str | None = Field(default=None, description="a field whose equal values make records one conversation")
    id: str | None = Field(default=None, description="a field naming the conversation (default: its place)")
    time_key: str = Field(default="timestamp", description="the key of a message's time")


def rules(origin: Any, spec: SourceSpec, prefix: str) -> Rules:
    return Rules(origin=origin, prefix=prefix, clock=spec.clock, break_minutes=None, source_format=prefix)


def when(value: Any, time_of: TimeReader, where: str, field: str) -> Any:
    """A time: None, a Unix time in seconds, or a text time."""
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        try:
            return from_unix(value)
        except OverflowError:
            raise GenError(
                f"{value} is not a Unix time gen can place",
                file=time_of.origin,
                record=where,
                field=field,
                expected="seconds since 1970 (UTC)",
            ) from None
    if isinstance(value, str):
        return time_of(value, where, field)
    raise GenError(
        f"got {type(value).__name__}",
        file=time_of.origin,
        record=where,
        field=field,
        expected="a Unix time (number) or a date and time (text)",
    )


def text_of(content: Any, origin: Any, where: str, field: str) -> str:
    """A message's text: a string, or the text parts of a list of parts ({"type": "text", "text": ...})."""
    if isinstance(content, str):
        return content.strip()
    if isinstance(content, list):
        parts = [p.get("text") if isinstance(p, dict) else p for p in content]
        return "\n".join(p.strip() for p in parts if isinstance(p, str) and p.strip())
    if content is None:
        return ""
    raise GenError(
        f"got {type(content).__name__}",
        file=origin,
        record=where,
        field=field,
        expected="text, or a list of text parts",
    )


def key_of(record: dict, name: str | None, where: str, origin: Any) -> str | None:
    if name is None:
        return None
    value = record.get(name)
    if isinstance(value, bool) or not isinstance(value, str | int) or str(value).strip() == "":
        raise GenError(
            "missing" if value is None else f"got {value!r}"[:80],
            file=origin,
            record=where,
            field=name,
            expected="a string or a whole number on every record",
        )
    return str(value).strip()


def turns_of(record: Any, field: str, origin: Any, where: str, expected: str) -> list:
    """The record's list of turns (`messages`, `conversations`), or one error naming the record."""
    if not isinstance(record, dict):
        raise GenError("a record is not a JSON object", file=origin, record=where, expected=expected)
    listed = record.get(field)
    if not isinstance(listed, list):
        raise GenError(
            "missing" if listed is None else f"got {type(listed).__name__}",
            file=origin,
            record=where,
            field=field,
            expected=expected,
        )
    return listed


def speaker_of(message: dict, field: str, origin: Any, place: str, expected: str) -> str:
    """A turn's speaker (its role), stripped, or one error naming the turn."""
    role = message.get(field)
    if not isinstance(role, str) or not role.strip():
        raise GenError(
            "missing" if role is None else f"got {role!r}"[:80],
            file=origin,
            record=place,
            field=field,
            expected=expected,
        )
    return role.strip()


def parse_messages(records: Records, origin: Any, spec: SourceSpec, options: MessagesOptions) -> Iterator[Conversation]:
    time_of = TimeReader(spec.dayfirst, origin)

    def said() -> Iterator[Said]:
        for where, record in records:
            listed = turns_of(record, "messages", origin, where, MESSAGES_EXPECTED)
            own = key_of(record, options.id, where, origin) or where
            conversation = key_of(record, options.group, where, origin) or own
            for number, message in enumerate(listed, start=1):
                place = f"{where}, message {number}"
                if not isinstance(message, dict):
                    raise GenError(
                        "a message is not an object",
                        file=origin,
                        record=place,
                        field="messages",
                        expected='{"role": ..., "content": ...}',
                    )
                role = speaker_of(message, "role", origin, place, "a role such as user or assistant")
                text = text_of(message.get("content"), origin, place, "content")
                if role in SKIPPED_ROLES or not text:
                    continue
                stamp = when(message.get(options.time_key), time_of, place, options.time_key)
                yield Said(conversation, role, text, stamp, own, place)

    yield from conversations(said(), rules(origin, spec, "messages"))


def parse_sharegpt(records: Records, origin: Any, spec: SourceSpec, options: Any) -> Iterator[Conversation]:
    def said() -> Iterator[Said]:
        for where, record in records:
            listed = turns_of(record, "conversations", origin, where, SHAREGPT_EXPECTED)
            conversation = key_of(record, "id", where, origin) if "id" in record else where
            for number, message in enumerate(listed, start=1):
                place = f"{where}, turn {number}"
                message = message if isinstance(message, dict) else {}
                role = speaker_of(message, "from", origin, place, "a speaker such as human or gpt")
                text = text_of(message.get("value"), origin, place, "value")
                if role in SKIPPED_ROLES or not text:
                    continue
                yield Said(str(conversation), role, text, None, None, place)

    yield from conversations(said(), rules(origin, spec, "sharegpt"))


def parse_chatgpt(records: Records, origin: Any, spec: SourceSpec, options: Any) -> Iterator[Conversation]:
    time_of = TimeReader(None, origin)

    def said() -> Iterator[Said]:
        for where, record in records:
            if not isinstance(record, dict):
                raise GenError(
                    "a conversation is not a JSON object", file=origin, record=where, expected=CHATGPT_EXPECTED
                )
            name = record.get("conversation_id") or record.get("id")
            conversation = str(name) if isinstance(name, str) and name.strip() else where
            for node_id, message in current_branch(record, origin, where):
                place = f"{where}, node {node_id}"
                kept = visible_text(message, origin, place)
                if kept is not None:
                    role, text = kept
                    yield Said(
                        conversation,
                        role,
                        text,
                        when(message.get("create_time"), time_of, place, "create_time"),
                        None,
                        place,
                    )

    yield from conversations(said(), rules(origin, spec, "chatgpt"))


def current_branch(record: dict, origin: Any, where: str) -> list[tuple[str, dict]]:
    """(node id, message) from the root to `current_node`, walking parents; a loop or a missing node is an error."""
    mapping, node_id = record.get("mapping"), record.get("current_node")
    if not isinstance(mapping, dict) or not isinstance(node_id, str):
        field = "mapping" if not isinstance(mapping, dict) else "current_node"
        raise GenError(
            "missing or not the right type", file=origin, record=where, field=field, expected=CHATGPT_EXPECTED
        )
    branch: list[tuple[str, dict]] = []
    seen: set[str] = set()
    current: Any = node_id
    while current is not None:
        node = mapping.get(current) if isinstance(current, str) else None
        if not isinstance(node, dict) or current in seen:
            why = f"node {current!r} is not in the mapping" if not isinstance(node, dict) else "parents loop"
            raise GenError(
                why,
                file=origin,
                record=f"{where}, node {current}",
                field="parent",
                expected="parents that lead from current_node to the root",
            )
        seen.add(current)
        if isinstance(node.get("message"), dict):
            branch.append((current, node["message"]))
        current = node.get("parent")
    return branch[::-1]


def visible_text(message: dict, origin: Any, place: str) -> tuple[str, str] | None:
    """(role, text) of a message the two speakers said; None for one that is skipped (see the module's rules)."""
    author = message.get("author")
    role = author.get("role") if isinstance(author, dict) else None
    content = message.get("content")
    metadata = message.get("metadata")
    if not isinstance(role, str) or role in SKIPPED_ROLES or not isinstance(content, dict):
        return None
    if isinstance(metadata, dict) and metadata.get("is_visually_hidden_from_conversation"):
        return None
    if content.get("content_type") not in ("text", "multimodal_text"):
        return None
    text = text_of(content.get("parts"), origin, place, "content.parts")
    return (role, text) if text else None
