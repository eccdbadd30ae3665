"""What an endpoint must be able to do for the calls a run will send it, and one small real request per such
feature to find out whether it can (`gen validate --probe`).

The needs are read off the tasks, in :func:`needs_of`, and nowhere else: a product declares what a call needs in
the :class:`~gen.llm.task.Task` it hands the engine (``logprobs``: alternatives per reply token, read from a chat
completion; ``score_text``: /completions with ``echo``, so the log-probabilities cover the prompt's own tokens; a
pydantic ``parser``: a structured-output mode). Reading them there covers every step of every product, a
plugin's too, and stays true when a product changes what it asks for.

The features, and what the probe sends to learn each (every request through the engine's own retry loop,
:class:`~gen.llm.calls.attempts.Attempts`, with the endpoint's parameters, a short timeout and one retry):

* ``answers``: a one-word chat completion comes back with text;
* ``logprobs``: a chat completion asked for ``top_logprobs`` carries them for its first token;
* ``echo``: /completions with ``echo`` and ``logprobs`` gives a log-probability to a token of the prompt itself;
* ``structured_output``: with ``auto``, the structured-output probe (gen/llm/probes/mode.py) finds a mode the server
  takes (only the choice is reported: nothing is stored in the LLM cache); with an explicit mode other than
  ``off``, one request in that mode is not refused.

No reply is cached and none is counted in a run's report: a probe is not data.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from gen.errors import shorten
from gen.llm.calls.attempts import Attempts, CallFailed, GiveUp
from gen.llm.calls.endpoint import Endpoint
from gen.llm.calls.replies import Answer
from gen.llm.calls.request import build_request
from gen.llm.config import EndpointConfig
from gen.llm.probes.mode import ProbeRun, find_mode, probe_body
from gen.llm.structured import schema_of
from gen.llm.task import Task

__all__ = ["ANSWERS", "ECHO", "LOGPROBS", "STRUCTURED", "EndpointProbe", "needs_of", "probe_endpoints"]

ANSWERS, LOGPROBS, ECHO, STRUCTURED = "answers", "logprobs", "echo", "structured_output"
ORDER = (ANSWERS, LOGPROBS, ECHO, STRUCTURED)  # answers first: a server that does not answer has nothing else
WHAT = {
    ANSWERS: "answers a chat completion",
    LOGPROBS: "log-probabilities on chat completions (logprobs, top_logprobs)",
    ECHO: "/completions with echo and logprobs over the prompt's own tokens",
    STRUCTURED: "the recipe's structured_output mode",
}
LACKS = {
    ANSWERS: "does not answer",
    LOGPROBS: "has no log-probabilities on chat completions",
    ECHO: "has no /completions echo with logprobs",
    STRUCTURED: "refuses the structured_output mode",
}
PROBE_TIMEOUT_S = 20.0  # each request's; an endpoint set shorter keeps its own
PROBE_RETRIES = 1
PROBE_WAIT_S = 30.0  # a probe call's whole budget, retries and backoff included
PROBE_STEP = "validate --probe"
PROMPT = "Reply with the single word: ok"
SCORED = "The cat sat on the mat."
TOP_LOGPROBS = 2


def needs_of(task: Task) -> frozenset[str]:
    """The features a task's call needs of its endpoint (see the module docstring)."""
    needs = {ANSWERS}
    if task.score_text:
        needs.add(ECHO)
    elif task.logprobs:
        needs.add(LOGPROBS)
    if schema_of(task.parser) is not None:
        needs.add(STRUCTURED)
    return frozenset(needs)


def endpoint_needs(steps: Iterable[tuple[str, Iterable[Task]]]) -> dict[str, dict[str, list[str]]]:
    """endpoint -> feature -> the steps that need it, over every task of every step."""
    found: dict[str, dict[str, list[str]]] = {}
    for step, tasks in steps:
        for task in tasks:
            for need in needs_of(task):
                steps_of = found.setdefault(task.endpoint, {}).setdefault(need, [])
                if step not in steps_of:
                    steps_of.append(step)
    return found


@dataclass
class EndpointProbe:
    """What the probe found of one endpoint: per needed feature, None (it has it) or why not."""

    endpoint: str
    where: str
    needed: dict[str, list[str]]  # feature -> steps that need it
    missing: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing

    def line(self) -> str:
        """One line for the user: what works, or every feature it lacks with the steps that need it and why."""
        if self.ok:
            has = [WHAT[need] for need in ORDER if need in self.needed and need != ANSWERS]
            return f"{self.where}: answers" + "".join(f"; has {what}" for what in has + self.notes)
        lacks = "; ".join(f"{LACKS[need]}: {why}{self.steps(need)}" for need, why in self.missing.items())
        return f"{self.where}: {lacks}"

    def summary(self) -> str:
        """What it lacks in a few words, the reason of a server that does not answer cut short (for the one
        error that lists every endpoint; :meth:`line` has the whole reasons)."""
        if ANSWERS in self.missing:
            return f"'{self.endpoint}' {LACKS[ANSWERS]} ({shorten(self.missing[ANSWERS], 90)})"
        return f"'{self.endpoint}' " + ", ".join(f"{LACKS[need]}{self.steps(need)}" for need in self.missing)

    def steps(self, need: str) -> str:
        return f" (needed by {', '.join(self.needed[need])})" if self.needed.get(need) else ""


def probe_config(config: EndpointConfig) -> EndpointConfig:
    """The endpoint's parameters with a short timeout and budget: validate must not wait as long as a run would."""
    update: dict[str, Any] = {
        "timeout_s": min(config.timeout_s, PROBE_TIMEOUT_S),
        "max_retries": min(config.max_retries, PROBE_RETRIES),
        "max_wait_s": min(config.max_wait_s, PROBE_WAIT_S),
    }
    return config.model_copy(update=update)


async def probe_endpoints(
    attempts: Attempts, configs: Mapping[str, EndpointConfig], needs: Mapping[str, Mapping[str, list[str]]]
) -> list[EndpointProbe]:
    """Probe every endpoint in `needs` at once (each on a fresh :class:`Endpoint`, so the run's breakers and
    counts are untouched); results in the order of `needs`."""
    probes = [
        probe_one(attempts, Endpoint(name, probe_config(configs[name])), dict(need)) for name, need in needs.items()
    ]
    return list(await asyncio.gather(*probes))


async def probe_one(attempts: Attempts, ep: Endpoint, needed: dict[str, list[str]]) -> EndpointProbe:
    found = EndpointProbe(ep.name, ep.where, needed)
    for need in (need for need in ORDER if need in needed or need == ANSWERS):
        why = await lacks(attempts, ep, need, found)
        if why is not None:
            found.missing[need] = why
            if need == ANSWERS:
                break  # the rest cannot be told
    return found


async def lacks(attempts: Attempts, ep: Endpoint, need: str, found: EndpointProbe) -> str | None:
    """Why the endpoint lacks `need`, or None when a real request shows it has it."""
    if need == STRUCTURED:
        return await lacks_structured(attempts, ep, found)
    body = feature_body(ep.config, need)
    try:
        answer = await ask(attempts, ep, body)
    except CallFailed as exc:
        return exc.reason
    except GiveUp as exc:
        return exc.stop.message
    if need == ANSWERS:
        return None if isinstance(answer.text, str) else "the reply holds no text"
    if need == LOGPROBS:
        return None if first_alternatives(answer.logprobs) else "the reply carries no top_logprobs for its tokens"
    return None if echoed(answer.logprobs, len(SCORED)) else "the reply has no log-probability for the prompt's tokens"


def feature_body(config: EndpointConfig, need: str) -> dict:
    """The request that shows `need`: built as every call's is (gen/llm/calls/request.py), from a task asking it."""
    messages = [{"role": "user", "content": SCORED if need == ECHO else PROMPT}]
    task = Task(
        item_id=PROBE_STEP,
        endpoint="",
        messages=messages,
        logprobs=TOP_LOGPROBS if need == LOGPROBS else (1 if need == ECHO else 0),
        max_tokens=1 if need == ECHO else 4,
        score_text=need == ECHO,
    )
    return build_request(config, messages, None, 0, task)


async def ask(attempts: Attempts, ep: Endpoint, body: dict) -> Answer:
    answer, _ = await attempts.answer(ProbeRun(), ep, body, probing=True)
    return answer


async def lacks_structured(attempts: Attempts, ep: Endpoint, found: EndpointProbe) -> str | None:
    mode = ep.config.structured_output
    if mode == "off":
        return None  # JSON is read out of the reply's text: nothing to ask of the server
    if mode == "auto":
        try:
            choice = await find_mode(attempts, ep, ProbeRun())
        except GiveUp as exc:
            return exc.stop.message
        found.notes.append(f"structured_output auto would use {choice.mode}")
        return None
    try:
        await ask(attempts, ep, probe_body(ep.config, mode))
    except CallFailed as exc:
        return f"structured_output {mode}: {exc.reason}"
    except GiveUp as exc:
        return exc.stop.message
    return None


def first_alternatives(logprobs: Any) -> bool:
    """Does a chat reply's logprobs object hold alternatives for its first token?"""
    content = logprobs.get("content") if isinstance(logprobs, Mapping) else None
    if not isinstance(content, list) or not content or not isinstance(content[0], Mapping):
        return False
    return bool(content[0].get("top_logprobs"))


def echoed(logprobs: Any, prompt_chars: int) -> bool:
    """Does a /completions reply give a log-probability to a token that starts inside the prompt (echo)?"""
    if not isinstance(logprobs, Mapping):
        return False
    pairs = zip(logprobs.get("text_offset") or [], logprobs.get("token_logprobs") or [])
    return any(isinstance(offset, int) and offset < prompt_chars and value is not None for offset, value in pairs)
