"""The checked LLM step of gold_answers: one item per base question (its window's responses, shown with their
index, speaker and time), the answer prompt, the optional verify call, and the rejects it leaves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from gen.llm.step import CheckedStep, Problem, Verify
from gen.llm.step import run as run_step
from gen.llm.structured import Checked
from gen.llm.task import Task, render_messages
from gen.products.answers.options import GoldAnswersOptions as Options
from gen.products.answers.rules import Index, WindowAnswer, answer_text, check_citations
from gen.products.base import BuildContext, Record, Reject, Unit
from gen.templating import Templates

NAME = "gold_answers"
PROMPT = "answers/window_answer.j2"
VERIFY_PROMPT = "answers/verify.j2"
ABSTENTION = "answers/abstention.j2"
VERIFY_STEP = f"{NAME}/verify"


class ClaimVerdict(BaseModel):
    claim: Index = Field(description="the claim's number, from 1")
    supported: bool
    why: str = ""


class Verdicts(BaseModel):
    """The verifier's reply: one verdict per claim."""

    claims: list[ClaimVerdict]


@dataclass(frozen=True)
class BaseQuestion:
    """One base question of the answered configs: every wording of it (in either config) shares the answer."""

    conversation_id: str
    group_id: str
    test: str
    params: dict
    window: tuple[int, ...]  # its relevant responses, sorted


@dataclass(frozen=True)
class Item:
    base: BaseQuestion
    variables: dict  # the prompt's

    @property
    def item_id(self) -> str:
        return self.base.group_id  # a hash of the conversation, test and window: unique in a run


def base_questions(unit: Unit, configs: Sequence[str]) -> list[BaseQuestion]:
    """The distinct base questions of one conversation, in the order they first appear (configs in the order
    named): the configs share group ids, and a group's relevant set is the same in each."""
    found: dict[str, BaseQuestion] = {}
    for config in configs:
        for row in unit.records_of(config):
            if row["group_id"] not in found:
                window = tuple(sorted(row["relevant_response_indices"]))
                found[row["group_id"]] = BaseQuestion(
                    row["conversation_id"], row["group_id"], row["test"], row["params"], window
                )
    return list(found.values())


def item_of(unit: Unit, base: BaseQuestion) -> Item:
    timeline = unit.stamped
    speakers = timeline.conversation.speakers
    responses = [timeline.responses[index] for index in base.window]
    variables = {
        "speaker_a": speakers[0],
        "speaker_b": speakers[1],
        "now": timeline.now.isoformat(sep=" ", timespec="minutes"),
        "test": base.test,
        "params": ", ".join(f"{key} {value}" for key, value in base.params.items()),
        "responses": [
            {
                "index": r.response_index,
                "speaker": r.speaker,
                "time": r.timestamp.isoformat(sep=" ", timespec="minutes"),
                "session": r.session_index,
                "text": " ".join(r.text.split()),
            }
            for r in responses
        ],
    }
    return Item(base, variables)


def answer_task(item: Item, options: Options, sample: int, templates: Templates) -> Task:
    return Task(
        item_id=item.item_id,
        endpoint=options.endpoint,
        sample=sample,
        parser=Checked(WindowAnswer, check_citations(item.base.window)),
        messages=render_messages(PROMPT, templates, **item.variables),
    )


def verify_task(item: Item, answer: WindowAnswer, options: Options, templates: Templates) -> Task:
    shown = {r["index"]: r for r in item.variables["responses"]}
    claims = [{"text": c.text, "cited": [shown[i] for i in sorted(set(c.cites))]} for c in answer.claims]
    return Task(
        item_id=item.item_id,
        endpoint=options.endpoint,
        parser=Verdicts,
        messages=render_messages(
            VERIFY_PROMPT,
            templates,
            speaker_a=item.variables["speaker_a"],
            speaker_b=item.variables["speaker_b"],
            claims=claims,
        ),
    )


def judge(answer_claims: int, verdicts: Verdicts) -> Problem | None:
    """The verifier's verdicts as a problem: a claim it found unsupported, or one it gave no verdict on."""
    given = {v.claim: v for v in verdicts.claims}
    for number in range(1, answer_claims + 1):
        verdict = given.get(number)
        if verdict is None:
            return Problem("verifier disagrees", f"no verdict on claim {number}")
        if not verdict.supported:
            why = " ".join(verdict.why.split()) or "its citations do not say it"
            return Problem("claim not supported", f"claim {number}: {why}")
    return None


def reject_of(item: Item, reject: dict) -> Reject:
    return Reject(
        NAME,
        item.item_id,
        reject["reason"],
        reject["raw_text"],
        {
            "conversation_id": item.base.conversation_id,
            "group_id": item.base.group_id,
            "test": item.base.test,
            "relevant_response_indices": list(item.base.window),
            "attempts": reject["attempts"],
        },
    )


def answer_step(options: Options, templates: Templates) -> CheckedStep[Item]:
    """Write the answer of a window; the citation rule is the parser's (rules.py), so a reply breaking it gets
    the correction round; with `verify`, a second call must find every claim supported by what it cites."""
    answers: dict[str, int] = {}  # item id -> claims of the answer being verified

    def verify(item: Item, answer: WindowAnswer) -> Task:
        answers[item.item_id] = len(answer.claims)
        return verify_task(item, answer, options, templates)

    return CheckedStep(
        name=NAME,
        task=lambda item, sample: answer_task(item, options, sample, templates),
        check=lambda item, answer: [],  # the rule is checked in the parser, where the model can correct it
        item_id=lambda item: item.item_id,
        describe=lambda answer: {"answer": answer.model_dump(mode="json")},
        record=lambda item, reject: reject_of(item, reject).to_dict(),
        verify=Verify(VERIFY_STEP, task=verify, judge=lambda item, verdicts: judge(answers[item.item_id], verdicts))
        if options.verify
        else None,
    )


def generate(ctx: BuildContext, items: list[Item], options: Options) -> dict[str, tuple[WindowAnswer, int]]:
    """item id -> (answer, sample) of the items the checked step accepted; the rest go to the rejects (an item
    whose call failed, or whose reply broke the rule after its correction round, is in the engine's rejects)."""
    step = answer_step(options, ctx.templates)
    result = run_step(step, ctx.llm(), items, options.step_policy(NAME, ctx.recipe, retries=options.retries))
    by_id = {item.item_id: item for item in items}
    ctx.rejects.extend(reject_of(by_id[reject["item_id"]], reject) for reject in result.rejects)
    return {item_id: (accepted.value, accepted.sample) for item_id, accepted in result.accepted.items()}


def abstention(templates: Templates) -> str:
    """The answer of a window without responses (no call is made for it)."""
    return " ".join(templates.render(ABSTENTION).split())


def written_record(item: Item, answer: WindowAnswer, sample: int, model: str, prompt_id: str) -> Record:
    texts = [" ".join(c.text.split()) for c in answer.claims]
    claims = [{"text": text, "cites": sorted(set(c.cites))} for text, c in zip(texts, answer.claims)]
    left_out = [{"index": e.index, "why": " ".join(e.why.split())} for e in answer.left_out]
    return record_of(item.base, answer_text(texts), claims, left_out, model, prompt_id, sample)


def abstained_record(item: Item, text: str) -> Record:
    return record_of(item.base, text, [], [], None, None, None)


def record_of(
    base: BaseQuestion,
    text: str,
    claims: list[dict],
    left_out: list[dict],
    model: str | None,
    prompt_id: str | None,
    sample: int | None,
) -> Record:
    return {
        "group_id": base.group_id,
        "conversation_id": base.conversation_id,
        "test": base.test,
        "relevant_response_indices": list(base.window),
        "num_relevant": len(base.window),
        "answer": text,
        "claims": claims,
        "left_out": left_out,
        "abstained": not base.window,
        "model": model,
        "prompt_id": prompt_id,
        "sample": sample,
    }
