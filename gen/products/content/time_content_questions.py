"""Time+content questions (config `time_content_questions`): LLM-written questions that need the speaker,
a date or session number, and the content together (docs/time-content-questions.md).

The ground truth is fixed before any call: anchors.py picks each question's anchor (one
response, or 2-3 consecutive responses on one topic) and whether it is referred to by date or by session.
The model only words the question (templates/prompts/time_content_question.j2, structured output
``{"question": ...}``); question_checks.py checks it (names the speaker, contains the date or
session number, is one question, does not copy the anchor). A question that fails is written again with the
next sample index, up to ``retries`` times, then recorded in the run's rejects with the reason. With
``verify: true`` a second call (templates/prompts/time_content_verify.j2) must confirm that the anchor
answers the question; a "no" counts as a failure like the others.

Items whose call itself failed (transport errors, unparseable or truncated replies) are left to the engine,
which records them in its own rejects; they are not retried here.

For `gen plan` / `gen preview`: `llm_tasks` gives the first-round generation tasks in item order.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from num2words import num2words
from pydantic import BaseModel, Field, field_validator

from gen import templating
from gen.errors import GenError
from gen.llm.step import CheckedStep, Problem, StepPolicy, Verify, most_calls
from gen.llm.step import run as run_step
from gen.llm.task import Task, render_messages
from gen.products.base import (
    BuildContext,
    ConfigSpec,
    Needs,
    Product,
    Record,
    Records,
    Reject,
    Unit,
    require_endpoint,
)
from gen.products.checks import Checks
from gen.products.content import anchors as anchor_selection
from gen.products.content.question_checks import Facts, clean, problems
from gen.products.date_words import date_variables, yearless_dates
from gen.products.schema import DATE, INT64, STRING, TIMESTAMP, Schema, list_of, schema
from gen.recipe import Recipe, StrictModel
from gen.timeline import Timeline

NAME = "time_content_questions"
DESCRIPTION = (
    "LLM-written questions naming a speaker, a date or session, and a topic, about responses chosen beforehand"
)
PROMPT = "prompts/time_content_question.j2"
VERIFY_PROMPT = "prompts/time_content_verify.j2"
REFERENCES = "prompts/time_content_references.j2"
VERIFY_STEP = f"{NAME}/verify"
MAX_RELATED = 3  # same-window responses on the topic shown to the model as "must not answer"


class Options(StrictModel):
    endpoint: str = Field("main", description="the name of an endpoint in the recipe's llm: section")
    per_conversation: int = Field(20, ge=1, description="questions per conversation (fewer if it runs out of anchors)")
    reference_mix: float = Field(
        0.5, ge=0, le=1, description="share of questions referring to the date; the rest name the session number"
    )
    anchor_size: dict[int, float] = Field(
        default_factory=lambda: {1: 0.7, 2: 0.2, 3: 0.1},
        description="weights of anchor sizes (1-3 consecutive responses), apportioned exactly; a single "
        "number n means always n",
    )
    min_anchor_words: int = Field(8, ge=1, description="every anchor response has at least this many words")
    exclude_padding: bool = Field(True, description="never anchor a question in the padding session")
    topic_similarity: float = Field(
        0.2,
        gt=0,
        le=1,
        description="weighted Dice similarity that adjacent "
        "responses of a multi-response anchor (and recurring topics) must reach",
    )
    context_lines: int = Field(2, ge=0, le=10, description="neighbouring responses shown on each side")
    max_overlap: float = Field(
        0.5, gt=0, le=1, description="a question must repeat less than this share of the anchor's content words"
    )
    max_copied_words: int = Field(5, ge=1, description="longest run of consecutive anchor words a question may repeat")
    verify: bool = Field(False, description="a second call checks that the anchor answers the question")
    retries: int = Field(2, ge=0, le=20, description="regenerations (new sample index) after a failed check")
    max_reject_rate: float | None = Field(
        None,
        ge=0,
        le=1,
        description="stop the run when more than this share of the questions is rejected; default: the "
        "endpoint's max_reject_rate (0.2 unless set)",
    )

    @field_validator("anchor_size", mode="before")
    @classmethod
    def _sizes(cls, value):
        if isinstance(value, int) and not isinstance(value, bool):
            value = {value: 1.0}
        if not isinstance(value, dict):
            raise ValueError("give weights per size, e.g. {1: 0.7, 2: 0.2, 3: 0.1}, or one size 1, 2 or 3")
        return value

    @field_validator("anchor_size")
    @classmethod
    def _check_sizes(cls, value: dict[int, float]) -> dict[int, float]:
        if not value or any(size not in (1, 2, 3) for size in value):
            raise ValueError("anchor sizes are 1, 2 or 3 consecutive responses")
        if any(weight < 0 for weight in value.values()) or sum(value.values()) <= 0:
            raise ValueError("anchor size weights must be non-negative with a positive sum")
        return dict(sorted(value.items()))


class Question(BaseModel):
    """The model's reply."""

    question: str = Field(min_length=1, description="the question, one sentence ending with '?'")


class Verdict(BaseModel):
    """The verifier's reply."""

    answered: bool
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


def reference_phrases(kind: str, day: date, session: int, templates_dir: str | None) -> list[str]:
    text = templating.render(
        REFERENCES,
        templates_dir,
        kind=kind,
        **date_variables(day),
        session=str(session),
        session_ordinal=num2words(session, to="ordinal_num"),
        session_ordinal_word=num2words(session, to="ordinal"),
    )
    phrases = [line.strip() for line in text.splitlines() if line.strip()]
    if not phrases:
        raise GenError(f"no time phrase for kind {kind!r}", file=REFERENCES, expected="one phrase per line")
    return phrases


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


def items_for(timeline: Timeline, options: Options, seed: int, templates_dir: str | None) -> list[Item]:
    rng = random.Random(f"{seed}/{timeline.conversation_id}/{NAME}")
    slots = anchor_slots(timeline, options, rng)
    speakers = tuple(timeline.conversation.speakers)
    yearless = yearless_dates(r.timestamp.date() for r in timeline.responses)
    responses = timeline.responses
    out = []
    for slot in slots:
        anchor = slot.anchor
        first, last = anchor.indices[0], anchor.indices[-1]
        # responses are in response_index order, so the neighbours are a slice (cut to the anchor's session)
        nearby = responses[max(0, first - options.context_lines) : last + options.context_lines + 1]
        same_session = [r for r in nearby if r.session_index == anchor.session_index]
        before = [r for r in same_session if r.response_index < first]
        after = [r for r in same_session if r.response_index > last]
        reference = rng.choice(reference_phrases(slot.kind, anchor.date, anchor.session_index, templates_dir))
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
        }
        question_id = f"{timeline.conversation_id}/tcq-{slot.number + 1:03d}"
        out.append(Item(question_id, timeline, slot, reference, facts, variables))
    return out


def plan_items(units: Sequence[Unit], ctx: BuildContext, options: Options) -> list[Item]:
    """Every question this product will try to write for these conversations, in output order (no LLM call)."""
    return [item for unit in units for item in items_for(unit.stamped, options, ctx.seed, ctx.templates_dir)]


def question_task(item: Item, options: Options, sample: int, templates_dir: str | None) -> Task:
    return Task(
        item_id=item.question_id,
        endpoint=options.endpoint,
        sample=sample,
        parser=Question,
        messages=render_messages(PROMPT, templates_dir, **item.variables),
    )


def verify_task(item: Item, question: str, options: Options, templates_dir: str | None) -> Task:
    v = item.variables
    return Task(
        item_id=item.question_id,
        endpoint=options.endpoint,
        parser=Verdict,
        messages=render_messages(
            VERIFY_PROMPT,
            templates_dir,
            speaker_a=v["speaker_a"],
            speaker_b=v["speaker_b"],
            speaker=v["speaker"],
            anchor=v["anchor"],
            session=v["session"],
            weekday=v["weekday"],
            day=v["day"],
            month=v["month"],
            year=v["year"],
            question=question,
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


def policy(options: Options, recipe: Recipe) -> StepPolicy:
    """Regenerations and the reject limit: the product's own max_reject_rate, else its endpoint's."""
    rate: float | None
    if options.max_reject_rate is not None:
        rate, where = options.max_reject_rate, f"max_reject_rate in the {NAME} product entry"
    else:
        endpoint = recipe.llm.get(options.endpoint)
        rate = endpoint.max_reject_rate if endpoint is not None else StepPolicy.max_reject_rate
        where = f"max_reject_rate (in the {NAME} product entry, or for every step on llm endpoint '{options.endpoint}')"
    return StepPolicy(retries=options.retries, max_reject_rate=rate, reject_option=where)


def question_step(options: Options, templates_dir: str | None) -> CheckedStep[Item]:
    """Write a question for an item, check it against the anchor's facts, optionally have it verified."""

    def judge(item: Item, verdict: Verdict) -> Problem | None:
        if verdict.answered:
            return None
        reason = " ".join(verdict.reason.split()) or "the anchor does not answer the question"
        return Problem("verifier disagrees", reason)

    return CheckedStep(
        name=NAME,
        task=lambda item, sample: question_task(item, options, sample, templates_dir),
        check=lambda item, question: problems(question, item.facts, options.max_overlap, options.max_copied_words),
        item_id=lambda item: item.question_id,
        prepare=lambda item, reply: clean(reply.question),
        describe=lambda question: {"question": question},
        record=lambda item, reject: reject_of(item, reject).to_dict(),
        verify=Verify(
            VERIFY_STEP, task=lambda item, question: verify_task(item, question, options, templates_dir), judge=judge
        )
        if options.verify
        else None,
    )


def generate(ctx: BuildContext, items: list[Item], options: Options) -> dict[str, tuple[str, int]]:
    """question_id -> (question, sample) of the items that passed the shared checked step; the items it gave
    up on go to ctx.reject with their anchor (an item whose call failed is in the engine's rejects)."""
    step = question_step(options, ctx.templates_dir)
    result = run_step(step, ctx.llm(), items, policy(options, ctx.recipe))
    by_id = {item.question_id: item for item in items}
    ctx.rejects.extend(reject_of(by_id[reject["item_id"]], reject) for reject in result.rejects)
    return {item_id: (accepted.value, accepted.sample) for item_id, accepted in result.accepted.items()}


def record(item: Item, question: str, sample: int, model: str, prompt_id: str) -> dict:
    anchor = item.anchor
    return {
        "question_id": item.question_id,
        "conversation_id": item.timeline.conversation_id,
        "question": question,
        "reference_kind": item.slot.kind,
        "speaker": anchor.speaker,
        "relevant_response_indices": anchor.indices,
        "num_relevant": len(anchor.indices),
        "anchor_text": anchor.text,
        "date": anchor.date.isoformat(),
        "session_index": anchor.session_index,
        "now": item.timeline.now.isoformat(timespec="seconds"),
        "current_session": item.timeline.current_session,
        "model": model,
        "prompt_id": prompt_id,
        "sample": sample,
    }


# --- validation: the rows against the log records ------------------------------------------------------


def check_conversation(
    rows: Sequence[Record],
    log: Sequence[Record],
    options: Options,
    model: str | None,
    prompt_id: str,
    checks: Checks,
    conversation_id: str,
    now_offset_minutes: float,
) -> None:
    """Re-check the written rows from the `log` records (not the timeline objects the generator used): the
    anchor's speaker, date, session and text, the clock fields, then the question checks with facts taken from
    the log."""
    ids = Counter(row["question_id"] for row in rows)
    checks.check(
        "question_id is unique", all(n == 1 for n in ids.values()), ", ".join(i for i, n in ids.items() if n > 1)
    )
    if not rows:
        return
    checks.check(
        "at most per_conversation questions", len(rows) <= options.per_conversation, f"{conversation_id}: {len(rows)}"
    )
    speakers = tuple(dict.fromkeys(r["speaker"] for r in log if not r["is_padding"]))
    yearless = yearless_dates(date.fromisoformat(r["date"]) for r in log)
    now = max(datetime.fromisoformat(r["timestamp"]) for r in log) + timedelta(minutes=now_offset_minutes)
    clock = (now.isoformat(timespec="seconds"), max(r["session_index"] for r in log) + 1)
    used: list[int] = []
    for row in rows:
        where = f"{row['question_id']}"
        checks.check(
            "now and current_session agree with the log",
            (row["now"], row["current_session"]) == clock,
            f"{where}: {row['now']}, {row['current_session']}",
        )
        checks.check(
            "num_relevant is the number of relevant responses",
            row["num_relevant"] == len(row["relevant_response_indices"]),
            where,
        )
        anchor = check_anchor(row, log, options, checks, where)
        if anchor is None:
            continue
        used += row["relevant_response_indices"]
        checks.check("reference_kind is date or session", row["reference_kind"] in ("date", "session"), where)
        checks.check("model is the endpoint's", model is None or row["model"] == model, where)
        checks.check("prompt_id is the template's", row["prompt_id"] == prompt_id, where)
        day = date.fromisoformat(anchor[0]["date"])
        facts = Facts(
            speaker=row["speaker"],
            speakers=speakers or (row["speaker"],),
            kind=row["reference_kind"],
            day=day,
            session_index=anchor[0]["session_index"],
            yearless_ok=day in yearless,
            anchor_text=row["anchor_text"],
        )
        found = {
            p.code: str(p) for p in problems(row["question"], facts, options.max_overlap, options.max_copied_words)
        }
        for code in (
            "not a question",
            "speaker not named",
            "date missing",
            "session missing",
            "copies the anchor",
            "overlap too high",
        ):
            checks.check(f"question check: {code}", code not in found, f"{where}: {found.get(code)}")
    checks.check("anchors of a conversation do not overlap", len(used) == len(set(used)), conversation_id)


def check_anchor(row: Record, log: Sequence[Record], options: Options, checks: Checks, where: str) -> list[dict] | None:
    indices = row["relevant_response_indices"]
    ok = (
        isinstance(indices, list)
        and 1 <= len(indices) <= 3
        and all(isinstance(i, int) for i in indices)
        and indices == list(range(indices[0], indices[0] + len(indices)))
        and indices[0] >= 0
        and indices[-1] < len(log)
    )
    if not checks.check("relevant indices are 1-3 consecutive responses of the log", ok, f"{where}: {indices}"):
        return None
    anchor = [log[i] for i in indices]
    checks.check(
        "log records are in response order", all(r["response_index"] == i for r, i in zip(anchor, indices)), where
    )
    checks.check("anchor lies in one session", len({r["session_index"] for r in anchor}) == 1, where)
    checks.check("anchor lies on one date", len({r["date"] for r in anchor}) == 1, where)
    checks.check(
        "session_index matches the log",
        row["session_index"] == anchor[0]["session_index"],
        f"{where}: {row['session_index']} vs {anchor[0]['session_index']}",
    )
    checks.check(
        "date matches the log", row["date"] == anchor[0]["date"], f"{where}: {row['date']} vs {anchor[0]['date']}"
    )
    totals: dict[str, int] = {}
    for r in anchor:
        totals[r["speaker"]] = totals.get(r["speaker"], 0) + len(r["text"].split())
    main = max(totals, key=lambda s: (totals[s], -next(i for i, r in enumerate(anchor) if r["speaker"] == s)))
    checks.check(
        "speaker is the anchor's main speaker in the log",
        row["speaker"] == main,
        f"{where}: {row['speaker']} vs {main}",
    )
    checks.check(
        "anchor_text is the log's text",
        row["anchor_text"] == "\n".join(f"{r['speaker']}: {r['text']}" for r in anchor),
        where,
    )
    if options.exclude_padding:
        checks.check("anchor is not in the padding session", not any(r["is_padding"] for r in anchor), where)
    checks.check(
        "anchor responses have min_anchor_words",
        all(len(r["text"].split()) >= options.min_anchor_words for r in anchor),
        where,
    )
    return anchor


# --- schema and summary ---------------------------------------------------------------------------------


def features() -> Schema:
    return schema(
        {
            "question_id": STRING,
            "conversation_id": STRING,
            "question": STRING,
            "reference_kind": STRING,
            "speaker": STRING,
            "relevant_response_indices": list_of(INT64),
            "num_relevant": INT64,
            "anchor_text": STRING,
            "date": DATE,
            "session_index": INT64,
            "now": TIMESTAMP,
            "current_session": INT64,
            "model": STRING,
            "prompt_id": STRING,
            "sample": INT64,
        }
    )


class TimeContentQuestions(Product[Options]):
    name = NAME
    description = DESCRIPTION
    Options = Options
    configs = (ConfigSpec(NAME, DESCRIPTION, features(), retrieval_group="reference_kind"),)
    needs = Needs(timelines=True, llm=True, products=("log",))

    def check_recipe(self, recipe: Recipe, where: str) -> None:
        require_endpoint(recipe, self.options.endpoint, where)

    def build(self, units: Sequence[Unit], ctx: BuildContext) -> Iterator[Records]:
        options = self.options
        items = plan_items(units, ctx, options)
        accepted = generate(ctx, items, options)
        model = ctx.recipe.llm[options.endpoint].model
        prompt_id = templating.template_id(PROMPT, ctx.templates_dir)
        by_conversation: dict[str, list[Record]] = defaultdict(list)
        for item in items:
            if item.question_id in accepted:
                question, sample = accepted[item.question_id]
                by_conversation[item.timeline.conversation_id].append(record(item, question, sample, model, prompt_id))
        for unit in units:
            yield {NAME: by_conversation.get(unit.conversation_id, [])}

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        endpoint = ctx.recipe.llm.get(self.options.endpoint)
        check_conversation(
            records[NAME],
            unit.records_of("log"),
            self.options,
            endpoint.model if endpoint else None,
            templating.template_id(PROMPT, ctx.templates_dir),
            checks,
            unit.conversation_id,
            ctx.recipe.timeline.now_offset_minutes,
        )

    def llm_tasks(self, units: Sequence[Unit], ctx: BuildContext) -> list[tuple[str, list[Task], int]]:
        items = plan_items(units, ctx, self.options)
        step = question_step(self.options, ctx.templates_dir)
        bound = most_calls(step, len(items), policy(self.options, ctx.recipe))
        return [(NAME, [step.task(item, 0) for item in items], bound)]

    def count(self, config: str, records: Sequence[Record]) -> Counter:
        counts: Counter = Counter()
        for row in records:
            counts["questions", row["reference_kind"]] += 1
            counts["first_try" if row["sample"] == 0 else "regenerated", row["reference_kind"]] += 1
            counts["anchor_size", len(row["relevant_response_indices"])] += 1
        counts["conversations", ""] += bool(records)
        return counts

    def summary(self, config: str, counts: Counter) -> dict:
        kinds = sorted({kind for (key, kind) in counts if key == "questions"})
        sizes = sorted(size for (key, size) in counts if key == "anchor_size")
        return {
            "questions": sum(counts["questions", kind] for kind in kinds),
            "conversations": counts["conversations", ""],
            "by_reference_kind": {
                kind: {
                    "questions": counts["questions", kind],
                    "first_try": counts["first_try", kind],
                    "regenerated": counts["regenerated", kind],
                }
                for kind in kinds
            },
            "by_anchor_size": {
                f"{size} response{'s' if size > 1 else ''}": counts["anchor_size", size] for size in sizes
            },
        }
