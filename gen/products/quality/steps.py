"""The quality labels' LLM steps (docs/quality.md): an NLI label for each persona fact against a reply, read
from the log-probabilities of the answer's first token (R1), and a reply's fluency as the mean log-probability
of its own tokens after the previous turn, scored by /completions with echo (R3.1). Both go through the shared
checked step, so they are cached, replayed offline, planned and rejected like every other call."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gen.llm import Task
from gen.llm.step import CheckedStep, Problem, StepPolicy, StepResult, run
from gen.llm.task import render_messages
from gen.products.base import BuildContext, Reject
from gen.products.quality.options import QualityLabelsOptions as Options
from gen.products.quality.signals import LABELS
from gen.templating import Templates

NAME = "quality_labels"
NLI_STEP, LM_STEP = f"{NAME}/nli", f"{NAME}/fluency"
NLI_PROMPT, FLUENCY_CONTEXT = "prompts/quality_nli.j2", "quality/fluency_context.j2"
TOP_LOGPROBS = 10  # alternatives read at the answer's first token


@dataclass(frozen=True)
class FactPair:
    """One persona fact of the replying speaker against one reply."""

    item_id: str
    conversation_id: str
    response_index: int
    speaker: str
    fact: str
    reply: str


@dataclass(frozen=True)
class ScoredReply:
    """A reply with the text before it, for the fluency score."""

    item_id: str
    conversation_id: str
    response_index: int
    context: str
    reply: str


def label_of(token: str) -> str | None:
    """The label a token starts to spell ("contra", " Neutral", "Entail" -> its label), or None."""
    word = token.strip().lower()
    found = [label for label in LABELS if word and word.isalpha() and label.startswith(word)]
    return found[0] if len(found) == 1 else None


def label_probabilities(logprobs: Any) -> dict[str, float] | None:
    """P(entailment), P(contradiction), P(neutral) from the first answer token's alternatives: each alternative's
    probability goes to the label it starts to spell, and the three are scaled to sum to 1. None when no
    alternative spells a label (or the server sent no log-probabilities). This is the only place an NLI answer
    is read: the answer's text is not parsed, so a first token that is not a label word ("The", "**", a line
    break) still gives a label when label words are among its alternatives."""
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not content:
        return None
    first = content[0]
    mass = dict.fromkeys(LABELS, 0.0)
    for alternative in first.get("top_logprobs") or [first]:
        label = label_of(str(alternative.get("token", "")))
        if label is not None:
            mass[label] += math.exp(float(alternative["logprob"]))
    total = sum(mass.values())
    return {label: value / total for label, value in mass.items()} if total > 0 else None


def mean_logprob(logprobs: Any, start: int, end: int) -> float | None:
    """The mean log-probability of the tokens that hold any character of [start, end) of the echoed prompt (the
    reply's own tokens), the first included: a token runs from its offset to the next token's, so one that
    begins with the space before the reply (" Yes") is the reply's. None when the server sent none for them.
    This is the only place the reply's tokens are told from the context's (docs/quality.md, R3.1)."""
    if not isinstance(logprobs, Mapping):
        return None
    offsets = [int(offset) for offset in logprobs.get("text_offset") or []]
    values = logprobs.get("token_logprobs") or []
    ends = [*offsets[1:], math.inf]
    found = [
        float(value)
        for offset, token_end, value in zip(offsets, ends, values)
        if offset < end and token_end > start and value is not None
    ]
    return sum(found) / len(found) if found else None


def nli_step(endpoint: str, templates: Templates) -> CheckedStep[FactPair]:
    def task(pair: FactPair, sample: int) -> Task:
        messages = render_messages(NLI_PROMPT, templates, speaker=pair.speaker, fact=pair.fact, reply=pair.reply)
        return Task(pair.item_id, endpoint, messages, None, sample, logprobs=TOP_LOGPROBS, max_tokens=1)

    def check(pair: FactPair, value: dict[str, float] | None) -> list[Problem]:
        if value is None:
            return [Problem("no label probabilities", "no alternative of the answer's first token names a label")]
        return []

    return CheckedStep(
        name=NLI_STEP,
        task=task,
        check=check,
        item_id=lambda pair: pair.item_id,
        prepare=lambda pair, reply: label_probabilities(reply[1]),
        logprobs=True,
        describe=lambda value: {"probabilities": value},
    )


def fluency_step(endpoint: str) -> CheckedStep[ScoredReply]:
    def task(scored: ScoredReply, sample: int) -> Task:
        text = scored.context + scored.reply
        return Task(scored.item_id, endpoint, text, None, sample, logprobs=1, max_tokens=1, score_text=True)

    def check(scored: ScoredReply, value: float | None) -> list[Problem]:
        return [] if value is not None else [Problem("no log-probabilities", "the echo had none for the reply")]

    def prepare(scored: ScoredReply, reply: tuple[Any, Any]) -> float | None:
        start = len(scored.context)  # the echoed prompt is the context, then the reply
        return mean_logprob(reply[1], start, start + len(scored.reply))

    return CheckedStep(
        name=LM_STEP,
        task=task,
        check=check,
        item_id=lambda scored: scored.item_id,
        prepare=prepare,
        logprobs=True,
        describe=lambda value: {"mean_logprob": value},
    )


def fluency_context(templates: Templates, speaker: str, query_speaker: str | None, query: str | None) -> str:
    return templates.render(FLUENCY_CONTEXT, speaker=speaker, query_speaker=query_speaker, query=query)


def run_checked(ctx: BuildContext, step: CheckedStep, items: Sequence, endpoint: str, options: Options) -> StepResult:
    """Run a step; what it gave up on goes to the run's rejects with the conversation and response it was for."""
    if options.max_reject_rate is not None:
        policy = StepPolicy(options.retries, options.max_reject_rate, f"max_reject_rate in the {NAME} product entry")
    else:
        where = f"max_reject_rate (in the {NAME} product entry, or on llm endpoint '{endpoint}')"
        policy = StepPolicy(options.retries, ctx.recipe.llm[endpoint].max_reject_rate, where)
    result = run(step, ctx.llm(), items, policy)
    by_id = {item.item_id: item for item in items}
    for reject in result.rejects:
        item = by_id[reject["item_id"]]
        details = {"conversation_id": item.conversation_id, "response_index": item.response_index}
        details = {"step": step.name, **details}
        ctx.rejects.append(Reject(NAME, item.item_id, reject["reason"], reject["raw_text"], details))
    return result
