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

(Products whose replies must also pass their own checks, with regeneration, use :mod:`gen.llm.step`.)

Surface:

``Engine(endpoints, settings=None, *, cache=None, plan_only=False)``
    ``endpoints``: the recipe's ``llm:`` mapping (name -> :class:`EndpointConfig` or dict);
    ``settings``: :class:`RunSettings` (limit overrides, cache folder, ``offline``, progress mode);
    ``cache``: a :class:`Cache` (default: opened at ``settings.cache_path()``);
    ``plan_only``: make no calls; ``run_step`` returns what the cache holds and records a plan.
``engine.run_step(step, tasks, *, max_reject_rate=0.2, reject_option=None) -> list[Outcome]``
    Runs the tasks concurrently (asyncio on a background thread; the call blocks). Items whose reply
    does not parse get one correction round; items that still fail (or whose requests failed within their
    budget, or were refused, or whose reply was truncated) come back ``ok=False`` and are appended to
    ``engine.rejects``. If more than ``max_reject_rate`` of the step's items (over every call with that step
    name) are rejected, or an endpoint is given up on (:mod:`gen.llm.giveup`), the step stops with
    :class:`gen.errors.Stopped`: every item not finished is then in ``engine.rejects`` as ``given_up``, every
    completed call is in the cache, and ``engine.report()`` still works. ``reject_option`` says where the
    user sets the rate (for the message).
``engine.plan(step, tasks) -> StepPlan``
    Calls needed, calls cached, projected tokens and cost — without any network.
``engine.preview(tasks) -> str``: the prompts exactly as they would be sent, with their cache status.
``engine.rejects``: list of dicts ``{step, item_id, sample, endpoint, kind, reason, raw_text}``.
``engine.report() -> dict``: per step calls made / cached / failed, requests, retries, tokens, estimated
    cost, errors by type; plus endpoints (data parameters only), cache path, mode, plans. For run.json.
``engine.close()`` (or ``with Engine(...) as engine:``): finishes cache writes, closes connections.

Behaviour: one concurrency limit, requests/tokens-per-minute buckets and 429 pause per endpoint,
shared by all steps (:mod:`gen.llm.limiter`); retries and backoff as in :mod:`gen.llm.request`, within each
call's budget and the endpoint's breaker (:mod:`gen.llm.giveup`); ``structured_output: auto`` resolved by a
probe on an endpoint's first use, or from the cache (:mod:`gen.llm.probe`); a content-addressed SQLite cache
(:mod:`gen.llm.cache`; errors and truncated replies never stored) so a re-run makes no calls and an
interrupted run resumes; ``offline`` turns the first cache
miss into a GenError naming the step and item. API keys are read from the environment only when a request
must be sent, and are scrubbed from every reply, reason, log line and error message (:mod:`gen.llm.endpoint`).

This module only orchestrates: preparing tasks, walking each item through cache, request and correction
round, and handing the counting to :mod:`gen.llm.accounting` and the display to :mod:`gen.llm.progress`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, cast

from gen.errors import GenError, Stopped
from gen.llm.accounting import Accounts, StepStats, error_summary, is_reject, reject_limit, too_many_rejects
from gen.llm.cache import Cache, CachedReply, cache_key
from gen.llm.config import EndpointConfig, RunSettings, data_fingerprint, data_params
from gen.llm.endpoint import Endpoint, KeyScrubber, find_endpoint, load_endpoints
from gen.llm.giveup import Budget
from gen.llm.plan import DEFAULT_OUTPUT_TOKENS, PlanBuilder, StepPlan, format_messages
from gen.llm.probe import CANDIDATES, PROBE_STEP, ModeChoice, probe_body, probe_key
from gen.llm.progress import Reporter, StepCounters, announce, make_reporter, showing
from gen.llm.request import Answer, Failure, RetryPolicy, build_request, http_stack, send_once
from gen.llm.structured import ParseFailure, correction_message, parse_reply, response_format_for, schema_of
from gen.llm.task import Outcome, Task, estimate_input_tokens, normalize_messages
from gen.llm.workers import LoopThread, WorkerPool

__all__ = ["Engine", "build_request", "http_stack"]  # the last two stay importable from here

log = logging.getLogger("gen.llm")


class _CallFailed(Exception):
    """A call that brought no usable reply; ``kind`` and ``reason`` go into the item's Outcome."""

    def __init__(self, kind: str, reason: str, said: str = "") -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason
        self.said = said  # a refusal: what the server said, "HTTP 500: ..."


class _NotCached(Exception):
    """Plan-only: this call would have to be made."""


class _TooManyRejects(Exception):
    """The step went past its reject limit (turned into a Stopped once rejects are recorded)."""


class _GiveUp(Exception):
    """An endpoint was given up on: the step stops with ``stop`` once its unfinished items are recorded."""

    def __init__(self, endpoint: Endpoint, stop: Stopped) -> None:
        super().__init__(stop.message)
        self.endpoint, self.stop = endpoint, stop


@dataclass(frozen=True)
class _Reply:
    text: str
    finish_reason: str | None
    input_tokens: int
    output_tokens: int
    cached: bool


@dataclass(frozen=True)
class _Prepared:
    """A task checked and turned into its request body and cache key."""

    index: int
    task: Task
    endpoint: Endpoint
    messages: list[dict]
    response_format: dict | None
    body: dict
    key: str


@dataclass
class _StepRun:
    """One ``run_step`` (or ``plan``) call in progress."""

    step: str
    prepared: list[_Prepared]
    stats: StepStats
    prefetched: dict[str, CachedReply]
    plan: PlanBuilder | None = None
    max_rejects: int | None = None
    outcomes: list[Outcome | None] = field(init=False)
    counters: StepCounters = field(init=False)
    reject_kinds: Counter[str] = field(default_factory=Counter)
    pool: WorkerPool[_Prepared] | None = None

    def __post_init__(self) -> None:
        self.outcomes = [None] * len(self.prepared)
        self.counters = StepCounters(self.step, len(self.prepared))


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
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 30.0,
        retry_after_cap_s: float = 120.0,
    ) -> None:
        self.settings = settings or RunSettings()
        self.templates_dir = templates_dir  # a recipe's own templates, which may shadow the correction prompt
        self.plan_only = plan_only
        self.offline = self.settings.offline
        self._endpoints = load_endpoints(endpoints, self.settings)
        self._own_cache = cache is None
        self.cache = cache if cache is not None else Cache(self.settings.cache_path())
        self._reporter = reporter
        self._retry = RetryPolicy(backoff_base_s, backoff_cap_s, retry_after_cap_s)
        self._accounts = Accounts()
        self._keys = KeyScrubber()
        for ep in self._endpoints.values():
            self._keys.add_from_env(ep.config.api_key_env)
        self._loop_thread: LoopThread | None = None
        self._loop_lock = threading.Lock()
        self._inflight: dict[str, asyncio.Future[_Reply]] = {}
        self._closed = False

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
    def items_run(self) -> int:
        """Items given to `run_step` so far, over every step and round (cached ones included)."""
        return sum(stats.items for stats in self._accounts.steps.values())

    @property
    def rejects(self) -> list[dict[str, Any]]:
        """Every item the engine gave up on, in the order the steps ran."""
        return self._accounts.rejects

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
        started = time.monotonic()
        try:
            self._resolve_modes(tasks)
        except _GiveUp as exc:
            self._give_up_all(step, tasks, exc)
        prepared = self._prepare(tasks)
        prefetched = self.cache.get_many(p.key for p in prepared)
        stats = self._accounts.step(step)
        stats.items += len(prepared)
        if self.offline and not self.plan_only:
            self._require_cached(step, prepared, prefetched)
        run = _StepRun(
            step,
            prepared,
            stats,
            prefetched,
            PlanBuilder(step) if self.plan_only else None,
            None if self.plan_only else reject_limit(max_reject_rate, stats.items),
        )
        if not prepared:
            return []
        try:
            self._loop().run(self._run_async(run, self._reporter_for(run)))
        except _TooManyRejects:
            self._accounts.add_rejects(step, run.outcomes)
            assert max_reject_rate is not None  # there is no limit to pass without one
            stop = too_many_rejects(step, stats.rejected, stats.items, max_reject_rate, run.reject_kinds, reject_option)
            refusal = next((o.reason for o in run.outcomes if o is not None and o.kind == "refused"), None)
            if refusal is not None:  # what the server said is the first thing to know
                stop.message += f"; first refusal: {refusal}"
            raise stop from None
        except _GiveUp as exc:
            self._give_up_rest(run, exc)
            raise exc.stop from None
        finally:
            stats.seconds += time.monotonic() - started
            stats.endpoints |= {p.endpoint.name for p in prepared}
        self.cache.flush()  # the step's replies are on disk when run_step returns
        self._accounts.add_rejects(step, run.outcomes)
        if run.plan is not None:
            self._accounts.add_plan(run.plan.finish(self.endpoints, items=len(prepared)))
        return cast(list[Outcome], run.outcomes)  # the pool has filled every slot

    def plan(self, step: str, tasks: Sequence[Task]) -> StepPlan:
        """Calls needed, calls cached, projected tokens and cost for these tasks; no network, no key needed.

        Replies already cached are parsed, so a cached reply that needs a correction round counts the
        correction call (cached or needed) too.
        """
        prepared = self._prepare(tasks)
        builder = PlanBuilder(step)
        run = _StepRun(step, prepared, StepStats(), self.cache.get_many(p.key for p in prepared), builder)
        if prepared:
            self._loop().run(self._run_async(run, None))
        return builder.finish(self.endpoints, items=len(prepared))

    def preview(self, tasks: Sequence[Task]) -> str:
        """The rendered prompt(s) of these tasks as the endpoint will receive them, with cache status."""
        prepared = self._prepare(tasks)
        hits = self.cache.get_many(p.key for p in prepared)
        parts = []
        for p in prepared:
            params = {k: v for k, v in p.body.items() if k not in ("messages", "response_format")}
            status = "cached" if p.key in hits else "not cached"
            header = (
                f"═══ item {p.task.item_id} · sample {p.task.sample} · endpoint {p.endpoint.name} · {status} · {params}"
            )
            parts.append(format_messages(p.messages, header=header, response_format=p.response_format))
        return "\n".join(parts)

    def report(self) -> dict:
        """Accounting for run.json: per step, totals, errors by type, endpoints (data parameters), cache."""
        endpoints = {name: self._endpoint_report(ep) for name, ep in self._endpoints.items()}
        return self._accounts.report(
            mode="plan" if self.plan_only else ("offline" if self.offline else "run"),
            endpoints=endpoints,
            cache={"path": str(self.cache.path), "written": self.cache.writes},
        )

    def _endpoint_report(self, ep: Endpoint) -> dict[str, Any]:
        """Data parameters, the fingerprint of the data the endpoint produces (with the mode ``auto`` chose),
        and how that mode was found."""
        config = ep.config
        if ep.choice is not None:
            config = config.model_copy(update={"structured_output": ep.choice.mode})
        entry: dict[str, Any] = {**data_params(ep.config), "fingerprint": data_fingerprint(config)}
        if ep.config.structured_output == "auto":
            entry["structured_output_chosen"] = ep.choice.report() if ep.choice else None
        return entry

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
            if self._own_cache:
                self.cache.close()
            else:
                self.cache.flush()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- preparation (caller thread) ------------------------------------------------------------------
    def _prepare(self, tasks: Sequence[Task]) -> list[_Prepared]:
        prepared = []
        for index, task in enumerate(tasks):
            if not isinstance(task, Task):
                raise TypeError(f"run_step expects gen.llm.Task objects, got {type(task).__name__}")
            if not isinstance(task.sample, int) or task.sample < 0:
                raise GenError("sample must be a non-negative integer", record=f"item {task.item_id}", field="sample")
            ep = find_endpoint(self._endpoints, task.endpoint, task.item_id)
            messages = normalize_messages(task.messages, str(task.item_id))
            response_format = response_format_for(task.parser, ep.mode or CANDIDATES[0])
            body = build_request(ep.config, messages, response_format, task.sample)
            key = cache_key(ep.config.base_url, body, task.sample)
            prepared.append(_Prepared(index, task, ep, messages, response_format, body, key))
        return prepared

    # -- structured_output: auto ---------------------------------------------------------------------
    def _resolve_modes(self, tasks: Sequence[Task]) -> None:
        """The mode of every ``auto`` endpoint these tasks need parsed output from: kept from earlier in this
        run, else from the cache, else found by a probe (never in a plan: there the first candidate stands
        in; an offline run without a stored choice is an error)."""
        for task in tasks:
            ep = find_endpoint(self._endpoints, task.endpoint, task.item_id)
            if ep.mode is not None or schema_of(task.parser) is None:
                continue
            hit = self.cache.get(probe_key(ep.config))
            if hit is not None and hit.text in CANDIDATES:
                ep.choice = ModeChoice(hit.text, "cache")
            elif self.plan_only:
                continue
            elif self.offline:
                raise GenError(
                    "offline run: structured_output is auto and this endpoint was never probed",
                    record=ep.where,
                    field="structured_output",
                    expected="an earlier online run with this cache, or an explicit structured_output",
                )
            else:
                ep.choice = self._loop().run(self._probe(ep))
                self.cache.put(probe_key(ep.config), CachedReply(ep.choice.mode, "probe", 0, 0, ep.config.model))
            announce(ep.choice.line(ep.name), self.settings.progress)

    async def _probe(self, ep: Endpoint) -> ModeChoice:
        """One small request per candidate mode until the server answers one (:mod:`gen.llm.probe`)."""
        run = _StepRun(PROBE_STEP, [], self._accounts.step(PROBE_STEP), {})
        refused: dict[str, str] = {}
        for mode in CANDIDATES:
            body = probe_body(ep.config, mode)
            try:
                answer, _ = await self._attempts(run, ep, body, probing=True)
            except _CallFailed as exc:
                if exc.kind != "refused":
                    stop = Stopped(
                        f"could not find out which structured_output the endpoint accepts: {exc.reason}; to go on, "
                        "check that the server is working, or set structured_output explicitly",
                        record=ep.where,
                    )
                    raise _GiveUp(ep, stop) from None
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
        raise _GiveUp(ep, stop)

    # -- giving up ------------------------------------------------------------------------------------
    def _give_up_all(self, step: str, tasks: Sequence[Task], exc: _GiveUp) -> NoReturn:
        """The endpoint was given up on before any item started: every item is given up."""
        stats = self._accounts.step(step)
        stats.items += len(tasks)
        outcomes = [_failed(task, "given_up", _given_up(exc), None) for task in tasks]
        for outcome in outcomes:
            stats.add_outcome(outcome)
        self._accounts.add_rejects(step, outcomes)
        exc.endpoint.gave_up()
        raise exc.stop from None

    def _give_up_rest(self, run: _StepRun, exc: _GiveUp) -> None:
        """Record every item of the step that had not finished as given up, with the reason."""
        reason = _given_up(exc)
        for p in run.prepared:
            if run.outcomes[p.index] is None:
                outcome = _failed(p.task, "given_up", reason, None)
                run.outcomes[p.index] = outcome
                run.stats.add_outcome(outcome)
        self._accounts.add_rejects(run.step, run.outcomes)
        self.cache.flush()  # every completed call stays cached for the resume
        exc.endpoint.gave_up()

    def _require_cached(self, step: str, prepared: list[_Prepared], cached: Mapping[str, CachedReply]) -> None:
        for p in prepared:
            if p.key not in cached:
                raise self._offline_error(step, p)

    def _offline_error(self, step: str, p: _Prepared) -> GenError:
        return GenError(
            "offline run: this call is not in the LLM cache",
            record=f"step {step}, item {p.task.item_id}",
            field=f"endpoint {p.endpoint.name}",
            expected=f"a cache filled by an earlier run with the same prompts and parameters ({self.cache.path})",
        )

    def _reporter_for(self, run: _StepRun) -> Reporter | None:
        """A progress display, only when calls are about to be made (cached steps finish at once)."""
        if self.plan_only or all(p.key in run.prefetched for p in run.prepared):
            return None
        return self._reporter or make_reporter(self.settings.progress, self.settings.progress_interval_s)

    def _loop(self) -> LoopThread:
        with self._loop_lock:
            if self._loop_thread is None:
                self._loop_thread = LoopThread()
            return self._loop_thread

    # -- the step (loop thread) -----------------------------------------------------------------------
    async def _run_async(self, run: _StepRun, reporter: Reporter | None) -> None:
        async with showing(reporter, run.counters, lambda: error_summary(run.step, run.stats.errors)):
            endpoints = {p.endpoint.name: p.endpoint for p in run.prepared}.values()
            width = sum(ep.config.max_concurrency for ep in endpoints)
            run.pool = WorkerPool(run.prepared, width, functools.partial(self._do_item, run))
            await run.pool.run()

    async def _do_item(self, run: _StepRun, p: _Prepared) -> None:
        outcome = await self._item_outcome(run, p)
        run.outcomes[p.index] = outcome
        rejected = is_reject(outcome)
        run.counters.add(cached=outcome.cached, rejected=rejected)
        run.stats.add_outcome(outcome)
        if rejected:
            run.reject_kinds[outcome.kind or "unknown"] += 1
            if run.max_rejects is not None and run.stats.rejected > run.max_rejects:
                raise _TooManyRejects()

    async def _item_outcome(self, run: _StepRun, p: _Prepared) -> Outcome:
        """The first reply, parsed; a reply that does not parse gets one correction round."""
        task = p.task
        try:
            first = await self._reply(run, p, p.body, p.key)
        except _CallFailed as exc:
            return _failed(task, exc.kind, exc.reason, None)
        except _NotCached:
            return _failed(task, "not_cached", "not cached (plan only)", None)
        if first.finish_reason == "length":
            return _failed(task, "truncated", f"reply truncated ({_truncation(p)})", first.text)
        try:
            value = parse_reply(task.parser, first.text)
        except ParseFailure as exc:
            return await self._correct(run, p, first, str(exc))
        return Outcome(task, ok=True, value=value, text=first.text, cached=first.cached)

    async def _correct(self, run: _StepRun, p: _Prepared, first: _Reply, error: str) -> Outcome:
        """The correction round: the reply and what is wrong with it go back to the model, once."""
        task, config = p.task, p.endpoint.config
        messages = [
            *p.messages,
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": correction_message(task.parser, error, self.templates_dir)},
        ]
        body = build_request(config, messages, p.response_format, task.sample)
        run.stats.corrections += 1
        try:
            second = await self._reply(run, p, body, cache_key(config.base_url, body, task.sample))
        except _CallFailed as exc:
            return _failed(task, exc.kind, f"{error}; the correction round failed: {exc.reason}", first.text)
        except _NotCached:
            return _failed(task, "not_cached", "correction round not cached (plan only)", first.text)
        cached = first.cached and second.cached
        if second.finish_reason == "length":
            return _failed(
                task, "truncated", f"{error}; the corrected reply was truncated ({_truncation(p)})", second.text, cached
            )
        try:
            value = parse_reply(task.parser, second.text)
        except ParseFailure as exc:
            return _failed(
                task, "parse", f"{exc} (after one correction round; first reply: {error})", second.text, cached
            )
        return Outcome(task, ok=True, value=value, text=second.text, cached=cached, corrected=True)

    async def _reply(self, run: _StepRun, p: _Prepared, body: dict, key: str) -> _Reply:
        """A reply from the cache, or from the endpoint (then cached unless truncated)."""
        hit = run.prefetched[key] if key in run.prefetched else self.cache.get(key)
        if hit is not None:
            run.stats.add_cached(hit)
            if run.plan is not None:
                run.plan.cached(p.endpoint.name, hit.output_tokens)
            return _Reply(hit.text, hit.finish_reason, hit.input_tokens, hit.output_tokens, cached=True)
        if run.plan is not None:
            run.plan.needed(p.endpoint.name, estimate_input_tokens(body["messages"]))
            raise _NotCached()
        if self.offline:
            raise self._offline_error(run.step, p)
        return await self._send_shared(run, p, body, key)

    async def _send_shared(self, run: _StepRun, p: _Prepared, body: dict, key: str) -> _Reply:
        """Send the request, unless an identical one of this run is already on its way: then wait for it."""
        shared = self._inflight.get(key)
        if shared is not None:
            reply = await asyncio.shield(shared)
            run.stats.calls_cached += 1
            return dataclasses.replace(reply, cached=True)
        future: asyncio.Future[_Reply] = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            reply = await self._send(run, p, body, key)
        except BaseException as exc:
            future.set_exception(exc if isinstance(exc, Exception) else _CallFailed("cancelled", "cancelled"))
            future.exception()  # retrieved, so an error no other item waited for is not logged as unhandled
            raise
        else:
            future.set_result(reply)
            return reply
        finally:
            self._inflight.pop(key, None)

    async def _send(self, run: _StepRun, p: _Prepared, body: dict, key: str) -> _Reply:
        """The request, attempted as often as the call's budget allows."""
        answer, estimate = await self._attempts(run, p.endpoint, body)
        return self._received(run, p, body, key, answer, estimate)

    async def _attempts(self, run: _StepRun, ep: Endpoint, body: dict, *, probing: bool = False) -> tuple[Answer, int]:
        """Attempts until a completion comes back; else :class:`_CallFailed` (the call is given up or refused)
        or :class:`_GiveUp` (the endpoint is)."""
        stats, config = run.stats, ep.config
        estimate = estimate_input_tokens(body["messages"]) + (config.max_tokens or DEFAULT_OUTPUT_TOKENS)
        budget = Budget(config.max_retries + 1, config.max_wait_s)
        previous: Failure | None = None
        delay = 0.0
        while True:
            if delay:
                await self._wait(run, delay)
            budget.used += 1
            async with ep.flow.admit(estimate):
                sent = time.monotonic()  # on its way now (after any wait for a slot or the gate)
                stats.requests += 1
                result = await send_once(ep.client(self._keys), body, config.timeout_s, self._keys)
                back = time.monotonic()  # before the slot is free for the next request
            if isinstance(result, Answer):
                ep.replied()
                return result, estimate
            run.counters.note_request(0)
            stats.errors[result.kind] += 1
            ep.flow.refund(estimate)
            judgement = ep.judge(result, (sent, back), previous, probing=probing)
            if judgement.stop is not None:
                raise _GiveUp(ep, judgement.stop)
            try:
                delay = self._next_delay(ep, result, budget, judgement.refused)
            except _CallFailed:
                stats.calls_failed += 1
                raise
            previous = result

    def _next_delay(self, ep: Endpoint, failure: Failure, budget: Budget, refused: bool) -> float:
        """Seconds before the next attempt of a failed call, or :class:`_CallFailed` if there is none."""
        status = failure.kind.removeprefix("http_")
        if refused:
            hint = ep.hint(failure)
            raise _CallFailed(
                "refused",
                f"the endpoint refused the request (HTTP {status}): {failure.reason}" + (f"; {hint}" if hint else ""),
                said=f"HTTP {status}: {failure.reason}",
            )
        delay = self._retry.delay(failure, budget.used - 1)
        spent = budget.spent_after(max(delay, ep.flow.gate.remaining()))
        if spent is not None:
            tried = budget.used
            raise _CallFailed(
                "request_failed",
                f"given up after {tried} attempt{'s' if tried > 1 else ''} in {budget.elapsed():.0f}s ({spent}); "
                f"last error: {failure.kind}: {failure.reason}",
            )
        log.debug("%s attempt %d failed: %s", ep.where, budget.used, failure.reason)
        if self._retry.pauses_endpoint(failure):
            ep.flow.pause(delay, rate_limited=failure.kind == "rate_limited")
            return 0.0  # this worker now waits at the endpoint's gate with all the others
        return delay

    async def _wait(self, run: _StepRun, seconds: float) -> None:
        if run.pool is not None:
            await run.pool.back_off(seconds)  # another worker takes this one's place meanwhile
        else:
            await asyncio.sleep(seconds)

    def _received(self, run: _StepRun, p: _Prepared, body: dict, key: str, answer: Answer, estimate: int) -> _Reply:
        """Count a completion and cache it; a truncated one is returned but never cached, no text is a failure."""
        ep, stats = p.endpoint, run.stats
        input_tokens, output_tokens, estimated = answer.tokens(body["messages"])
        ep.flow.succeeded(estimate, input_tokens + output_tokens)
        stats.add_call(input_tokens, output_tokens, ep.config.price, estimated=estimated)
        run.counters.note_request(input_tokens + output_tokens)
        if not isinstance(answer.text, str):
            stats.calls_failed += 1
            stats.errors["empty_reply"] += 1
            refusal = f" (refusal: {self._keys(str(answer.refusal))[:300]})" if answer.refusal else ""
            raise _CallFailed("empty", f"the endpoint returned no text{refusal}")
        text = self._keys(answer.text)
        if answer.finish_reason == "length":
            stats.errors["truncated"] += 1
        else:
            self.cache.put(key, CachedReply(text, answer.finish_reason, input_tokens, output_tokens, ep.config.model))
        return _Reply(text, answer.finish_reason, input_tokens, output_tokens, cached=False)

    async def _close_clients(self) -> None:
        for ep in self._endpoints.values():
            await ep.close()


def _failed(task: Task, kind: str, reason: str, text: str | None, cached: bool = False) -> Outcome:
    return Outcome(task, ok=False, text=text, reason=reason, kind=kind, cached=cached)


def _given_up(exc: _GiveUp) -> str:
    return f"given up when the run stopped: {exc.stop.message}"


def _truncation(p: _Prepared) -> str:
    return f"finish_reason=length, max_tokens={p.endpoint.config.max_tokens}"
