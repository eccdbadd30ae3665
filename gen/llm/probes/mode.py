"""``structured_output: auto``: which ``response_format`` an endpoint accepts, found once and remembered.

On the first step that needs parsed output from an ``auto`` endpoint, the engine sends one small request per
candidate mode, in this order, and keeps the first the server answers:

1. ``json_schema`` — ``{"type": "json_schema", "json_schema": {...}}`` (OpenAI, vLLM, recent servers);
2. ``json_object_schema`` — ``{"type": "json_object", "schema": {...}}`` (llama.cpp's server constrains the
   reply to the schema this way; servers that ignore the extra key still answer);
3. ``json_object`` — ``{"type": "json_object"}`` alone;
4. ``off`` — no ``response_format``; JSON is parsed out of the reply's text.

A mode counts as refused when the server answers the probe with an error that says so (a 4xx, or the same
5xx twice); failures that say nothing about the request (429, timeouts, an unreachable server) are retried
and stopped as for any call. The choice is stored in the LLM cache under :func:`probe_key` (the endpoint's
``base_url`` and ``model``), so a later run, ``--offline`` or ``gen plan`` needs no probe. The chosen mode
shapes every request body, and so every cache key: replies cached under one mode are never served for
another. An explicit ``structured_output`` is used as given, without a probe.

Here both halves: what the probe sends (:func:`probe_body`) and where its choice is kept (:func:`probe_key`),
and running it (:func:`find_mode`, one small request per candidate through the same retry loop as every call)
for every ``auto`` endpoint a step needs (:class:`Modes`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from gen.errors import GenError, Stopped
from gen.hashing import canonical_json
from gen.llm.accounts.counts import StepStats
from gen.llm.accounts.progress import StepCounters, announce
from gen.llm.cache.store import Cache, CachedReply
from gen.llm.calls.attempts import Attempts, CallFailed, GiveUp
from gen.llm.calls.endpoint import Endpoint, find_endpoint
from gen.llm.calls.request import build_request
from gen.llm.config import EndpointConfig
from gen.llm.structured import CANDIDATES, ModeChoice, response_format_for, schema_of
from gen.llm.task import Task

__all__ = ["PROBE_STEP", "Modes", "ProbeRun", "find_mode", "probe_body", "probe_key"]

PROBE_STEP = "structured_output probe"  # the probe's requests are counted under this step in run.json
PROBE_MAX_TOKENS = 16
PROBE_PROMPT = 'Reply with the JSON object {"ok": true} and nothing else.'


class ProbeReply(BaseModel):
    ok: bool


@dataclass
class ProbeRun:
    """What a probe's attempts count into (the :class:`gen.llm.calls.attempts.Run` of a probe): the stats of the
    step its requests are filed under (the engine's, for run.json; a fresh one when nothing is reported), progress
    counters no display reads, and no worker pool to lend a waiting place to."""

    stats: StepStats = field(default_factory=StepStats)
    counters: StepCounters = field(default_factory=lambda: StepCounters(PROBE_STEP, 0))
    pool: None = None


def probe_key(config: EndpointConfig) -> str:
    """Where the choice is kept in the LLM cache: the server and model it was found for."""
    material = {"v": 1, "structured_output_probe": {"base_url": config.base_url, "model": config.model}}
    return hashlib.sha256(canonical_json(material, ascii_only=False).encode()).hexdigest()


def probe_body(config: EndpointConfig, mode: str) -> dict:
    """The probe's request in ``mode``: the endpoint's own parameters, a short prompt, a few tokens."""
    small = config.model_copy(update={"max_tokens": PROBE_MAX_TOKENS})
    messages = [{"role": "user", "content": PROBE_PROMPT}]
    return build_request(small, messages, response_format_for(ProbeReply, mode), sample=0)


async def find_mode(attempts: Attempts, ep: Endpoint, run: ProbeRun) -> ModeChoice:
    """One small request per candidate mode until the server answers one (the module docstring)."""
    refused: dict[str, str] = {}
    for mode in CANDIDATES:
        body = probe_body(ep.config, mode)
        try:
            answer, _ = await attempts.answer(run, ep, body, probing=True)
        except CallFailed as exc:
            if exc.kind != "refused":
                stop = Stopped(
                    f"could not find out which structured_output the endpoint accepts: {exc.reason}; to go on, "
                    "check that the server is working, or set structured_output explicitly",
                    record=ep.where,
                )
                raise GiveUp(ep, stop) from None
            refused[mode] = exc.said
            continue
        input_tokens, output_tokens, estimated = answer.tokens(body["messages"])
        run.stats.add_call(input_tokens, output_tokens, ep.config.price, estimated=estimated)
        return ModeChoice(mode, "probe", refused)
    said = "; ".join(f"{mode}: {reason}" for mode, reason in refused.items())
    stop = Stopped(
        f"the endpoint refused every request of the structured-output probe: {said}; to go on, make it answer "
        "plain chat completions (check model, base_url and extra_params)",
        record=ep.where,
    )
    raise GiveUp(ep, stop)


@dataclass
class Modes:
    """The mode of every ``auto`` endpoint tasks need parsed output from: kept from earlier in this run, else
    from the cache, else found by `probe` (never in a plan: there the first candidate stands in; an offline
    run without a stored choice is an error). `probe` runs :func:`find_mode` where the engine runs its calls."""

    endpoints: dict[str, Endpoint]
    cache: Cache
    probe: Callable[[Endpoint], ModeChoice]
    progress: str

    def resolve(self, tasks: Sequence[Task], *, plan_only: bool, offline: bool, exporting: bool = False) -> None:
        for task in tasks:
            ep = find_endpoint(self.endpoints, task.endpoint, task.item_id)
            if ep.mode is not None or schema_of(task.parser) is None:
                continue
            hit = self.cache.get(probe_key(ep.config))
            if hit is not None and hit.text in CANDIDATES:
                ep.choice = ModeChoice(hit.text, "cache")
            elif plan_only:
                continue
            elif offline or exporting:
                what = "offline run" if offline else "batch files (--batch-export)"
                raise GenError(
                    f"{what}: structured_output is auto and this endpoint was never probed",
                    record=ep.where,
                    field="structured_output",
                    expected="an earlier online run with this cache, or an explicit structured_output",
                )
            else:
                ep.choice = self.probe(ep)
                self.cache.put(probe_key(ep.config), CachedReply(ep.choice.mode, "probe", 0, 0, ep.config.model))
            announce(ep.choice.line(ep.name), self.progress)
