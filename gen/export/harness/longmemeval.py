"""Instances shaped like LongMemEval's longmemeval_s.json: one per question group, each with its whole
conversation as the haystack.

`haystack_sessions` holds every session (padding included) as a list of turns; LongMemEval's sessions are a
user talking to an assistant, ours two people talking, so both speakers are `user` turns whose content starts
with the speaker's name ("Maya: ..."). LongMemEval's retrieval code knows evidence by its id alone: a session
whose id contains "answer" holds evidence, and at turn level a turn's id is `<session id>_<turn number>`, kept
as gold only where the turn has `has_answer: true`. So, per instance, a session holding a relevant response is
named `answer_<conversation>_s<N>` and the others `<conversation>_s<N>` (the conversation's name never contains
"answer"), and every turn of an evidence session carries `has_answer` true or false. `answer_session_ids`
lists the evidence sessions; `question_date` is the conversation's "now"; `answer` is the gold answer (a date in
LongMemEval's style, "2023/05/20 (Sat)"), or "" where the config has no gold answer (retrieval only);
`question_type` is "temporal-reasoning", the type LongMemEval's judge asks to forgive off-by-one day counts.

LongMemEval knows an abstention question by its id alone: evaluate_qa.py judges a question whose id contains
"_abs" with its prompt for unanswerable questions, reading `answer` as the explanation. So a question whose gold
answer abstains is exported as `<gen id>_abs`, and "_abs" inside any other id is written "_Abs" (a time+content
question's id holds the conversation's id, which may contain it), so no other question is judged that way.
gen-export.json maps each id written differently back to gen's (`harness_ids`), and `gen import-predictions`
reads results through that map.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from gen.errors import GenError
from gen.export.harness.dates import longmemeval_answer_date, longmemeval_style
from gen.export.harness.formats import ConfigToWrite, ExportFormat, ResultsReader, Written, write_json_list
from gen.export.harness.questions import ExportQuestion, gold_answer, one_per_group, question_text, relevant_by_session
from gen.export.harness.results import read_longmemeval
from gen.export.harness.source import Conversation
from gen.templating import render

QUESTION_TYPE = "temporal-reasoning"
TURN_TEMPLATE = "harness/turn.j2"


EVIDENCE = "answer"  # the word LongMemEval's retrieval code looks for in a session's id
ABSTENTION = "_abs"  # what evaluate_qa.py looks for in a question's id
NOT_ABSTENTION = "_Abs"  # "_abs" inside an id of a question that does not abstain, written so it is not read as one


def harness_id(question: ExportQuestion) -> str:
    """The question's id in a LongMemEval export: the one place the `_abs` convention is applied, so every
    instance and the manifest's map back agree. gen's id with "_abs" written "_Abs", then "_abs" appended for a
    question whose gold answer abstains."""
    plain = question.question_id.replace(ABSTENTION, NOT_ABSTENTION)
    return plain + ABSTENTION if question.abstains else plain


def session_id(name: str, session: int, evidence: bool) -> str:
    return f"{EVIDENCE}_{name}_s{session}" if evidence else f"{name}_s{session}"


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


def instances(
    conversations: dict[str, Conversation], questions: list[ExportQuestion], names: dict[str, str]
) -> Iterator[dict[str, Any]]:
    """One instance per question (the caller passes one wording per group); `names` from safe_names."""
    haystacks: dict[str, list[list[dict[str, Any]]]] = {}
    for question in questions:
        conversation = conversations[question.conversation_id]
        if question.conversation_id not in haystacks:
            haystacks[question.conversation_id] = haystack(conversation)
        yield instance(question, conversation, haystacks[question.conversation_id], names[question.conversation_id])


def instance(
    question: ExportQuestion, conversation: Conversation, sessions: list[list[dict[str, Any]]], name: str
) -> dict[str, Any]:
    places = relevant_by_session(question, conversation)
    marked = [mark(turns, places[number]) if number in places else turns for number, turns in enumerate(sessions, 1)]
    ids = [session_id(name, number, number in places) for number in range(1, len(sessions) + 1)]
    return {
        "question_id": harness_id(question),
        "question_type": QUESTION_TYPE,
        "question": question_text(question, conversation, ""),  # "now" is question_date
        "answer": gold_answer(question, longmemeval_answer_date),
        "question_date": longmemeval_style(conversation.now),
        "haystack_session_ids": ids,
        "haystack_dates": [longmemeval_style(start) for start in conversation.session_starts],
        "haystack_sessions": marked,
        "answer_session_ids": [ids[number - 1] for number in sorted(places)],
    }


def mark(turns: list[dict[str, Any]], positions: list[int]) -> list[dict[str, Any]]:
    """An evidence session's turns, each with has_answer: true on the relevant ones, false on the others."""
    relevant = set(positions)
    return [{**turn, "has_answer": position in relevant} for position, turn in enumerate(turns)]


def write(job: ConfigToWrite) -> Written:
    """`<config>.json`: one instance per base question, in one wording chosen by the recipe's seed."""
    questions = one_per_group(job.questions, job.source.seed)
    renamed = renamed_ids(questions, job)
    write_json_list(job.folder / f"{job.config}.json", instances(job.source.conversations, questions, job.names))
    asked = len({question.conversation_id for question in job.questions})
    return Written.of(job, f"{job.config}.json", questions, asked, harness_ids=renamed)


def renamed_ids(questions: list[ExportQuestion], job: ConfigToWrite) -> dict[str, str]:
    """Exported id -> gen's id, for the ids harness_id writes differently; two questions that would share an
    exported id (gen ids differing only in "_abs" against "_Abs") are refused, as results could not be told apart."""
    seen: dict[str, str] = {}
    for question in questions:
        exported = harness_id(question)
        if exported in seen:
            raise GenError(
                f"questions {seen[exported]!r} and {question.question_id!r} would both be {exported!r} in LongMemEval",
                file=job.source.dataset.folder,
                record=f"config {job.config}",
                field="question_id",
                expected='question ids that differ in more than "_abs" against "_Abs"',
            )
        seen[exported] = question.question_id
    return {exported: gen_id for exported, gen_id in seen.items() if exported != gen_id}


FORMAT = ExportFormat(
    name="longmemeval",
    help="instances shaped like longmemeval_s.json",
    write=write,
    results=ResultsReader(
        read_longmemeval,
        help="run_retrieval.py's retrieval log",
        after="score them with: gen eval DATASET --predictions {output} --questions-from {export} "
        "(the export keeps one wording per base question)",
    ),
    avoid_in_names=EVIDENCE,
)
