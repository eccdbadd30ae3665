"""qa_lines: an export format from outside gen (the example of docs/harness-exports.md, "Adding a format").

Per question config, `<config>.jsonl`: one line per question with the conversation's name in the export, when
the question is asked, the question and the relevant response indices. A harness that ranks responses writes
back one line per question, `{"id": ..., "ranked": [response index, ...]}`, which `gen import-predictions
--format qa_lines` reads into gen's predictions; the ids are gen's own, so no export folder is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from gen import reading
from gen.errors import GenError
from gen.export.harness.formats import ConfigToWrite, ExportFormat, ResultsReader, Written
from gen.jsonl import encode_lines

RESULT_LINE = '{"id": "<question id>", "ranked": [<response index>, ...]}'


def write(job: ConfigToWrite) -> Written:
    conversations = job.source.conversations
    lines = [
        {
            "id": question.question_id,
            "conversation": job.names[question.conversation_id],
            "now": conversations[question.conversation_id].now.isoformat(),
            "question": question.question,
            "relevant": question.relevant,
        }
        for question in job.questions
    ]
    (job.folder / f"{job.config}.jsonl").write_bytes(encode_lines(lines))
    asked = len({question.conversation_id for question in job.questions})
    return Written.of(job, f"{job.config}.jsonl", job.questions, asked)


def read(results: Path, export: Path | None, key: str | None) -> Iterator[tuple[str, list[int]]]:
    for number, line in reading.json_lines(results, RESULT_LINE):
        ranked = line.get("ranked") if isinstance(line, dict) else None
        if not (isinstance(line, dict) and isinstance(line.get("id"), str) and isinstance(ranked, list)):
            raise GenError("not a qa_lines result", file=results, record=f"line {number}", expected=RESULT_LINE)
        if not all(isinstance(index, int) and not isinstance(index, bool) for index in ranked):
            raise GenError("a ranked entry is not a response index", file=results, record=f"line {number}")
        yield line["id"], ranked


QA_LINES = ExportFormat(
    name="qa_lines",
    help="one JSON line per question: conversation, now, question, relevant responses",
    write=write,
    results=ResultsReader(read, help='JSON lines {"id", "ranked"}', needs_export=False),
)
