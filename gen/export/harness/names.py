"""Conversation ids as names a harness can use as file names and id parts.

gen's ids hold a slash (`locomo/conv-26`), and harnesses build file paths from ids (LoCoMo's RAG code names its
database file after `sample_id`; BEIR needs a folder per conversation). Each export writes the names it used
into gen-export.json (`conversations`: name → conversation id), so results map back."""

from __future__ import annotations

import re

from gen.hashing import stable_id

UNSAFE = re.compile(r"[^A-Za-z0-9.-]+")


def safe_names(conversation_ids: list[str], avoid: str | None = None) -> dict[str, str]:
    """A file-system-safe name per conversation ("locomo/sample-1" → "locomo-sample-1"), made of letters, digits,
    '.' and '-' only (so '_' can join it to other id parts); `avoid` is a word the name must not contain
    (LongMemEval reads "answer" in an id as "holds evidence"). Two ids that would share a name both get a short
    hash of the id appended."""
    plain = {}
    for conversation_id in conversation_ids:
        name = UNSAFE.sub("-", conversation_id).strip("-.") or "conversation"
        if avoid:
            name = re.sub(avoid, lambda found: "-".join(found.group()), name, flags=re.IGNORECASE)
        plain[conversation_id] = name
    taken: dict[str, int] = {}
    for name in plain.values():
        taken[name] = taken.get(name, 0) + 1
    return {
        conversation_id: name if taken[name] == 1 else f"{name}-{stable_id(conversation_id, 8)}"
        for conversation_id, name in plain.items()
    }
