"""One item's way through the engine: its reply from the cache, from a batch or from the endpoint (an identical
request already in flight in this run is shared, not sent twice), cached unless truncated, parsed, and given one
correction round when it does not parse. The engine (:mod:`gen.llm.engine`) schedules the items of a step and
counts their fates; this module decides each item's outcome."""

from __future__ import annotations

import asyncio
import dataclasses
from dataclasses import dataclass, field

from gen.llm.cache.store import Cache, CachedReply
from gen.llm.calls.attempts import Attempts, CallFailed
from gen.llm.calls.endpoint import KeyScrubber
from gen.llm.calls.request import Answer, body_messages
from gen.llm.engine.batching import Batching
from gen.llm.engine.run import NotCached, Prepared, Reply, StepRun
from gen.llm.structured import ParseFailure, correction_message, parse_reply
from gen.llm.task import Outcome, estimate_input_tokens
from gen.templating import Templates


@dataclass
class ItemPath:
    """What an item's way needs from its engine: the cache, the batches, the retry loop, the key scrubber,
    whether a cache miss is an error (`offline`), and the recipe's templates (for the correction prompt)."""

    cache: Cache
    batches: Batching
    attempts: Attempts
    keys: KeyScrubber
    offline: bool
    templates: Templates
    inflight: dict[str, asyncio.Future[Reply]] = field(default_factory=dict)  # by cache key

    async def outcome(self, run: StepRun, p: Prepared) -> Outcome:
        """The first reply, parsed; a reply that does not parse gets one correction round."""
        task = p.task
        try:
            first = await self._reply(run, p, p.body, p.key)
        except CallFailed as exc:
            return Outcome.failed(task, exc.kind, exc.reason, exc.raw)
        except NotCached:
            return Outcome.failed(task, "not_cached", "not cached (plan only)", None)
        if first.truncated(task):
            return Outcome.failed(task, "truncated", f"reply truncated ({p.truncation()})", first.text)
        try:
            value = parse_reply(task.parser, first.text)
        except ParseFailure as exc:
            return await self._correct(run, p, first, str(exc))
        return Outcome(task, ok=True, value=value, text=first.text, cached=first.cached, logprobs=first.logprobs)

    async def _correct(self, run: StepRun, p: Prepared, first: Reply, error: str) -> Outcome:
        """The correction round: the reply and what is wrong with it go back to the model, once."""
        task = p.task
        body, key = p.correction(first.text, correction_message(task.parser, error, self.templates))
        run.stats.corrections += 1
        try:
            second = await self._reply(run, p, body, key)
        except CallFailed as exc:
            return Outcome.failed(task, exc.kind, f"{error}; the correction round failed: {exc.reason}", first.text)
        except NotCached:
            return Outcome.failed(task, "not_cached", "correction round not cached (plan only)", first.text)
        cached = first.cached and second.cached
        if second.truncated(task):
            return Outcome.failed(
                task, "truncated", f"{error}; the corrected reply was truncated ({p.truncation()})", second.text, cached
            )
        try:
            value = parse_reply(task.parser, second.text)
        except ParseFailure as exc:
            return Outcome.failed(
                task, "parse", f"{exc} (after one correction round; first reply: {error})", second.text, cached
            )
        return Outcome(
            task, ok=True, value=value, text=second.text, cached=cached, corrected=True, logprobs=second.logprobs
        )

    async def _reply(self, run: StepRun, p: Prepared, body: dict, key: str) -> Reply:
        """A reply from the cache, or from the endpoint (then cached unless truncated)."""
        hit = run.lookup(self.cache, key, first=key == p.key)
        answered = self.batches.reply(run, p, key, hit)  # a batch's reply, counted as a call made, or its failure
        if answered is not None:
            return answered
        if hit is not None:
            run.stats.add_cached(hit)
            if run.plan is not None:
                run.plan.cached(p.endpoint.name, hit.output_tokens)
            return Reply(hit.text, hit.finish_reason, hit.input_tokens, hit.output_tokens, True, hit.logprobs)
        if run.plan is not None:
            run.plan.needed(p.endpoint.name, estimate_input_tokens(body_messages(body)))
            raise NotCached()
        if run.misses is not None:  # looking ahead for the next batch round
            if self.batches.batched(p.endpoint):
                run.misses[key] = (p, body)
            raise NotCached()
        if self.batches.batched(p.endpoint):  # every round was settled before this pass: nothing is left to send
            raise CallFailed("request_failed", "no batch answered this request")
        if self.offline:
            raise p.offline_error(run.step, self.cache.path)
        return await self._send_shared(run, p, body, key)

    async def _send_shared(self, run: StepRun, p: Prepared, body: dict, key: str) -> Reply:
        """Send the request, unless an identical one of this run is already on its way: then wait for it."""
        shared = self.inflight.get(key)
        if shared is not None:
            reply = await asyncio.shield(shared)
            run.stats.calls_cached += 1
            return dataclasses.replace(reply, cached=True)
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self.inflight[key] = future
        try:
            reply = await self._send(run, p, body, key)
        except BaseException as exc:
            future.set_exception(exc if isinstance(exc, Exception) else CallFailed("cancelled", "cancelled"))
            future.exception()  # retrieved, so an error no other item waited for is not logged as unhandled
            raise
        else:
            future.set_result(reply)
            return reply
        finally:
            self.inflight.pop(key, None)

    async def _send(self, run: StepRun, p: Prepared, body: dict, key: str) -> Reply:
        """The request, attempted as often as the call's budget allows."""
        answer, estimate = await self.attempts.answer(run, p.endpoint, body)
        return self._received(run, p, body, key, answer, estimate)

    def _received(self, run: StepRun, p: Prepared, body: dict, key: str, answer: Answer, estimate: int) -> Reply:
        """Count a completion and cache it; a truncated one is returned but never cached, no text is a failure."""
        ep, stats = p.endpoint, run.stats
        input_tokens, output_tokens, estimated = answer.tokens(body_messages(body))
        ep.flow.succeeded(estimate, input_tokens + output_tokens)
        stats.add_call(input_tokens, output_tokens, ep.config.price, estimated=estimated)
        run.counters.note_request(input_tokens + output_tokens)
        if not isinstance(answer.text, str):
            stats.calls_failed += 1
            stats.errors["empty_reply"] += 1
            refusal = f" (refusal: {self.keys(str(answer.refusal))[:300]})" if answer.refusal else ""
            raise CallFailed("empty", f"the endpoint returned no text{refusal}")
        text = self.keys(answer.text)
        reply = Reply(text, answer.finish_reason, input_tokens, output_tokens, False, answer.logprobs)
        if reply.truncated(p.task):
            stats.errors["truncated"] += 1
        else:
            kept = CachedReply(text, reply.finish_reason, input_tokens, output_tokens, ep.config.model, reply.logprobs)
            self.cache.put(key, kept)
        return reply
