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
    processes: :mod:`gen.llm.calls.senders`);
    ``cache``: a :class:`Cache` (default: opened at ``settings.cache_path()``);
    ``plan_only``: make no calls; ``run_step`` returns what the cache holds and records a plan.
``engine.run_step(step, tasks, *, max_reject_rate=0.2, reject_option=None, items_of=None) -> list[Outcome]``
    Runs the tasks concurrently (asyncio on a background thread; the call blocks). Items whose reply
    does not parse get one correction round; items that still fail (or whose requests failed within their
    budget, or were refused, or whose reply was truncated) come back ``ok=False`` and are appended to
    ``engine.rejects``. If more than ``max_reject_rate`` of the step's items (over every call with that step
    name) are rejected, or an endpoint is given up on (:mod:`gen.llm.calls.giveup`), the step stops with
    :class:`gen.errors.Stopped`: every item not finished is then in ``engine.rejects`` as ``given_up``, every
    completed call is in the cache, and ``engine.report()`` still works. ``reject_option``: where the user
    sets the rate (for the message). ``items_of``: the tasks are calls for the items of a checked step
    (:mod:`gen.llm.step`), which registers them (``engine.add_items``) and reports their fates
    (``engine.decide``); the items' counts and the reject limit are then that step's (gen.llm.accounts.counts).
``engine.plan(step, tasks) -> StepPlan``: calls needed, calls cached, projected tokens and cost; no network.
``engine.preview(tasks) -> str``: the prompts exactly as they would be sent, with their cache status.
``engine.rejects``: list of dicts ``{step, item_id, sample, endpoint, kind, reason, raw_text}``.
``engine.report() -> dict``: per step calls made / cached / failed, requests, retries, tokens, estimated
    cost, errors by type; plus endpoints (data parameters only), cache path, mode, plans. For run.json.
``engine.close()`` (or ``with Engine(...) as engine:``): finishes cache writes, closes connections.
``with engine.lane(lane):`` / ``engine.merge(lane)``: steps run from several threads at once, each thread's in
    its own :class:`gen.llm.accounts.lanes.Lane` (rejects, reject limit), merged in order.

Behaviour: one concurrency limit, requests/tokens-per-minute buckets and 429 pause per endpoint,
shared by all steps (:mod:`gen.llm.calls.limiter`); retries and backoff as in :mod:`gen.llm.calls.request`, within each
call's budget and the endpoint's breaker (:mod:`gen.llm.calls.giveup`); ``structured_output: auto`` resolved by a
probe on an endpoint's first use, or from the cache (:mod:`gen.llm.probes.mode`); a content-addressed SQLite cache
(:mod:`gen.llm.cache.store`; errors and truncated replies never stored) so a re-run makes no calls and an
interrupted run resumes; ``offline`` turns the first cache miss into a GenError naming the step and item;
endpoints in ``mode: batch`` (or a run writing batch files) answer through :mod:`gen.llm.engine.batching` first.
API keys are read from the environment only when a request must be sent, and are scrubbed from every reply,
reason, log line and error message (:mod:`gen.llm.calls.endpoint`).

This module schedules a step's items and counts them. One item's way through cache, batch, request and
correction round is :mod:`gen.llm.engine.items`; preparing tasks is :mod:`gen.llm.engine.run`, the batch rounds
:mod:`gen.llm.engine.batching`, a call's retry loop :mod:`gen.llm.calls.attempts`, the probe
:mod:`gen.llm.probes.mode`, counting :mod:`gen.llm.accounts.counts`, the display :mod:`gen.llm.accounts.progress`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, NoReturn, cast

from gen.errors import Stopped
from gen.llm.accounts.counts import Accounts, StepStats, error_summary, past_limit, too_many_rejects
from gen.llm.accounts.lanes import Lane, Lanes, Tally
from gen.llm.accounts.plan import PlanBuilder, StepPlan
from gen.llm.accounts.progress import Reporter, items_line, make_reporter, showing
from gen.llm.cache.store import Cache
from gen.llm.calls.attempts import Attempts, GiveUp
from gen.llm.calls.endpoint import Endpoint, KeyScrubber, load_endpoints
from gen.llm.calls.request import RetryPolicy
from gen.llm.calls.senders import senders
from gen.llm.config import EndpointConfig, RunSettings
from gen.llm.engine.batching import Batching
from gen.llm.engine.items import ItemPath
from gen.llm.engine.run import Misses, Prepared, StepRun, TooManyRejects, prepare, preview
from gen.llm.engine.workers import LoopThread, WorkerPool
from gen.llm.probes.features import EndpointProbe, probe_endpoints
from gen.llm.probes.mode import PROBE_STEP, Modes, ProbeRun, find_mode
from gen.llm.structured import ModeChoice
from gen.llm.task import Outcome, Task
from gen.templating import INSTALLED, Templates

__all__ = ["Engine"]

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
        templates: Templates = INSTALLED,
        retry: RetryPolicy | None = None,  # backoff and Retry-After caps (tests shorten them)
    ) -> None:
        self.settings = settings or RunSettings()
        self.templates = templates  # a recipe's own templates, which may shadow the correction prompt
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
        self._closed = False
        self._batches = Batching(self.settings, self.cache, self._endpoints, self._keys)
        self._items = ItemPath(self.cache, self._batches, self._attempts, self._keys, self.offline, templates)
        processes = self._attempts.senders
        if processes is not None and not (plan_only or self.offline or self.batch_mode):
            asyncio.run_coroutine_threadsafe(processes.start(), self._loop().loop)  # why now: gen.llm.calls.senders

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
        items_of: str | None = None,
    ) -> list[Outcome]:
        """Run the tasks; outcomes in task order. See the module docstring.

        ``items_of``: the tasks are calls for items of that step, registered with :meth:`add_items` and
        decided with :meth:`decide` by the caller (gen.llm.step); a call that fails ends its item here, as
        rejected. Without it each task is an item of `step`, its outcome its fate."""
        if self._closed:
            raise RuntimeError("the engine is closed")
        lane = self._lanes.current()  # (LaneCancelled if it was)
        fates_step = items_of or step
        started = time.monotonic()
        try:
            self._resolve_modes(tasks, lane)
        except GiveUp as exc:
            self._give_up_all(step, tasks, exc, lane, items_of)
        prepared = prepare(tasks, self._endpoints)
        mark = self.cache.recent.count  # (before the keys are read: StepRun.lookup)
        prefetched = self.cache.get_many(p.key for p in prepared)
        stats = self._accounts.step(step, calls=len(prepared))
        tally, before = self._lanes.tallies(fates_step, lane)
        if items_of is None:
            tally.items += len(prepared)
        if self.offline and not self.plan_only:  # the first miss is the error
            for p in (p for p in prepared if p.key not in prefetched):
                raise p.offline_error(step, self.cache.path)
        if not self.plan_only and any(self._batches.batched(p.endpoint) for p in prepared):
            self._settle_batches(step, prepared, stats)
            prefetched = self.cache.get_many(p.key for p in prepared)
        rate = None if self.plan_only else max_reject_rate
        run = StepRun(step, prepared, stats, prefetched, PlanBuilder(step) if self.plan_only else None, rate, tally)
        run.before, run.caller_decides, run.mark = before, items_of is not None, mark
        if not prepared:
            return []
        try:
            self._loop().run(self._run_async(run, self._reporter_for(run)), lane)
        except TooManyRejects:
            self._accounts.add_rejects(step, run.outcomes, lane)
            stop = self._too_many(fates_step, run.fates(), max_reject_rate, reject_option)
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

    def add_items(self, step: str, count: int) -> None:
        """`count` more items of `step`, whose fates the caller reports with :meth:`decide` (gen.llm.step)."""
        self._lanes.tallies(step, self._lanes.current())[0].items += count

    def decide(
        self,
        step: str,
        *,
        ok: int = 0,
        rejected: Sequence[str] = (),
        max_reject_rate: float | None = None,
        reject_option: str | None = None,
    ) -> None:
        """Items of `step` decided by the caller: `ok` of them in the output, one rejected per kind in
        `rejected`. Raises the reject limit's Stopped when the step's rejects now pass `max_reject_rate` (the
        caller adds the rejects it holds to it)."""
        tally, before = self._lanes.tallies(step, self._lanes.current())
        tally.ok += ok
        for kind in rejected:
            tally.reject(kind)
        if not self.plan_only and past_limit(max_reject_rate, before.plus(tally)):
            raise self._too_many(step, before.plus(tally), max_reject_rate, reject_option)

    def summary(self, step: str, rejects_in: str = "rejects.jsonl") -> str:
        """The step's items so far, in the live line's words, to close a checked step (whose last rejects are
        decided after its last round's line); `rejects_in` names the file that keeps the rejects' reasons."""
        tally, before = self._lanes.tallies(step, self._lanes.current())
        return f"[llm] {step}: {items_line(before.plus(tally))} (reasons and raw replies go to {rejects_in})"

    def withdraw_given_up(self, steps: set[str], item_ids: set[str]) -> set[str]:
        """Take back the engine's `given_up` lines of these items (gen.llm.step writes fuller ones, with the
        attempts they had); the ids taken back. They stay counted as rejected, once."""
        return self._accounts.withdraw_given_up(steps, item_ids, self._lanes.current())

    @staticmethod
    def _too_many(step: str, fates: Tally, rate: float | None, option: str | None) -> Stopped:
        assert rate is not None  # there is no limit to pass without one
        return too_many_rejects(step, fates.rejected, fates.items, rate, fates.kinds, option)

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
        feature -> the steps needing it) answers and has those features (gen/llm/probes/features.py). Nothing is cached
        or counted in the report, and the run's endpoints are left as they were."""
        return self._loop().run(probe_endpoints(self._attempts, self.endpoints, needs))

    def report(self) -> dict:
        """Accounting for run.json: per step, totals, errors by type, endpoints (data parameters), cache."""
        endpoints = {name: ep.report() for name, ep in self._endpoints.items()}
        return self._accounts.report(
            mode="plan" if self.plan_only else ("offline" if self.offline else "run"),
            endpoints=endpoints,
            cache={"path": str(self.cache.path), "written": self.cache.writes},
            fates=self._lanes.merged,
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

    # -- batches (gen.llm.engine.batching) ------------------------------------------------------------------
    def _settle_batches(self, step: str, prepared: list[Prepared], stats: StepStats) -> None:
        """Batch rounds until every call of the step's batched endpoints is answered or given up; with
        --batch-export, the first round's calls are written as files instead and the run stops."""
        tries: Counter[str] = Counter()
        while misses := self._missing(step, prepared):
            if self.settings.batch_export is not None:
                raise self._batches.export(step, misses)
            self._loop().run(self._batches.round(step, misses, stats, tries))
            self.cache.flush()

    def _missing(self, step: str, prepared: list[Prepared]) -> Misses:
        """The calls of batched endpoints still unanswered: the step walked without sending, as a plan is."""
        look = StepRun(step, prepared, StepStats(), self.cache.get_many(p.key for p in prepared), misses={})
        self._loop().run(self._run_async(look, None))
        assert look.misses is not None
        return look.misses

    # -- structured_output: auto ---------------------------------------------------------------------
    def _resolve_modes(self, tasks: Sequence[Task], lane: Lane | None) -> None:
        def probe(ep: Endpoint) -> ModeChoice:
            run = ProbeRun(self._accounts.step(PROBE_STEP))
            # in the step's lane: a stop cancels the probe as it cancels the step (it would wait out the request)
            return self._loop().run(find_mode(self._attempts, ep, run), lane)

        modes = Modes(self._endpoints, self.cache, probe, self.settings.progress)
        exporting = self.settings.batch_export is not None  # no server to probe
        with self._modes_lock:
            modes.resolve(tasks, plan_only=self.plan_only, offline=self.offline, exporting=exporting)

    # -- giving up ------------------------------------------------------------------------------------
    def _give_up_all(
        self, step: str, tasks: Sequence[Task], exc: GiveUp, lane: Lane | None, items_of: str | None
    ) -> NoReturn:
        """The endpoint was given up on before any item started: every item is given up."""
        tally = self._lanes.tallies(items_of or step, lane)[0]
        run = StepRun(step, [], self._accounts.step(step, calls=len(tasks)), {}, tally=tally)
        run.caller_decides = items_of is not None
        if items_of is None:
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

    # -- lanes: batches in flight together (gen.llm.accounts.lanes) ---------------------------------------------
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
        outcome = await self._items.outcome(run, p)
        run.outcomes[p.index] = outcome
        run.counters.add(cached=outcome.cached)
        if run.add_outcome(outcome):
            raise TooManyRejects()

    async def _close_clients(self) -> None:
        await self._attempts.close()
        for ep in self._endpoints.values():
            await ep.close()


def _given_up(exc: GiveUp) -> str:
    return f"given up when the run stopped: {exc.stop.message}"
