"""What a product hands the engine (:class:`Task`) and gets back (:class:`Outcome`), plus prompt helpers."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gen.errors import GenError
from gen.llm.structured import Parser
from gen.templating import INSTALLED, Templates

__all__ = ["Outcome", "Task", "estimate_input_tokens", "normalize_messages", "render_messages", "split_messages"]

ROLES = ("system", "developer", "user", "assistant")
# a role tag ends its line; it must also start one (role_parts checks that): a pattern that starts with the
# literal "<<" is searched for ten times faster than one anchored at every line start
_ROLE_TAG = re.compile(r"<<(system|developer|user|assistant)>>[ \t]*$", re.M)


@dataclass(frozen=True)
class Task:
    """One LLM call (plus, if its reply does not parse, one correction round).

    ``item_id``: the product's id of the record being built (appears in rejects and errors).
    ``endpoint``: a name from the recipe's ``llm:`` section.
    ``messages``: a list of ``{"role", "content"}`` dicts, or one string (a single user message);
    :func:`render_messages` builds them from a template.
    ``parser``: ``None`` (the text is the value), a pydantic model class, or a function ``text -> value``
    that raises ``ValueError`` with a reason.
    ``sample``: 0, 1, 2... for several independent generations of the same prompt (enters the cache key;
    with a ``seed`` configured, sample ``k`` is sent with ``seed + k``).
    ``logprobs``: how many alternatives per reply token to ask log-probabilities for (0: none); the server's
    ``logprobs`` object comes back, cached with the reply, in ``Outcome.logprobs``.
    ``max_tokens``: this call's own output cap, over the endpoint's; a reply that reaches it is complete (the
    task wanted no more), so it is parsed and cached rather than rejected as truncated.
    ``score_text``: instead of a chat, send the one user message as a plain prompt to ``/completions`` with
    ``echo``, so the log-probabilities cover the text's own tokens (a language model's score of a text).
    """

    item_id: str
    endpoint: str
    messages: Sequence[Mapping[str, Any]] | str
    parser: Parser = None
    sample: int = 0
    logprobs: int = 0
    max_tokens: int | None = None
    score_text: bool = False


@dataclass
class Outcome:
    """The result of a task, in the same order as the tasks given to ``run_step``.

    ``ok`` and ``value`` (the parsed value) — or ``ok=False`` and ``reason``; ``text`` is the raw reply (the
    corrected one when a correction round was needed); ``cached`` is True when no call was made;
    ``corrected`` when the correction round produced the value; ``kind`` classifies a failure
    (``parse``, ``truncated``, ``request_failed``, ``empty`` (no text, e.g. a refusal), ``not_cached`` in plan mode).
    """

    task: Task
    ok: bool
    value: Any = None
    text: str | None = None
    reason: str | None = None
    kind: str | None = None
    cached: bool = False
    corrected: bool = False
    logprobs: Any = None  # the server's logprobs object of the reply, when the task asked for them

    @property
    def item_id(self) -> str:
        return self.task.item_id

    @classmethod
    def failed(cls, task: Task, kind: str, reason: str, text: str | None, cached: bool = False) -> Outcome:
        return cls(task, ok=False, text=text, reason=reason, kind=kind, cached=cached)


def split_messages(text: str, source: str = "prompt") -> list[dict[str, str]]:
    """Split rendered text on lines ``<<system>>``, ``<<user>>``, ``<<assistant>>`` (``<<developer>>``).

    Text without any such line is one user message. Each message's content is stripped of surrounding
    whitespace.
    """
    parts = role_parts(text)
    if len(parts) == 1:
        content = text.strip()
        if not content:
            raise GenError("the prompt rendered to empty text", file=source)
        return [{"role": "user", "content": content}]
    if parts[0].strip():
        raise GenError(
            "text before the first role line",
            file=source,
            expected="the prompt to start with a line <<system>> or <<user>>",
        )
    messages = []
    for role, content in zip(parts[1::2], parts[2::2]):
        content = content.strip()
        if not content:
            raise GenError(f"the <<{role}>> message is empty", file=source)
        messages.append({"role": role, "content": content})
    return messages


def role_parts(text: str) -> list[str]:
    """[text before the first role line, role, its text, role, its text, ...]: the text split on the lines that
    hold only a role tag, like re.split with the tag's role captured."""
    parts, start = [], 0
    for found in _ROLE_TAG.finditer(text):
        at = found.start()
        if at and text[at - 1] != "\n":  # a tag inside a line is text
            continue
        parts += [text[start:at], found[1]]
        start = found.end()
    parts.append(text[start:])
    return parts


def render_messages(template: str, templates: Templates = INSTALLED, **variables: Any) -> list[dict[str, str]]:
    """Render a prompt template into chat messages (see :func:`split_messages`): from `templates`, a recipe's
    (gen/templating.py's Templates), else gen's and plugins' alone."""
    return split_messages(templates.render(template, **variables), source=template)


def normalize_messages(messages: Sequence[Mapping[str, Any]] | str, item_id: str = "") -> list[dict[str, Any]]:
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    result = []
    for message in messages:
        if not isinstance(message, Mapping) or message.get("role") not in ROLES or "content" not in message:
            raise GenError(
                "a task message is not a {role, content} mapping",
                record=f"item {item_id}",
                field="messages",
                expected=f"role one of {', '.join(ROLES)}",
            )
        result.append(dict(message))
    if not result:
        raise GenError("a task has no messages", record=f"item {item_id}", field="messages")
    return result


def _content_chars(content: Any) -> int:
    if isinstance(content, str):
        return len(content)
    if isinstance(content, list):
        return sum(len(part.get("text", "")) for part in content if isinstance(part, Mapping))
    return 0


def estimate_input_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    """About 4 characters per token, plus 4 tokens per message and 3 for the reply priming."""
    return sum(math.ceil(_content_chars(m.get("content")) / 4) + 4 for m in messages) + 3
