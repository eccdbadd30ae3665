"""BEIR folders (corpus.jsonl, queries.jsonl, qrels/test.tsv), one per conversation.

A question asks about its own conversation ("what did we discuss in session 1?" means these two people's session 1),
so each conversation is its own retrieval collection, as BEIR's CQADupStack is split into sub-forums: load each
folder, score it, and average. A document is one response: `_id` is its response_index (so a BEIR run maps straight
back to `gen eval` predictions), `title` says when it was said and in which session, `text` who said what. A query
is the question with "now" written into it; every relevant response is a qrel of score 1; a query's `metadata` holds
its `test`, so results can be split by test. A conversation without questions in the config gets no folder (BEIR's
loader cannot open a folder with no queries)."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import orjson

from gen.export.harness.dates import beir_style
from gen.export.harness.formats import ConfigToWrite, ExportFormat, ResultsReader, Written
from gen.export.harness.questions import ExportQuestion, question_text
from gen.export.harness.results import read_beir
from gen.export.harness.source import Conversation
from gen.templating import render

SPLIT = "test"
TITLE_TEMPLATE = "harness/beir_title.j2"
TURN_TEMPLATE = "harness/turn.j2"


def write_collections(
    root: Path, conversations: dict[str, Conversation], questions: list[ExportQuestion], names: dict[str, str]
) -> dict[str, str]:
    """Write one folder per conversation that has questions under `root`; returns conversation id → folder name."""
    by_conversation: dict[str, list[ExportQuestion]] = {}
    for question in questions:
        by_conversation.setdefault(question.conversation_id, []).append(question)
    root.mkdir()  # even with no questions, so the manifest's path exists
    written = {}
    for conversation_id, asked in by_conversation.items():
        folder = root / names[conversation_id]
        write_collection(folder, conversations[conversation_id], asked)
        written[conversation_id] = names[conversation_id]
    return written


def write_collection(folder: Path, conversation: Conversation, questions: list[ExportQuestion]) -> None:
    (folder / "qrels").mkdir(parents=True)
    with (folder / "corpus.jsonl").open("wb") as corpus:
        for response in conversation.responses:
            corpus.write(orjson.dumps(document(response)) + b"\n")
    now = beir_style(conversation.now)
    with (folder / "queries.jsonl").open("wb") as queries:
        for question in questions:
            text = question_text(question, conversation, now)
            query = {"_id": question.question_id, "text": text, "metadata": {"test": question.test}}
            queries.write(orjson.dumps(query) + b"\n")
    lines = ["query-id\tcorpus-id\tscore"]
    lines += [f"{question.question_id}\t{index}\t1" for question in questions for index in question.relevant]
    (folder / "qrels" / f"{SPLIT}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")


def document(response: dict) -> dict[str, str]:
    when = beir_style(datetime.fromisoformat(response["timestamp"]))
    title = render(TITLE_TEMPLATE, when=when, session=response["session_index"]).strip()
    text = render(
        TURN_TEMPLATE,
        speaker=response["speaker"],
        text=response["text"],
        image_caption=response.get("image_caption") or "",
    ).strip()
    return {"_id": str(response["response_index"]), "title": title, "text": text}


def write(job: ConfigToWrite) -> Written:
    """`<config>/<conversation>/`: one BEIR collection per conversation the config asks about."""
    folders = write_collections(job.folder / job.config, job.source.conversations, job.questions, job.names)
    return Written.of(job, f"{job.config}/", job.questions, len(folders), folders=folders)


FORMAT = ExportFormat(
    name="beir",
    help="retrieval folders: corpus, queries and qrels per conversation",
    write=write,
    results=ResultsReader(read_beir, help="a run dict as JSON, or a TREC run file", needs_export=False),
)
