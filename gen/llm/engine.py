"""The LLM engine: concurrent, rate-limited, retried, cached and resumable calls through the openai client.

A product author writes a prompt template and a parser; the engine does the rest::

    from pydantic import BaseModel
    from gen.llm import Task, render_messages

    class Question(BaseModel):
        question: str

    tasks = [Task(item_id=a.id, endpoint=options.endpoint,
                  messages=render_messages("time_content/question.j2", anchor=a), parser=Question)
             for a in anchors]
    for outcome in engine.run_step("time_content_questions", tasks):   # blocking; order = task order
        if outcome.ok:
            yield make_record(outcome.task.item_id, outcome.value.question)
        # not ok: already in engine.rejects with the reason and raw text

(Products whose replies must also pass their own checks, with regeneration, use :mod:`gen.llm.step`.) Surface:

``Engine(endpoints, settings=None, *, cache=None, plan_only=False)``
    ``endpoints``: the recipe's ``llm:`` mapping (name -> :class:`EndpointConfig` or dict);
    ``settings``: :class:`RunSettings` (limit overrides, cache folder, ``offline``, progress mode, request
    processes: :mod:`gen.llm.senders`);
    ``cache``: a :class:`Cache` (default: opened at ``settings.cache_path()``);
    ``plan_only``: make no calls; ``run_step`` returns what the cache holds and records a plan.
``engine.run_step(step, tasks, *, max_reject_rate=0.2, reject_option=None) -> list[Outcome]``
    Runs the tasks concurrently (asyncio on a background thread; the call blocks). Items whose reply
    does not parse get one correction round; items that still fail (or whose requests failed within their
    budget, or were refused, or whose reply was truncated) come back ``ok=False`` and are appended to
    ``engine.rejects``. If more than ``max_reject_rate`` of the step's items (over every call with that step
    name) are rejected, or an endpoint is given up on (:mod:`gen.llm.giveup`), the step stops with
    :class:`gen.errors.Stopped`: every item not finished is then in ``engine.rejects`` as ``given_up``, every
    completed call is in the cache, and ``engine.report()`` still works. ``reject_option``: where the user
    sets the rate (for the message).
``engine.plan(step, tasks) -> StepPlan``: calls needed, calls cached, projected tokens and cost; no network.
``engine.preview(tasks) -> str``: the prompts exactly as they would be sent, with their cache status.
``engine.rejects``: list of dicts ``{step, item_id, sample, endpoint, kind, reason, raw_text}``.
``engine.report() -> dict``: per step calls made / cached / failed, requests, retries, tokens, estimated
    cost, errors by type; plus endpoints (data parameters only), cache path, mode, plans. For run.json.
``engine.close()`` (or ``with Engine(...) as engine:``): finishes cache writes, closes connections.
``with engine.lane(lane):`` / ``engine.merge(lane)``: steps run from several threads at once, each thread's in
    its own :class:`gen.llm.lanes.Lane` (rejects, reject limit), merged in order (:mod:`gen.llm.lanes`).

Behaviour: one concurrency limit, requests/tokens-per-minute buckets and 429 pause per endpoint,
shared by all steps (:mod:`gen.llm.limiter`); retries and backoff as in :mod:`gen.llm.request`, within each
call's budget and the endpoint's breaker (:mod:`gen.llm.giveup`); ``structured_output: auto`` resolved by a
probe on an endpoint's first use, or from the cache (:mod:`gen.llm.probe`); a content-addressed SQLite cache
(:mod:`gen.llm.cache`; errors and truncated replies never stored) so a re-run makes no calls and an
interrupted run resumes; ``offline`` turns the first cache miss into a GenError naming the step and item;
endpoints in ``mode: batch`` (or a run writing batch files) answer through :mod:`gen.llm.batching` first.
API keys are read from the environment only when a request must be sent, and are scrubbed from every reply,
reason, log line and error message (:mod:`gen.llm.endpoint`).

This module only orchestrates each item through cache, request and correction round. Preparing tasks is
:mod:`gen.llm.step_run`, a call's retry loop :mod:`gen.llm.attempts`, the probe :mod:`gen.llm.probing`, counting
:mod:`gen.llm.accounting`, the display :mod:`gen.llm.progress`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import logging
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, cast

from gen.llm.accounting import Accounts, StepStats, error_summary, is_reject, reject_limit, too_many_rejects
from gen.llm.attempts import Attempts, CallFailed, GiveUp
from gen.llm.batching import Batching
from gen.llm.cache import Cache, CachedReply
from gen.llm.config import EndpointConfig, RunSettings
from gen.llm.endpoint import Endpoint, KeyScrubber, load_endpoints
from gen.llm.features import EndpointProbe, probe_endpoints
from gen.llm.lanes import Lane, Lanes
from gen.llm.plan import PlanBuilder, StepPlan
from gen.llm.probe import PROBE_STEP, ModeChoice
from gen.llm.probing import Modes, find_mode
from gen.llm.progress import Reporter, make_reporter, showing
from gen.llm.request import Answer, RetryPolicy, body_messages, build_request, http_stack
from gen.llm.senders import senders
from gen.llm.step_run import NotCached, Prepared, Reply, StepRun, TooManyRejects, prepare, preview
from gen.llm.structured import ParseFailure, correction_message, parse_reply
from gen.llm.task import Outcome, Task, estimate_input_tokens
from gen.llm.workers import LoopThread, WorkerPool

__all__ = ["Engine", "build_request", "http_stack"]  # the last two stay importable from here

log = logging.getLogger("gen.llm")


class Engine:
    """See the module docstring."""

    def __init__(
        self,
        endpoints: Mapping[str, EndpointConfig | Mapping[str, Any]],
        settings: RunSettings | None = None,
        *,
        cache: Cache | None = None,
        plan_only: bool = False,
        reporter: Reporter | None = None,
        templates_dir: str | None = None,
        retry: RetryPolicy | None = None,  # backoff and Retry-After caps (tests shorten them)
    ) -> None:
        self.settings = settings or RunSettings()
        self.templates_dir = templates_dir  # a recipe's own templates, which may shadow the correction prompt
        self.plan_only = plan_only
        self.offline = self.settings.offline
        self._endpoints = load_endpoints(endpoints, self.settings)
        self._own_cache = cache is None
        self.cache = cache if cache is not None else Cache(self.settings.cache_path())
        self._reporter = reporter
        self._accounts = Accounts()
        self._keys = KeyScrubber()
        for ep in self._endpoints.values():
            self._keys.add_from_env(ep.config.api_key_env)
        # a request process beyond the requests that may be in flight at once would never get one
        sender_count = min(self.settings.request_processes, self.concurrency)
        self._attempts = Attempts(retry or RetryPolicy(), self._keys, senders(sender_count))
        self._loop_thread: LoopThread | None = None
        self._loop_lock = threading.Lock()
        self._modes_lock = threading.Lock()  # two batches in flight probe an endpoint once
        self._lanes = Lanes()
        self._inflight: dict[str, asyncio.Future[Reply]] = {}
        self._closed = False
        self._batches = Batching(self.settings, self.cache, self._endpoints, self._keys)
        processes = self._attempts.senders
        if processes is not None and not (plan_only or self.offline or self.batch_mode):
            asyncio.run_coroutine_threadsafe(processes.start(), self._loop().loop)  # why now: gen.llm.senders

    # -- public ---------------------------------------------------------------------------------------
    @property
    def endpoints(self) -> dict[str, EndpointConfig]:
        """Effective endpoint configs (run-setting overrides applied)."""
        return {name: ep.config for name, ep in self._endpoints.items()}

    @property
    def concurrency(self) -> int:
        """Requests every endpoint together may have in flight at once."""
        return sum(ep.config.max_concurrency for ep in self._endpoints.values())

    @property
    def batch_mode(self) -> bool:
        """Does any endpoint answer through batches (so a step should hold as many items as a batch can)?"""
        return any(self._batches.batched(ep) for ep in self._endpoints.values())

    @property
    def rejects(self) -> list[dict[str, Any]]:
        """Every item the engine gave up on, in the order the steps ran (in a lane: the lanes merged, then its own)."""
        return self._lanes.seen(self._accounts.rejects)

    def run_step(
        self,
        step: str,
        tasks: Sequence[Task],
        *,
        max_reject_rate: float | None = 0.2,
        reject_option: str | None = None,
    ) -> list[Outcome]:
        """Run the tasks; outcomes in task order. See the module docstring."""
        if self._closed:
            raise RuntimeError("the engine is closed")
        lane = self._lanes.current()  # (LaneCancelled if it was)
        started = time.monotonic()
        try:
            self._resolve_modes(tasks)
        except GiveUp as exc:
            self._give_up_all(step, tasks, exc, lane)
        prepared = prepare(tasks, self._endpoints)
        mark = self.cache.recent.count  # (before the keys are read: StepRun.lookup)
        prefetched = self.cache.get_many(p.key for p in prepared)
        stats = self._accounts.step(step, items=len(prepared))
        tally, before = self._lanes.tallies(step, lane)
        tally.items += len(prepared)
        if self.offline and not self.plan_only:  # the first miss is the error
            for p in (p for p in prepared if p.key not in prefetched):
                raise p.offline_error(step, self.cache.path)
        if not self.plan_only and any(self._batches.batched(p.endpoint) for p in prepared):
            self._batches.settle(step, prepared, stats, self._loop().run, self._run_async)
            prefetched = self.cache.get_many(p.key for p in prepared)
        limit = None if self.plan_only else reject_limit(max_reject_rate, before.items + tally.items)
        run = StepRun(step, prepared, stats, prefetched, PlanBuilder(step) if self.plan_only else None, limit, tally)
        run.rejected_before, run.mark = before.rejected, mark
        if not prepared:
            return []
        try:
            self._loop().run(self._run_async(run, self._reporter_for(run)), lane)
        except TooManyRejects:
            self._accounts.add_rejects(step, run.outcomes, lane)
            assert max_reject_rate is not None  # there is no limit to pass without one
            rejected, items = before.rejected + tally.rejected, before.items + tally.items
            stop = too_many_rejects(step, rejected, items, max_reject_rate, run.reject_kinds, reject_option)
            refusal = next((o.reason for o in run.outcomes if o is not None and o.kind == "refused"), None)
            if refusal is not None:  # what the server said is the first thing to know
                stop.message += f"; first refusal: {refusal}"
            raise stop from None
        except GiveUp as exc:
            self._give_up_rest(run, exc, lane)
            raise exc.stop from None
        finally:
            self._accounts.ran(stats, started, time.monotonic(), {p.endpoint.name for p in prepared})
        self.cache.flush()  # the step's replies are on disk when run_step returns
        self._accounts.add_rejects(step, run.outcomes, lane)
        if run.plan is not None:
            self._accounts.add_plan(run.plan.finish(self.endpoints, items=len(prepared)))
        return cast(list[Outcome], run.outcomes)  # the pool has filled every slot

    def plan(self, step: str, tasks: Sequence[Task]) -> StepPlan:
        """Calls needed, calls cached, projected tokens and cost for these tasks; no network, no key needed.

        Replies already cached are parsed, so a cached reply that needs a correction round counts the
        correction call (cached or needed) too.
        """
        prepared = prepare(tasks, self._endpoints)
        builder = PlanBuilder(step)
        run = StepRun(step, prepared, StepStats(), self.cache.get_many(p.key for p in prepared), builder)
        if prepared:
            self._loop().run(self._run_async(run, None))
        return builder.finish(self.endpoints, items=len(prepared))

    def preview(self, tasks: Sequence[Task]) -> str:
        """The rendered prompt(s) of these tasks as the endpoint will receive them, with cache status."""
        prepared = prepare(tasks, self._endpoints)
        return preview(prepared, self.cache.get_many(p.key for p in prepared))

    def probe(self, needs: Mapping[str, Mapping[str, list[str]]]) -> list[EndpointProbe]:
        """`gen validate --probe`: small real requests showing whether each endpoint in `needs` (endpoint ->
        feature -> the steps needing it) answers and has those features (gen/llm/features.py). Nothing is cached
        or counted in the report, and the run's endpoints are left as they were."""
        return self._loop().run(probe_endpoints(self._attempts, self.endpoints, needs))

    def report(self) -> dict:
        """Accounting for run.json: per step, totals, errors by type, endpoints (data parameters), cache."""
        endpoints = {name: ep.report() for name, ep in self._endpoints.items()}
        return self._accounts.report(
            mode="plan" if self.plan_only else ("offline" if self.offline else "run"),
            endpoints=endpoints,
            cache={"path": str(self.cache.path), "written": self.cache.writes},
        )

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self._loop_thread is not None:
                try:
                    self._loop_thread.run(self._close_clients())
                finally:
                    self._loop_thread.close()
        finally:
            self._batches.close()
            if self._own_cache:
                self.cache.close()
            else:
                self.cache.flush()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- structured_output: auto ---------------------------------------------------------------------
    def _resolve_modes(self, tasks: Sequence[Task]) -> None:
        def probe(ep: Endpoint) -> ModeChoice:
            run = StepRun(PROBE_STEP, [], self._accounts.step(PROBE_STEP), {})
            return self._loop().run(find_mode(self._attempts, ep, run))

        modes = Modes(self._endpoints, self.cache, probe, self.settings.progress)
        exporting = self.settings.batch_export is not None  # no server to probe
        with self._modes_lock:
            modes.resolve(tasks, plan_only=self.plan_only, offline=self.offline, exporting=exporting)

    # -- giving up ------------------------------------------------------------------------------------
    def _give_up_all(self, step: str, tasks: Sequence[Task], exc: GiveUp, lane: Lane | None) -> NoReturn:
        """The endpoint was given up on before any item started: every item is given up."""
        tally = self._lanes.tallies(step, lane)[0]
        run = StepRun(step, [], self._accounts.step(step, items=len(tasks)), {}, tally=tally)
        tally.items += len(tasks)
        outcomes = [Outcome.failed(task, "given_up", _given_up(exc), None) for task in tasks]
        for outcome in outcomes:
            run.add_outcome(outcome)
        self._accounts.add_rejects(step, outcomes, lane)
        exc.endpoint.gave_up()
        raise exc.stop from None

    def _give_up_rest(self, run: StepRun, exc: GiveUp, lane: Lane | None) -> None:
        """Record every item of the step that had not finished as given up, with the reason."""
        run.give_up(_given_up(exc))
        self._accounts.add_rejects(run.step, run.outcomes, lane)
        self.cache.flush()  # every completed call stays cached for the resume
        exc.endpoint.gave_up()

    def _reporter_for(self, run: StepRun) -> Reporter | None:
        """A progress display, only when calls are about to be made (cached steps finish at once)."""
        if self.plan_only or all(p.key in run.prefetched for p in run.prepared):
            return None
        return self._reporter or make_reporter(self.settings.progress, self.settings.progress_interval_s)

    # -- lanes: batches in flight together (gen.llm.lanes) ---------------------------------------------
    def lane(self, lane: Lane) -> contextlib.AbstractContextManager[Lane]:
        """The steps this thread runs inside the block belong to `lane`."""
        return self._lanes.entered(lane)

    def merge(self, lane: Lane) -> None:
        """A lane's tallies and rejects join the engine's (the runner merges lanes in batch order)."""
        self._accounts.add_records(self._lanes.merge(lane))

    def _loop(self) -> LoopThread:
        with self._loop_lock:
            if self._loop_thread is None:
                self._loop_thread = LoopThread()
            return self._loop_thread

    # -- the step (loop thread) -----------------------------------------------------------------------
    async def _run_async(self, run: StepRun, reporter: Reporter | None) -> None:
        async with showing(reporter, run.counters, lambda: error_summary(run.step, run.stats.errors)):
            endpoints = {p.endpoint.name: p.endpoint for p in run.prepared}.values()
            width = sum(ep.config.max_concurrency for ep in endpoints)
            run.pool = WorkerPool(run.prepared, width, functools.partial(self._do_item, run))
            await run.pool.run()

    async def _do_item(self, run: StepRun, p: Prepared) -> None:
        outcome = await self._item_outcome(run, p)
        run.outcomes[p.index] = outcome
        rejected = is_reject(outcome)
        run.counters.add(cached=outcome.cached, rejected=rejected)
        if run.add_outcome(outcome):
            raise TooManyRejects()

    async def _item_outcome(self, run: StepRun, p: Prepared) -> Outcome:
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
        body, key = p.correction(first.text, correction_message(task.parser, error, self.templates_dir))
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
        answered = self._batches.reply(run, p, key, hit)  # a batch's reply, counted as a call made, or its failure
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
            if self._batches.batched(p.endpoint):
                run.misses[key] = (p, body)
            raise NotCached()
        if self._batches.batched(p.endpoint):  # every round was settled before this pass: nothing is left to send
            raise CallFailed("request_failed", "no batch answered this request")
        if self.offline:
            raise p.offline_error(run.step, self.cache.path)
        return await self._send_shared(run, p, body, key)

    async def _send_shared(self, run: StepRun, p: Prepared, body: dict, key: str) -> Reply:
        """Send the request, unless an identical one of this run is already on its way: then wait for it."""
        shared = self._inflight.get(key)
        if shared is not None:
            reply = await asyncio.shield(shared)
            run.stats.calls_cached += 1
            return dataclasses.replace(reply, cached=True)
        future: asyncio.Future[Reply] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
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
            self._inflight.pop(key, None)

    async def _send(self, run: StepRun, p: Prepared, body: dict, key: str) -> Reply:
        """The request, attempted as often as the call's budget allows."""
        answer, estimate = await self._attempts.answer(run, p.endpoint, body)
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
            refusal = f" (refusal: {self._keys(str(answer.refusal))[:300]})" if answer.refusal else ""
            raise CallFailed("empty", f"the endpoint returned no text{refusal}")
        text = self._keys(answer.text)
        reply = Reply(text, answer.finish_reason, input_tokens, output_tokens, False, answer.logprobs)
        if reply.truncated(p.task):
            stats.errors["truncated"] += 1
        else:
            kept = CachedReply(text, reply.finish_reason, input_tokens, output_tokens, ep.config.model, reply.logprobs)
            self.cache.put(key, kept)
        return reply

    async def _close_clients(self) -> None:
        await self._attempts.close()
        for ep in self._endpoints.values():
            await ep.close()


def _given_up(exc: GiveUp) -> str:
    return f"given up when the run stopped: {exc.stop.message}"
