"""What a question of a config becomes in a harness: its text (with "now" written in), its evidence and its
gold answer, and the one wording per group that LongMemEval's one-instance-per-question layout keeps."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from gen.errors import GenError
from gen.eval.dataset import GoldAnswers, Located, Question, require
from gen.export.harness.source import Conversation, Source
from gen.hashing import stable_id
from gen.templating import render

QUESTION_TEMPLATE = "harness/question.j2"


@dataclass
class ExportQuestion:
    config: str
    question_id: str
    group: str  # the base question (group_id); a config without groups has one question per group
    test: str  # what gen eval splits scores by (time queries' test, time+content questions' reference_kind)
    conversation_id: str
    relevant: list[int]  # sorted response indices, as in the record
    question: str  # the question, or for a dialogue its last utterance
    dialogue: list[dict[str, str]]  # the whole dialogue ([] for a plain question)
    # The gold answer where the product declared one (gen/eval/dataset.py:GoldAnswers): a field of the record, or
    # for the time queries the base question's answer in `gold_answers` when the run wrote it. Without one a
    # question scores retrieval only (evidence, has_answer turns, qrels).
    answer: str | None
    asked_by_speaker_a: bool
    # A gold answer that is a date, from the record's structured answer (`<answer_field>_value`, e.g. temporal
    # reasoning's answer_value.date): each harness writes it in its own date style.
    answer_date: date | None = None  # "what did we discuss?" is asked by speaker_a; other questions name their speakers
    # The gold answer says the conversations hold nothing of what is asked (gen/eval/dataset.py:GoldAnswers.abstains,
    # the record's `abstained`, as `gen eval --answers` reads it): each harness marks such a question its own way.
    abstains: bool = False


def read_questions(source: Source, config: str) -> list[ExportQuestion]:
    found = []
    gold = GoldAnswers(source.dataset, config)
    for question in source.dataset.questions(config):
        item = question.item
        conversation = source.conversations.get(question.conversation_id)
        if conversation is None:
            raise GenError(
                f"conversation {question.conversation_id!r} is not in the conversations config",
                file=item.file,
                record=item.place,
                field="conversation_id",
            )
        bad = [index for index in question.relevant if not 0 <= index < len(conversation.responses)]
        if bad:
            raise GenError(
                f"response index {bad[0]} is outside the conversation ({len(conversation.responses)} responses)",
                file=item.file,
                record=item.place,
                field="relevant_response_indices",
            )
        declared = source.dataset.declared[config]
        exported = export_question(config, question, conversation.conversation_id, declared, gold)
        if not exported.relevant and not exported.abstains:
            raise GenError(
                "the question has no relevant response and its gold answer does not abstain",
                file=item.file,
                record=item.place,
                field="relevant_response_indices",
                expected="at least one response index (an empty window only for a question answered by abstaining)",
            )
        found.append(exported)
    return found


def export_question(
    config: str, question: Question, conversation_id: str, declared: dict, gold: GoldAnswers
) -> ExportQuestion:
    item = question.item
    dialogue = dialogue_turns(item) if "dialogue" in item.record else []
    text = dialogue[-1]["text"] if dialogue else require(item, "question", str)
    group = item.record.get("group_id") or question.question_id
    answer_field = declared.get("answer_field")
    answer = gold.of(item, question.question_id)
    answer_date = structured_date(item, f"{answer_field}_value") if answer_field else None
    return ExportQuestion(
        config,
        question.question_id,
        str(group),
        question.group,
        conversation_id,
        sorted(question.relevant),
        text,
        dialogue,
        answer,
        bool(declared.get("asked_by_speaker_a")),
        answer_date,
        gold.abstains(item, question.question_id),
    )


def structured_date(item: Located, field: str) -> date | None:
    """The date of a structured gold answer (`{"date": "2023-05-08", ...}`), or None where the record has no such
    field or its answer is not a date."""
    value = item.record.get(field)
    text = value.get("date") if isinstance(value, dict) else None
    if text is None:
        return None
    try:
        return date.fromisoformat(str(text)[:10])  # parquet rows read back a date as "2023-05-08" or a datetime
    except ValueError:
        raise GenError(
            f"{text!r} is not a date", file=item.file, record=item.place, field=f"{field}.date", expected="2023-05-08"
        ) from None


def gold_answer(question: ExportQuestion, date_style: Callable[[date], str]) -> str:
    """The gold answer where a harness reads it: a date in the harness's own style, any other answer as its text,
    and "" for a config without answers (the harnesses read the key unconditionally). The one place both QA
    exports take the answer from, so they cannot disagree on it."""
    if question.answer_date is not None:
        return date_style(question.answer_date)
    return question.answer if question.answer is not None else ""


def dialogue_turns(item: Located) -> list[dict[str, str]]:
    turns = require(item, "dialogue", list)
    if not turns or not all(
        isinstance(t, dict) and isinstance(t.get("speaker"), str) and isinstance(t.get("text"), str) for t in turns
    ):
        raise GenError(
            "the dialogue is not a list of turns",
            file=item.file,
            record=item.place,
            field="dialogue",
            expected='a non-empty list of {"speaker": ..., "text": ...}',
        )
    return [{"speaker": turn["speaker"], "text": turn["text"]} for turn in turns]


def question_text(question: ExportQuestion, conversation: Conversation, now: str) -> str:
    """The question as a harness's model reads it: when it is asked (`now` in the format's date style, or ""
    where the format has a field of its own for it), who asks whom, then the question or the dialogue."""
    asked_by_a = question.asked_by_speaker_a
    return render(
        QUESTION_TEMPLATE,
        now=now,
        current_session=conversation.current_session,
        asker=conversation.speaker_a if asked_by_a else "",
        listener=conversation.speaker_b if asked_by_a else "",
        question=question.question,
        dialogue=question.dialogue,
    ).strip()


def one_per_group(questions: list[ExportQuestion], seed: int) -> list[ExportQuestion]:
    """One wording of each base question, chosen from the recipe's seed and the group alone (so the choice does
    not depend on file order or on which other groups are exported); groups keep their first appearance order."""
    groups: dict[str, list[ExportQuestion]] = {}
    for question in questions:
        groups.setdefault(question.group, []).append(question)
    chosen = []
    for group, variants in groups.items():
        variants.sort(key=lambda question: question.question_id)
        chosen.append(variants[int(stable_id([seed, "harness wording", group]), 16) % len(variants)])
    return chosen


def relevant_by_session(question: ExportQuestion, conversation: Conversation) -> dict[int, list[int]]:
    """Session number → the positions (0-based, within the session) of the question's relevant responses."""
    places: dict[int, list[int]] = {}
    for index in question.relevant:
        session, position = conversation.places[index]
        places.setdefault(session, []).append(position)
    return places
