"""Instances shaped like LongMemEval's longmemeval_s.json: one per question group, each with its whole
conversation as the haystack.

`haystack_sessions` holds every session (padding included) as a list of turns; LongMemEval's sessions are a
user talking to an assistant, ours two people talking, so both speakers are `user` turns whose content starts
with the speaker's name ("Maya: ..."). The relevant responses carry `has_answer: true` (LongMemEval's
turn-level evidence), and `answer_session_ids` lists the sessions that hold them. `question_date` is the
conversation's "now"; `answer` is "" where the config has no gold answer (retrieval only).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gen.export.harness.dates import longmemeval_style
from gen.export.harness.questions import ExportQuestion, question_text, relevant_by_session
from gen.export.harness.source import Conversation
from gen.templating import render

QUESTION_TYPE = "temporal-reasoning"
TURN_TEMPLATE = "harness/turn.j2"


def session_id(conversation: Conversation, session: int) -> str:
    return f"{conversation.conversation_id}/session_{session}"


def haystack(conversation: Conversation) -> list[list[dict[str, Any]]]:
    """The conversation's sessions as LongMemEval turns, without evidence marks (shared by its instances)."""
    return [
        [
            {
                "role": "user",
                "content": render(
                    TURN_TEMPLATE,
                    speaker=response["speaker"],
                    text=response["text"],
                    image_caption=response.get("image_caption") or "",
                ).strip(),
            }
            for response in responses
        ]
        for responses in conversation.sessions()
    ]


def instances(conversations: dict[str, Conversation], questions: list[ExportQuestion]) -> Iterator[dict[str, Any]]:
    """One instance per question (the caller passes one wording per group)."""
    haystacks: dict[str, list[list[dict[str, Any]]]] = {}
    for question in questions:
        conversation = conversations[question.conversation_id]
        if question.conversation_id not in haystacks:
            haystacks[question.conversation_id] = haystack(conversation)
        yield instance(question, conversation, haystacks[question.conversation_id])


def instance(question: ExportQuestion, conversation: Conversation, sessions: list[list[dict[str, Any]]]):
    places = relevant_by_session(question, conversation)
    marked = [mark(turns, places.get(number, [])) for number, turns in enumerate(sessions, start=1)]
    return {
        "question_id": question.question_id,
        "question_type": QUESTION_TYPE,
        "question": question_text(question, conversation, ""),  # "now" is question_date
        "answer": question.answer if question.answer is not None else "",
        "question_date": longmemeval_style(conversation.now),
        "haystack_session_ids": [session_id(conversation, number) for number in range(1, len(sessions) + 1)],
        "haystack_dates": [longmemeval_style(start) for start in conversation.session_starts],
        "haystack_sessions": marked,
        "answer_session_ids": [session_id(conversation, number) for number in sorted(places)],
    }


def mark(turns: list[dict[str, Any]], positions: list[int]) -> list[dict[str, Any]]:
    """The session's turns with has_answer on the relevant ones (a copy only where something is marked)."""
    if not positions:
        return turns
    marked = list(turns)
    for position in positions:
        marked[position] = {**turns[position], "has_answer": True}
    return marked
