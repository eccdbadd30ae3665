"""Running the structured-output probe (gen/llm/probe.py says what it sends and how the choice is kept): one
small request per candidate mode, through the same retry loop as every call, until the server answers one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gen.errors import GenError, Stopped
from gen.llm.attempts import Attempts, CallFailed, GiveUp, Run
from gen.llm.cache import Cache, CachedReply
from gen.llm.endpoint import Endpoint, find_endpoint
from gen.llm.probe import CANDIDATES, ModeChoice, probe_body, probe_key
from gen.llm.progress import announce
from gen.llm.structured import schema_of
from gen.llm.task import Task


async def find_mode(attempts: Attempts, ep: Endpoint, run: Run) -> ModeChoice:
    """One small request per candidate mode until the server answers one (:mod:`gen.llm.probe`)."""
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
    run without a stored choice is an error)."""

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
