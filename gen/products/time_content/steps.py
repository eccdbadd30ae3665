"""The checked LLM step of time_content_questions: items (an anchor chosen beforehand, its reference kind, the
facts a question must hold), the prompt that writes a question and its answer in one call, the optional verify
call, and the rejects it leaves.

The answer is written in the same call as the question rather than in a follow-up step: the model that has just
worded the question knows what it asked, the answer costs no second prompt with the passage again, and the
question and answer are kept or written again together (an answer checked against another attempt's question
could not be trusted)."""

from __future__ import annotations

import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from pathlib import Path

from num2words import num2words
from pydantic import BaseModel, Field

from gen.errors import GenError
from gen.llm.step import CheckedStep, Problem, Verify
from gen.llm.step import run as run_step
from gen.llm.structured import Checked
from gen.llm.task import Task, render_messages
from gen.products.base import BuildContext, Reject, Unit
from gen.products.date_words import date_variables, yearless_dates
from gen.products.time_content import anchors as anchor_selection
from gen.products.time_content.answer_rules import answer_problems, clean_answer
from gen.products.time_content.options import TimeContentQuestionsOptions as Options
from gen.products.time_content.plan_memo import PlanMemo, Planned, code_digest, plan_key
from gen.products.time_content.question_rules import Facts, clean, problems
from gen.templating import Templates
from gen.timeline import Timeline

NAME = "time_content_questions"
PROMPT = "prompts/time_content_question.j2"
VERIFY_PROMPT = "prompts/time_content_verify.j2"
REFERENCES = "prompts/time_content_references.j2"
VERIFY_STEP = f"{NAME}/verify"
MAX_RELATED = 3  # same-window responses on the topic shown to the model as "must not answer"


class Question(BaseModel):
    """The model's reply: the question and its answer."""

    question: str = Field(min_length=1, description="the question, one sentence ending with '?'")
    answer: str = Field(min_length=1, description="what the passage says in reply to the question, in a few words")


@dataclass(frozen=True)
class Written:
    """A reply as it is checked and recorded: both texts cleaned (question_rules.clean, answer_rules.clean_answer)."""

    question: str
    answer: str


class Verdict(BaseModel):
    """The verifier's reply."""

    answered: bool
    answer_supported: bool
    reason: str = ""


@dataclass(frozen=True)
class Item:
    """One question to be written: its id, slot (anchor + reference kind), facts and prompt."""

    question_id: str
    timeline: Timeline
    slot: anchor_selection.Slot
    reference: str
    facts: Facts
    variables: dict

    @property
    def anchor(self) -> anchor_selection.Anchor:
        return self.slot.anchor


# --- items and prompts --------------------------------------------------------------------------------


@lru_cache(maxsize=256)
def session_words(session: int) -> tuple[str, str]:
    """(ordinal in digits, ordinal in words) of a session number ("3rd", "third"): spelling numbers out costs
    more than the rest of a phrase, and a corpus has few session numbers."""
    return num2words(session, to="ordinal_num"), num2words(session, to="ordinal")


def reference_phrases(kind: str, day: date, session: int, templates: Templates) -> list[str]:
    ordinal, ordinal_word = session_words(session)
    text = templates.render(
        REFERENCES,
        kind=kind,
        **date_variables(day),
        session=str(session),
        session_ordinal=ordinal,
        session_ordinal_word=ordinal_word,
    )
    phrases = [line.strip() for line in text.splitlines() if line.strip()]
    if not phrases:
        raise GenError(f"no time phrase for kind {kind!r}", file=REFERENCES, expected="one phrase per line")
    return phrases


class PhraseBook:
    """The time phrases of each (kind, date, session), rendered once per plan: the conversations of a corpus
    share many dates and session numbers. It lives as long as one plan, so an edited template is read again
    by the next."""

    def __init__(self, templates: Templates) -> None:
        self.templates = templates
        self.rendered: dict[tuple[str, date, int], list[str]] = {}

    def phrases(self, kind: str, day: date, session: int) -> list[str]:
        key = (kind, day, session)
        found = self.rendered.get(key)
        if found is None:
            found = self.rendered[key] = reference_phrases(kind, day, session, self.templates)
        return found


def line(response) -> dict:
    return {"speaker": response.speaker, "text": response.text}


def anchor_slots(timeline: Timeline, options: Options, rng: random.Random) -> list[anchor_selection.Slot]:
    """The anchors one conversation's questions will be written around, chosen before any model call."""
    return anchor_selection.select(
        timeline,
        count=options.per_conversation,
        size_weights=options.anchor_size,
        date_share=options.reference_mix,
        min_words=options.min_anchor_words,
        exclude_padding=options.exclude_padding,
        topic_similarity=options.topic_similarity,
        rng=rng,
    )


def choose(timeline: Timeline, options: Options, seed: int, book: PhraseBook) -> list[Planned]:
    """One conversation's plan: its slots, each with the position of its time phrase, drawn by seed."""
    rng = random.Random(f"{seed}/{timeline.conversation_id}/{NAME}")
    plan = []
    for slot in anchor_slots(timeline, options, rng):
        phrases = book.phrases(slot.kind, slot.anchor.date, slot.anchor.session_index)
        plan.append(Planned(slot, rng.choice(range(len(phrases))), len(phrases)))  # draws as choice(phrases)
    return plan


def items_for(
    timeline: Timeline, options: Options, seed: int, templates: Templates, book: PhraseBook | None = None
) -> list[Item]:
    book = book or PhraseBook(templates)
    return items_of(timeline, choose(timeline, options, seed, book), options, book)


def items_of(timeline: Timeline, plan: Sequence[Planned], options: Options, book: PhraseBook) -> list[Item]:
    """The items of one conversation's plan: each question's facts and prompt variables. ValueError when the
    plan's time phrases are no longer as many as its references render to."""
    speakers = tuple(timeline.conversation.speakers)
    yearless = yearless_dates(r.timestamp.date() for r in timeline.responses)
    responses = timeline.responses
    out = []
    for planned in plan:
        slot = planned.slot
        anchor = slot.anchor
        first, last = anchor.indices[0], anchor.indices[-1]
        # responses are in response_index order, so the neighbours are a slice (cut to the anchor's session)
        nearby = responses[max(0, first - options.context_lines) : last + options.context_lines + 1]
        same_session = [r for r in nearby if r.session_index == anchor.session_index]
        before = [r for r in same_session if r.response_index < first]
        after = [r for r in same_session if r.response_index > last]
        phrases = book.phrases(slot.kind, anchor.date, anchor.session_index)
        if len(phrases) != planned.phrases:
            raise ValueError(f"{len(phrases)} time phrases where the plan had {planned.phrases}")
        reference = phrases[planned.phrase]
        facts = Facts(
            speaker=anchor.speaker,
            speakers=speakers,
            kind=slot.kind,
            day=anchor.date,
            session_index=anchor.session_index,
            yearless_ok=anchor.date in yearless,
            anchor_text=anchor.text,
        )
        variables = {
            "speaker_a": speakers[0],
            "speaker_b": speakers[1],
            "speaker": anchor.speaker,
            "other": next((s for s in speakers if s != anchor.speaker), speakers[1]),
            "anchor": [line(r) for r in anchor.responses],
            "session": anchor.session_index,
            **date_variables(anchor.date),
            "kind": slot.kind,
            "reference": reference,
            "before": [line(r) for r in before],
            "after": [line(r) for r in after],
            "related": [responses[i].text for i in slot.related[:MAX_RELATED]],
            "max_copied_words": options.max_copied_words,
            "max_answer_words": options.max_answer_words,
        }
        question_id = f"{timeline.conversation_id}/tcq-{slot.number + 1:03d}"
        out.append(Item(question_id, timeline, slot, reference, facts, variables))
    return out


def plan_items(units: Sequence[Unit], ctx: BuildContext, options: Options) -> list[Item]:
    """Every question this product will try to write for these conversations, in output order (no LLM call).
    Conversations planned before with the same inputs take their plans from the memo beside the LLM cache."""
    book = PhraseBook(ctx.templates)
    timelines = [unit.stamped for unit in units]
    settings = {"options": options.model_dump(mode="json"), "seed": ctx.seed}
    code = code_digest(sys.modules[__name__])
    keys = [plan_key(timeline, settings, code) for timeline in timelines]
    memo = PlanMemo(memo_folder(ctx) if code is not None else None)
    try:
        found = memo.plans(keys, timelines)
        items: list[Item] = []
        made: list[tuple[str, list[Planned]]] = []
        for key, timeline in zip(keys, timelines):
            items += planned_items(timeline, found.get(key), options, ctx.seed, book, made, key)
        memo.keep(made)
    finally:
        memo.close()
    return items


def planned_items(
    timeline: Timeline,
    stored: list[Planned] | None,
    options: Options,
    seed: int,
    book: PhraseBook,
    made: list[tuple[str, list[Planned]]],
    key: str,
) -> list[Item]:
    """The items of a stored plan, or of a new one (added to `made` under `key`) when there is none or it no
    longer fits (its time phrases are now more or fewer)."""
    if stored is not None:
        try:
            return items_of(timeline, stored, options, book)
        except ValueError:
            pass
    plan = choose(timeline, options, seed, book)
    made.append((key, plan))
    return items_of(timeline, plan, options, book)


def memo_folder(ctx: BuildContext) -> Path | None:
    """The LLM cache's folder, where the plans are kept (none for an engine without a cache file)."""
    path = getattr(getattr(ctx.engine, "cache", None), "path", None)
    return Path(path).parent if path is not None else None


def question_task(item: Item, options: Options, sample: int, templates: Templates) -> Task:
    return Task(
        item_id=item.question_id,
        endpoint=options.endpoint,
        sample=sample,
        parser=Checked(Question, answer_rule(item, options)),
        messages=render_messages(PROMPT, templates, **item.variables),
    )


def answer_rule(item: Item, options: Options):
    """The answer rule (answer_rules.py) as the parser's check: a reply whose answer breaks it goes back to the
    model in the correction round with every problem named, since the model can mend it by reading the passage
    again; the question's own checks stay with the step, which writes a failing question anew."""

    def rule(reply: Question) -> None:
        answer, question = clean_answer(reply.answer), clean(reply.question)
        if found := answer_problems(answer, question, item.facts, options.answer_limits()):
            raise ValueError(
                "the answer breaks the rules: "
                + "; ".join(map(str, found))
                + " (answer in a few words taken from the passage, saying what it tells in reply to the question)"
            )

    return rule


def prepared(reply: Question) -> Written:
    return Written(clean(reply.question), clean_answer(reply.answer))


def verify_task(item: Item, written: Written, options: Options, templates: Templates) -> Task:
    v = item.variables
    return Task(
        item_id=item.question_id,
        endpoint=options.endpoint,
        parser=Verdict,
        messages=render_messages(
            VERIFY_PROMPT,
            templates,
            speaker_a=v["speaker_a"],
            speaker_b=v["speaker_b"],
            speaker=v["speaker"],
            anchor=v["anchor"],
            session=v["session"],
            weekday=v["weekday"],
            day=v["day"],
            month=v["month"],
            year=v["year"],
            question=written.question,
            answer=written.answer,
        ),
    )


# --- generation -----------------------------------------------------------------------------------------


def reject_of(item: Item, reject: dict) -> Reject:
    """A question the step gave up on, as rejects.jsonl holds it: the reason, the raw reply, its anchor and
    every attempt."""
    return Reject(
        NAME,
        item.question_id,
        reject["reason"],
        reject["raw_text"],
        {
            "conversation_id": item.timeline.conversation_id,
            "reference_kind": item.slot.kind,
            "speaker": item.anchor.speaker,
            "relevant_response_indices": item.anchor.indices,
            "attempts": reject["attempts"],
        },
    )


def question_step(options: Options, templates: Templates) -> CheckedStep[Item]:
    """Write a question for an item, check it against the anchor's facts, optionally have it verified."""

    def judge(item: Item, verdict: Verdict) -> Problem | None:
        reason = " ".join(verdict.reason.split())
        if not verdict.answered:
            return Problem("verifier disagrees", reason or "the anchor does not answer the question")
        if not verdict.answer_supported:
            return Problem("answer not supported", reason or "the anchor does not say what the answer says")
        return None

    return CheckedStep(
        name=NAME,
        task=lambda item, sample: question_task(item, options, sample, templates),
        check=lambda item, written: problems(
            written.question, item.facts, options.max_overlap, options.max_copied_words
        ),
        item_id=lambda item: item.question_id,
        prepare=lambda item, reply: prepared(reply),
        describe=lambda written: {"question": written.question, "answer": written.answer},
        record=lambda item, reject: reject_of(item, reject).to_dict(),
        verify=Verify(
            VERIFY_STEP, task=lambda item, written: verify_task(item, written, options, templates), judge=judge
        )
        if options.verify
        else None,
    )


def generate(ctx: BuildContext, items: list[Item], options: Options) -> dict[str, tuple[Written, int]]:
    """question_id -> (question and answer, sample) of the items that passed the shared checked step; the items it gave
    up on go to ctx.reject with their anchor (an item whose call failed, or whose answer still broke the answer rule
    after its correction round, is in the engine's rejects)."""
    step = question_step(options, ctx.templates)
    result = run_step(step, ctx.llm(), items, options.step_policy(NAME, ctx.recipe, retries=options.retries))
    by_id = {item.question_id: item for item in items}
    ctx.rejects.extend(reject_of(by_id[reject["item_id"]], reject) for reject in result.rejects)
    return {item_id: (accepted.value, accepted.sample) for item_id, accepted in result.accepted.items()}
