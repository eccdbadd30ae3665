"""Samples shaped like LoCoMo's locomo10.json, so its loaders read them unchanged.

Each conversation is one sample: `sample_id` (the conversation's name from safe_names: LoCoMo's RAG code makes a
file name of it; gen-export.json maps it back), `conversation` with `speaker_a`, `speaker_b` and
`session_N_date_time` / `session_N` pairs (the padding session included, numbered on), turns `{speaker, dia_id,
text}` (plus `blip_caption` for a response that shared an image, as LoCoMo's image turns have), and `qa`: one entry
per question with `question` ("now" written into it), `answer` (the gold answer, a date written as LoCoMo's
own answers write one, "7 May 2023"; or "" where the config has none: LoCoMo's QA scorer reads the key
unconditionally), `evidence` (the relevant responses' dia_ids),
`category` 2 (LoCoMo's temporal category: its data asks "When did..." under 2, and its QA scorer takes the
answer F1 of 2 unsplit) and `question_id` (gen's id, which LoCoMo's code carries through to its
output, so results map back). A question whose gold answer abstains is LoCoMo's adversarial category 5 instead, shaped
as locomo10.json's own category-5 entries: no `answer` (LoCoMo's QA scorer reads none for them and counts a
prediction right when it says "not mentioned" or "no information available"), and `adversarial_answer`, the
tempting wrong option its loaders offer beside "Not mentioned in the conversation": gen has no false premise to
offer, so it is "". LoCoMo's model-written annotations (event_summary, observation, session_summary) have
no counterpart here and are left out rather than faked."""

from __future__ import annotations

from typing import Any

from gen.export.harness.dates import locomo_answer_date, locomo_style
from gen.export.harness.formats import ConfigToWrite, ExportFormat, ResultsReader, Written, write_json
from gen.export.harness.questions import ExportQuestion, gold_answer, question_text, relevant_by_session
from gen.export.harness.results import read_locomo
from gen.export.harness.source import Conversation

TEMPORAL_CATEGORY = 2
ADVERSARIAL_CATEGORY = 5  # LoCoMo's unanswerable questions


def dia_id(session: int, position: int) -> str:
    """LoCoMo's turn id: "D<session>:<turn>", both counted from 1."""
    return f"D{session}:{position + 1}"


def samples(
    conversations: dict[str, Conversation], questions: list[ExportQuestion], names: dict[str, str]
) -> list[dict[str, Any]]:
    by_conversation: dict[str, list[ExportQuestion]] = {}
    for question in questions:
        by_conversation.setdefault(question.conversation_id, []).append(question)
    return [
        sample(conversation, by_conversation.get(conversation_id, []), names[conversation_id])
        for conversation_id, conversation in conversations.items()
    ]


def sample(conversation: Conversation, questions: list[ExportQuestion], name: str) -> dict[str, Any]:
    # LoCoMo's key order: qa first, then the conversation, then the id
    return {
        "qa": [qa_entry(question, conversation) for question in questions],
        "conversation": conversation_block(conversation),
        "sample_id": name,
    }


def conversation_block(conversation: Conversation) -> dict[str, Any]:
    block: dict[str, Any] = {"speaker_a": conversation.speaker_a, "speaker_b": conversation.speaker_b}
    for number, (start, responses) in enumerate(zip(conversation.session_starts, conversation.sessions()), start=1):
        block[f"session_{number}_date_time"] = locomo_style(start)
        block[f"session_{number}"] = [turn(number, position, response) for position, response in enumerate(responses)]
    return block


def turn(session: int, position: int, response: dict[str, Any]) -> dict[str, Any]:
    entry = {"speaker": response["speaker"], "dia_id": dia_id(session, position), "text": response["text"]}
    if response.get("image_caption"):
        entry["blip_caption"] = response["image_caption"]
    return entry


def qa_entry(question: ExportQuestion, conversation: Conversation) -> dict[str, Any]:
    """A qa entry in locomo10.json's key order; an abstention as its category-5 entries are (module docstring)."""
    entry: dict[str, Any] = {"question": question_text(question, conversation, locomo_style(conversation.now))}
    if not question.abstains:
        entry["answer"] = gold_answer(question, locomo_answer_date)
    places = relevant_by_session(question, conversation)
    entry["evidence"] = [dia_id(session, position) for session in sorted(places) for position in places[session]]
    if question.abstains:
        entry["category"] = ADVERSARIAL_CATEGORY
        entry["adversarial_answer"] = ""
    else:
        entry["category"] = TEMPORAL_CATEGORY
    entry["question_id"] = question.question_id
    return entry


def write(job: ConfigToWrite) -> Written:
    """`<config>.json`: one sample per conversation, those without questions of the config included."""
    data = samples(job.source.conversations, job.questions, job.names)
    write_json(job.folder / f"{job.config}.json", data)
    return Written.of(job, f"{job.config}.json", job.questions, len(data))


FORMAT = ExportFormat(
    name="locomo",
    help="locomo10.json samples",
    write=write,
    results=ResultsReader(read_locomo, help="the QA evaluation's output with RAG"),
)
