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

Surface:

``Engine(endpoints, settings=None, *, cache=None, plan_only=False)``
    ``endpoints``: the recipe's ``llm:`` mapping (name -> :class:`EndpointConfig` or dict);
    ``settings``: :class:`RunSettings` (limit overrides, cache folder, ``offline``, progress mode);
    ``cache``: a :class:`Cache` (default: opened at ``settings.cache_path()``);
    ``plan_only``: make no calls; ``run_step`` returns what the cache holds and records a plan.
``engine.run_step(step, tasks, *, max_reject_rate=0.2) -> list[Outcome]``
    Runs the tasks concurrently (asyncio on a background thread; the call blocks). Items whose reply
    does not parse get one correction round; items that still fail (or whose requests failed after the
    retries, or whose reply was truncated) come back ``ok=False`` and are appended to ``engine.rejects``.
    If more than ``max_reject_rate`` of the step's items (over every call with that step name) are
    rejected, the step stops with a GenError.
``engine.plan(step, tasks) -> StepPlan``
    Calls needed, calls cached, projected tokens and cost — without any network.
``engine.rejects``: list of dicts ``{step, item_id, sample, endpoint, kind, reason, raw_text}``.
``engine.report() -> dict``: per step calls made / cached / failed, requests, retries, tokens, estimated
    cost, errors by type; plus endpoints (data parameters only), cache path, mode, plans. For run.json.
``engine.close()`` (or ``with Engine(...) as engine:``): finishes cache writes, closes connections.

Behaviour (SPEC §9): one concurrency limit, requests/tokens-per-minute buckets and 429 pause per endpoint,
shared by all steps; retries with exponential backoff and jitter honouring ``Retry-After`` (429, 408, 409,
5xx, timeouts, connection errors); a hard per-request timeout; 401/403/404, exhausted quota and an endpoint
that has never answered and keeps refusing connections stop the run with a GenError; other 4xx reject the
item without retrying; a content-addressed SQLite cache (errors and truncated replies never stored) so a
re-run makes no calls and an interrupted run resumes; ``offline`` turns the first cache miss into a
GenError naming the step and item. API keys are read from the environment only when a request must be
sent, and are scrubbed from every reply, reason, log line and error message.
"""

from __future__ import annotations

import asyncio
import collections
import difflib
import functools
import json
import logging
import math
import os
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from pydantic import ValidationError

from gen.errors import GenError
from gen.llm.cache import Cache, CachedReply, cache_key
from gen.llm.config import EndpointConfig, RunSettings, apply_settings, data_fingerprint, data_params
from gen.llm.limiter import Gate, Slots, TokenBucket, backoff_delay, retry_after_seconds
from gen.llm.plan import DEFAULT_OUTPUT_TOKENS, PlanBuilder, StepPlan, format_messages
from gen.llm.progress import StepCounters, make_reporter
from gen.llm.structured import ParseFailure, correction_message, parse_reply, response_format_for
from gen.llm.task import Outcome, Task, estimate_input_tokens, normalize_messages

__all__ = ["Engine", "build_request", "http_stack"]

log = logging.getLogger("gen.llm")

REDACTED = "[redacted]"


def build_request(endpoint: EndpointConfig, messages: list[dict], response_format: dict | None, sample: int) -> dict:
    """The chat-completions request body: every data parameter of the endpoint, nothing else."""
    body: dict[str, Any] = {"model": endpoint.model, "messages": messages}
    if endpoint.temperature is not None:
        body["temperature"] = endpoint.temperature
    if endpoint.top_p is not None:
        body["top_p"] = endpoint.top_p
    if endpoint.max_tokens is not None:
        body["max_tokens"] = endpoint.max_tokens
    if endpoint.seed is not None:
        body["seed"] = endpoint.seed + sample
    if response_format is not None:
        body["response_format"] = response_format
    body.update(endpoint.extra_params)
    return body


# -- internal exceptions --------------------------------------------------------------------------------
class _CallFailed(Exception):
    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason


class _NotCached(Exception):
    pass


class _TooManyRejects(Exception):
    pass


@dataclass
class _Reply:
    text: str
    finish_reason: str | None
    input_tokens: int
    output_tokens: int
    cached: bool


@dataclass
class _StepStats:
    items: int = 0
    ok: int = 0
    rejected: int = 0
    corrected: int = 0
    calls_made: int = 0
    calls_cached: int = 0
    calls_failed: int = 0
    requests: int = 0
    corrections: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0
    cached_output_tokens: int = 0
    usage_estimated: int = 0
    cost_usd: float = 0.0
    cost_complete: bool = True
    seconds: float = 0.0
    endpoints: set = field(default_factory=set)
    errors: Counter = field(default_factory=Counter)

    def to_dict(self) -> dict:
        return {
            "items": self.items,
            "ok": self.ok,
            "rejected": self.rejected,
            "corrected": self.corrected,
            "calls_made": self.calls_made,
            "calls_cached": self.calls_cached,
            "calls_failed": self.calls_failed,
            "requests": self.requests,
            "retries": self.requests - self.calls_made - self.calls_failed,
            "corrections": self.corrections,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_input_tokens": self.cached_input_tokens,
            "cached_output_tokens": self.cached_output_tokens,
            "usage_estimated_calls": self.usage_estimated,
            "cost_usd": round(self.cost_usd, 6) if self.cost_complete else None,
            "seconds": round(self.seconds, 3),
            "endpoints": sorted(self.endpoints),
            "errors": dict(sorted(self.errors.items())),
        }


class _Endpoint:
    """Run-time state of one endpoint, shared by every step (created lazily on the loop thread)."""

    def __init__(self, name: str, config: EndpointConfig) -> None:
        self.name = name
        self.config = config
        self.client = None
        self.answered = False  # has the server ever answered? (if not, repeated connection errors are fatal)
        self.connection_failures = 0
        self.slots: Slots | None = None
        self.rpm: TokenBucket | None = None
        self.tpm: TokenBucket | None = None
        self.gate: Gate | None = None

    def ensure_flow_control(self) -> None:
        if self.slots is None:
            self.slots = Slots(self.config.max_concurrency)
            self.gate = Gate()
            if self.config.requests_per_minute:
                self.rpm = TokenBucket(self.config.requests_per_minute)
            if self.config.tokens_per_minute:
                self.tpm = TokenBucket(self.config.tokens_per_minute)

    @property
    def where(self) -> str:
        return f"llm endpoint '{self.name}' ({self.config.base_url})"


@dataclass
class _Prepared:
    index: int
    task: Task
    endpoint: _Endpoint
    messages: list[dict]
    response_format: dict | None
    body: dict
    key: str


class _StepRun:
    def __init__(self, step: str, prepared: list[_Prepared], stats: _StepStats, max_rejects: int | None,
                 prefetched: dict[str, CachedReply], plan: PlanBuilder | None) -> None:
        self.step = step
        self.prepared = prepared
        self.stats = stats
        self.max_rejects = max_rejects
        self.prefetched = prefetched
        self.plan = plan
        self.outcomes: list[Outcome | None] = [None] * len(prepared)
        self.counters = StepCounters(step, len(prepared))
        self.reject_reasons: Counter = Counter()
        self.queue: collections.deque = collections.deque()
        self.width = 1
        self.workers = 0
        self.backing_off = 0
        self.group: asyncio.TaskGroup | None = None


class _LoopThread:
    """An asyncio event loop running on a daemon thread; ``run(coro)`` blocks the caller until it finishes."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="gen-llm-loop", daemon=True)
        self.thread.start()

    def run(self, coro):
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result()
        except KeyboardInterrupt:
            future.cancel()
            try:
                future.result(timeout=10)
            except BaseException:  # noqa: BLE001 - we are already unwinding an interrupt
                pass
            raise

    def close(self) -> None:
        if self.loop.is_closed():
            return
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        if not self.thread.is_alive():
            self.loop.close()


class Engine:
    """See the module docstring."""

    def __init__(
        self,
        endpoints: Mapping[str, EndpointConfig | Mapping[str, Any]],
        settings: RunSettings | None = None,
        *,
        cache: Cache | None = None,
        plan_only: bool = False,
        reporter=None,
        backoff_base_s: float = 0.5,
        backoff_cap_s: float = 30.0,
        retry_after_cap_s: float = 120.0,
    ) -> None:
        self.settings = settings or RunSettings()
        self.plan_only = plan_only
        self.offline = self.settings.offline
        self._endpoints: dict[str, _Endpoint] = {}
        for name, config in endpoints.items():
            if not isinstance(config, EndpointConfig):
                try:
                    config = EndpointConfig.model_validate(config)
                except ValidationError as exc:
                    first = exc.errors()[0]
                    raise GenError(first.get("msg", "invalid endpoint"), record=f"llm endpoint '{name}'",
                                   field=".".join(str(p) for p in first.get("loc", ())) or None) from None
            self._endpoints[name] = _Endpoint(name, apply_settings(config, self.settings))
        self._own_cache = cache is None
        self.cache = cache if cache is not None else Cache(self.settings.cache_path())
        self._reporter = reporter
        self.backoff_base_s = backoff_base_s
        self.backoff_cap_s = backoff_cap_s
        self.retry_after_cap_s = retry_after_cap_s
        self.rejects: list[dict] = []
        self._stats: dict[str, _StepStats] = {}
        self._plans: dict[str, StepPlan] = {}
        self._loop_thread: _LoopThread | None = None
        self._inflight: dict[str, asyncio.Future] = {}
        self._lock = threading.Lock()
        self._rng = random.Random()
        self._secrets: set[str] = set()
        self._closed = False
        for ep in self._endpoints.values():
            self._remember_secret(ep.config.api_key_env)

    # -- public ---------------------------------------------------------------------------------------
    @property
    def endpoints(self) -> dict[str, EndpointConfig]:
        """Effective endpoint configs (run-setting overrides applied)."""
        return {name: ep.config for name, ep in self._endpoints.items()}

    def run_step(self, step: str, tasks: Sequence[Task], *, max_reject_rate: float | None = 0.2) -> list[Outcome]:
        """Run the tasks; outcomes in task order. See the module docstring."""
        if self._closed:
            raise RuntimeError("the engine is closed")
        started = time.monotonic()
        prepared = self._prepare(tasks)
        prefetched = self.cache.get_many(p.key for p in prepared)
        stats = self._stats.setdefault(step, _StepStats())
        stats.items += len(prepared)
        if self.offline and not self.plan_only:
            for p in prepared:
                if p.key not in prefetched:
                    raise self._offline_error(step, p)
        limit = None  # counted over every call of this step, so small follow-up rounds are judged with the rest
        if max_reject_rate is not None and not self.plan_only:
            limit = math.floor(max_reject_rate * stats.items + 1e-9)
        plan = PlanBuilder(step) if self.plan_only else None
        run = _StepRun(step, prepared, stats, limit, prefetched, plan)
        if not prepared:
            return []
        reporter = None
        if not self.plan_only and any(p.key not in prefetched for p in prepared):
            reporter = self._reporter or make_reporter(self.settings.progress, self.settings.progress_interval_s)
        try:
            self._loop().run(self._run_async(run, reporter))
        except _TooManyRejects:
            self._collect_rejects(run)
            raise self._reject_rate_error(run, max_reject_rate) from None
        finally:
            stats.seconds += time.monotonic() - started
            stats.endpoints |= {p.endpoint.name for p in prepared}
        self.cache.flush()  # the step's replies are on disk when run_step returns
        self._collect_rejects(run)
        if plan is not None:
            self._merge_plan(plan.finish(self.endpoints, items=len(prepared)))
        return run.outcomes  # type: ignore[return-value]

    def plan(self, step: str, tasks: Sequence[Task]) -> StepPlan:
        """Calls needed, calls cached, projected tokens and cost for these tasks; no network, no key needed.

        Replies already cached are parsed, so a cached reply that needs a correction round counts the
        correction call (cached or needed) too.
        """
        prepared = self._prepare(tasks)
        prefetched = self.cache.get_many(p.key for p in prepared)
        builder = PlanBuilder(step)
        run = _StepRun(step, prepared, _StepStats(), None, prefetched, builder)
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
            header = (f"═══ item {p.task.item_id} · sample {p.task.sample} · endpoint {p.endpoint.name} · "
                      f"{status} · {params}")
            parts.append(format_messages(p.messages, header=header, response_format=p.response_format))
        return "\n".join(parts)

    def report(self) -> dict:
        """Accounting for run.json: per step, totals, errors by type, endpoints (data parameters), cache."""
        steps = {name: stats.to_dict() for name, stats in self._stats.items()}
        totals: dict[str, Any] = {}
        for key in ("items", "ok", "rejected", "corrected", "calls_made", "calls_cached", "calls_failed", "requests",
                    "retries", "corrections", "input_tokens", "output_tokens", "cached_input_tokens",
                    "cached_output_tokens"):
            totals[key] = sum(step[key] for step in steps.values())
        costs = [step["cost_usd"] for step in steps.values()]
        totals["cost_usd"] = round(sum(costs), 6) if costs and None not in costs else (0.0 if not costs else None)
        errors: Counter = Counter()
        for stats in self._stats.values():
            errors.update(stats.errors)
        report = {
            "mode": "plan" if self.plan_only else ("offline" if self.offline else "run"),
            "steps": steps,
            "totals": totals,
            "errors": dict(sorted(errors.items())),
            "rejects": len(self.rejects),
            "endpoints": {
                name: {**data_params(ep.config), "fingerprint": data_fingerprint(ep.config)}
                for name, ep in self._endpoints.items()
            },
            "cache": {"path": str(self.cache.path), "written": self.cache.writes},
        }
        if self._plans:
            report["plan"] = {name: plan.to_dict() for name, plan in self._plans.items()}
        return report

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

    def __enter__(self) -> "Engine":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- preparation (caller thread) ------------------------------------------------------------------
    def _endpoint(self, name: str, item_id: str) -> _Endpoint:
        try:
            return self._endpoints[name]
        except KeyError:
            names = sorted(self._endpoints)
            near = difflib.get_close_matches(name, names, n=1)
            hint = f"; did you mean '{near[0]}'?" if near else ""
            raise GenError(f"unknown LLM endpoint '{name}'{hint}", record=f"item {item_id}", field="endpoint",
                           expected=f"a name of the recipe's llm: section ({', '.join(names) or 'none defined'})") from None

    def _prepare(self, tasks: Sequence[Task]) -> list[_Prepared]:
        prepared = []
        for index, task in enumerate(tasks):
            if not isinstance(task, Task):
                raise TypeError(f"run_step expects gen.llm.Task objects, got {type(task).__name__}")
            if not isinstance(task.sample, int) or task.sample < 0:
                raise GenError("sample must be a non-negative integer", record=f"item {task.item_id}", field="sample")
            ep = self._endpoint(task.endpoint, task.item_id)
            messages = normalize_messages(task.messages, str(task.item_id))
            response_format = response_format_for(task.parser, ep.config.structured_output)
            body = build_request(ep.config, messages, response_format, task.sample)
            key = cache_key(ep.config.base_url, body, task.sample)
            prepared.append(_Prepared(index, task, ep, messages, response_format, body, key))
        return prepared

    def _loop(self) -> _LoopThread:
        with self._lock:
            if self._loop_thread is None:
                self._loop_thread = _LoopThread()
            return self._loop_thread

    # -- the step (loop thread) -----------------------------------------------------------------------
    async def _run_async(self, run: _StepRun, reporter) -> None:
        ticker = None
        if reporter is not None:
            reporter.start(run.counters)
            ticker = asyncio.create_task(self._tick(reporter))
        try:
            # A pool of workers as wide as the endpoints' concurrency pulls items in order: a worker that
            # finishes a call sends the next one at once (no hand-over between tasks), and a worker that
            # has to back off before a retry lends its place to a new worker meanwhile.
            run.queue = collections.deque(run.prepared)
            endpoints = {p.endpoint.name: p.endpoint for p in run.prepared}.values()
            run.width = max(1, sum(ep.config.max_concurrency for ep in endpoints))
            async with asyncio.TaskGroup() as group:
                run.group = group
                for _ in range(min(len(run.queue), run.width)):
                    self._add_worker(run)
        except BaseExceptionGroup as group_error:
            # re-raise the first meaningful error (GenError / too many rejects / a bug) without the group
            for exc in group_error.exceptions:
                if isinstance(exc, GenError):
                    raise exc from None
            raise group_error.exceptions[0] from None
        finally:
            if ticker is not None:
                ticker.cancel()
            if reporter is not None:
                summary = self._error_summary(run)
                if summary:
                    log.info(summary)
                reporter.stop(summary)

    def _add_worker(self, run: _StepRun) -> None:
        run.workers += 1
        run.group.create_task(self._worker(run))

    async def _worker(self, run: _StepRun) -> None:
        try:
            while run.queue and run.workers - run.backing_off <= run.width:
                await self._do_item(run, run.queue.popleft())
        finally:
            run.workers -= 1

    async def _back_off(self, run: _StepRun, seconds: float) -> None:
        """Sleep before a retry, letting another worker take this one's place in the meantime."""
        run.backing_off += 1
        try:
            if run.group is not None and run.queue and run.workers - run.backing_off < run.width:
                self._add_worker(run)
            await asyncio.sleep(seconds)
        finally:
            run.backing_off -= 1

    async def _tick(self, reporter) -> None:
        while True:
            reporter.tick()
            await asyncio.sleep(0.25)

    async def _do_item(self, run: _StepRun, p: _Prepared) -> None:
        outcome = await self._item_outcome(run, p)
        run.outcomes[p.index] = outcome
        stats, counters = run.stats, run.counters
        counters.done += 1
        if outcome.cached:
            counters.cached += 1
        if outcome.ok:
            stats.ok += 1
            stats.corrected += outcome.corrected
        elif outcome.kind != "not_cached":
            stats.rejected += 1
            counters.rejected += 1
            run.reject_reasons[outcome.kind] += 1
            if run.max_rejects is not None and stats.rejected > run.max_rejects:
                raise _TooManyRejects()

    async def _item_outcome(self, run: _StepRun, p: _Prepared) -> Outcome:
        task, config = p.task, p.endpoint.config

        def failed(kind: str, reason: str, text: str | None, cached: bool = False) -> Outcome:
            return Outcome(task, ok=False, text=text, reason=reason, kind=kind, cached=cached)

        try:
            first = await self._reply(run, p, p.body, p.key)
        except _CallFailed as exc:
            return failed(exc.kind, exc.reason, None)
        except _NotCached:
            return failed("not_cached", "not cached (plan only)", None)
        if first.finish_reason == "length":
            return failed("truncated", f"reply truncated (finish_reason=length, max_tokens={config.max_tokens})", first.text)
        try:
            value = parse_reply(task.parser, first.text)
            return Outcome(task, ok=True, value=value, text=first.text, cached=first.cached)
        except ParseFailure as exc:
            first_error = str(exc)

        # one correction round: the reply and the error go back to the model
        messages = p.messages + [
            {"role": "assistant", "content": first.text},
            {"role": "user", "content": correction_message(task.parser, first_error)},
        ]
        body = build_request(config, messages, p.response_format, task.sample)
        key = cache_key(config.base_url, body, task.sample)
        run.stats.corrections += 1
        try:
            second = await self._reply(run, p, body, key)
        except _CallFailed as exc:
            return failed(exc.kind, f"{first_error}; the correction round failed: {exc.reason}", first.text)
        except _NotCached:
            return failed("not_cached", "correction round not cached (plan only)", first.text)
        both_cached = first.cached and second.cached
        if second.finish_reason == "length":
            return failed("truncated", f"{first_error}; the corrected reply was truncated (finish_reason=length, "
                          f"max_tokens={config.max_tokens})", second.text, both_cached)
        try:
            value = parse_reply(task.parser, second.text)
        except ParseFailure as exc:
            return failed("parse", f"{exc} (after one correction round; first reply: {first_error})", second.text, both_cached)
        return Outcome(task, ok=True, value=value, text=second.text, cached=both_cached, corrected=True)

    async def _reply(self, run: _StepRun, p: _Prepared, body: dict, key: str) -> _Reply:
        """A reply from the cache, or from the endpoint (then cached unless truncated)."""
        hit = run.prefetched.get(key) if key in run.prefetched else self.cache.get(key)
        stats = run.stats
        if hit is not None:
            stats.calls_cached += 1
            stats.cached_input_tokens += hit.input_tokens
            stats.cached_output_tokens += hit.output_tokens
            if run.plan is not None:
                run.plan.cached(p.endpoint.name, hit.output_tokens)
            return _Reply(hit.text, hit.finish_reason, hit.input_tokens, hit.output_tokens, cached=True)
        if run.plan is not None:
            run.plan.needed(p.endpoint.name, estimate_input_tokens(body["messages"]))
            raise _NotCached()
        if self.offline:
            raise self._offline_error(run.step, p)
        shared = self._inflight.get(key)
        if shared is not None:  # the same request is already on its way (identical task in this run)
            reply = await asyncio.shield(shared)
            stats.calls_cached += 1
            return _Reply(reply.text, reply.finish_reason, reply.input_tokens, reply.output_tokens, cached=True)
        future = asyncio.get_running_loop().create_future()
        self._inflight[key] = future
        try:
            reply = await self._request(run, p, body, key)
        except BaseException as exc:
            future.set_exception(exc if isinstance(exc, Exception) else _CallFailed("cancelled", "cancelled"))
            future.exception()  # mark retrieved
            raise
        else:
            future.set_result(reply)
            return reply
        finally:
            self._inflight.pop(key, None)

    async def _request(self, run: _StepRun, p: _Prepared, body: dict, key: str) -> _Reply:
        import openai

        http, _ = http_stack()

        ep, stats = p.endpoint, run.stats
        config = ep.config
        ep.ensure_flow_control()
        estimate = estimate_input_tokens(body["messages"]) + (config.max_tokens or DEFAULT_OUTPUT_TOKENS)
        delay = 0.0
        last_kind, last_reason = "unknown", "no attempt made"
        attempts = config.max_retries + 1
        for attempt in range(attempts):
            if delay:
                await self._back_off(run, delay)
            await ep.gate.wait()
            if ep.rpm is not None:
                await ep.rpm.acquire(1)
            if ep.tpm is not None:
                await ep.tpm.acquire(estimate)
            async with ep.slots:
                await ep.gate.wait()
                stats.requests += 1
                try:
                    async with asyncio.timeout(config.timeout_s):
                        # client.post sends the body as given; chat.completions.create would first re-walk
                        # the whole request (JSON schema included) through the SDK's TypedDict transform,
                        # which costs more CPU than everything else per call.
                        response = await self._client(ep).post("/chat/completions", body=body, cast_to=http.Response)
                        data = json.loads(response.content)
                    choice = data["choices"][0]
                    message = choice.get("message") or {}
                    text = message.get("content")
                    finish = choice.get("finish_reason")
                except asyncio.CancelledError:
                    raise
                except (TimeoutError, openai.APITimeoutError):
                    last_kind, last_reason, retry_after, fatal = "timeout", f"no reply within {config.timeout_s}s", None, None
                except openai.APIStatusError as exc:
                    ep.answered = True
                    last_kind, last_reason, retry_after, fatal = self._classify_status(ep, exc)
                except openai.APIConnectionError as exc:
                    last_kind, last_reason, retry_after, fatal = "connection_error", self._redact(str(exc)), None, None
                    ep.connection_failures += 1
                    if not ep.answered and ep.connection_failures >= max(3, attempts):
                        fatal = GenError(f"cannot reach the endpoint: {last_reason}", record=ep.where, field="base_url",
                                         expected="a running OpenAI-compatible server at base_url")
                except (openai.APIResponseValidationError, LookupError, TypeError, AttributeError, ValueError) as exc:
                    last_kind, last_reason, retry_after, fatal = "invalid_response", self._redact(f"{type(exc).__name__}: {exc}")[:300], None, None
                else:
                    ep.answered = True
                    usage = data.get("usage") or {}
                    if isinstance(usage.get("prompt_tokens"), int):
                        tin, tout = usage["prompt_tokens"], int(usage.get("completion_tokens") or 0)
                    else:
                        stats.usage_estimated += 1
                        tin = estimate_input_tokens(body["messages"])
                        tout = math.ceil(len(text or "") / 4)
                    ep.slots.on_success()
                    if ep.tpm is not None:
                        ep.tpm.adjust(estimate - (tin + tout))
                    stats.calls_made += 1
                    stats.input_tokens += tin
                    stats.output_tokens += tout
                    if config.price is not None:
                        stats.cost_usd += config.price.cost(tin, tout)
                    else:
                        stats.cost_complete = False
                    run.counters.note_request(tin + tout)
                    if not isinstance(text, str):
                        stats.calls_failed += 1
                        stats.errors["empty_reply"] += 1
                        refusal = message.get("refusal")
                        raise _CallFailed("empty", "the endpoint returned no text"
                                          + (f" (refusal: {self._redact(str(refusal))[:300]})" if refusal else ""))
                    text = self._redact(text)
                    if finish == "length":
                        stats.errors["truncated"] += 1
                    else:
                        self.cache.put(key, CachedReply(text, finish, tin, tout, config.model))
                    return _Reply(text, finish, tin, tout, cached=False)
            # a failed attempt
            run.counters.note_request(0)
            stats.errors[last_kind] += 1
            if fatal is not None:
                raise fatal
            if last_kind.startswith("http_4") and last_kind not in ("http_408", "http_409"):
                break  # the request itself is wrong: retrying will not help
            if ep.tpm is not None:
                ep.tpm.adjust(estimate)
            log.debug("%s: %s attempt %d/%d failed: %s", run.step, p.task.item_id, attempt + 1, attempts, last_reason)
            if retry_after is not None:
                delay = min(retry_after, self.retry_after_cap_s) * self._rng.uniform(1.0, 1.1)
            else:
                delay = backoff_delay(attempt, self.backoff_base_s, self.backoff_cap_s, self._rng)
            if last_kind in ("rate_limited", "http_503"):
                ep.gate.close_for(delay)  # every worker of this endpoint waits
                if last_kind == "rate_limited":
                    ep.slots.on_rate_limited()
                delay = 0.0
        stats.calls_failed += 1
        tried = attempt + 1
        raise _CallFailed("request_failed", f"request failed after {tried} attempt{'s' if tried > 1 else ''}; "
                          f"last error: {last_kind}: {last_reason}")

    def _classify_status(self, ep: _Endpoint, exc) -> tuple[str, str, float | None, GenError | None]:
        status = exc.status_code
        message = self._redact(_error_message(exc))[:300]
        retry_after = retry_after_seconds(exc.response.headers) if exc.response is not None else None
        env = ep.config.api_key_env
        if status in (401, 403):
            return f"http_{status}", message, None, GenError(
                f"the endpoint refused the API key (HTTP {status}): {message}", record=ep.where, field="api_key_env",
                expected=f"a valid key in the environment variable {env}" if env else "an endpoint that needs no key")
        if status == 404:
            return "http_404", message, None, GenError(
                f"model or URL not found (HTTP 404): {message}", record=ep.where, field="model",
                expected="a model the server at base_url serves, and a base_url ending in the API root (e.g. /v1)")
        if status == 429:
            code = getattr(exc, "code", None)
            if code == "insufficient_quota":
                return "quota_exhausted", message, None, GenError(
                    f"the account's quota is exhausted (HTTP 429 insufficient_quota): {message}", record=ep.where,
                    expected="credit on the account behind the key")
            return "rate_limited", message, retry_after, None
        return f"http_{status}", message, retry_after, None

    def _client(self, ep: _Endpoint):
        """The endpoint's openai client, created on first use (so plans and cached runs need no key)."""
        if ep.client is None:
            from openai import AsyncOpenAI

            http, default_client = http_stack()

            env = ep.config.api_key_env
            if env:
                key = os.environ.get(env, "")
                if not key:
                    raise GenError(f"the environment variable {env} is not set", record=ep.where, field="api_key_env",
                                   expected=f"the API key in {env} (or api_key_env: null for a server without keys)")
                self._secrets.add(key)
            else:
                key = "no-key"
            limit = ep.config.max_concurrency
            ep.client = AsyncOpenAI(
                api_key=key,
                base_url=ep.config.base_url,
                max_retries=0,  # the engine retries, with shared backoff and rate limits
                timeout=ep.config.timeout_s,
                http_client=default_client(
                    limits=http.Limits(max_connections=limit, max_keepalive_connections=limit),
                    timeout=ep.config.timeout_s,
                ),
            )
        return ep.client

    async def _close_clients(self) -> None:
        for ep in self._endpoints.values():
            if ep.client is not None:
                try:
                    await ep.client.close()
                except Exception:  # noqa: BLE001 - closing is best effort
                    pass
                ep.client = None

    # -- bookkeeping ----------------------------------------------------------------------------------
    def _remember_secret(self, env: str | None) -> None:
        if env and os.environ.get(env):
            self._secrets.add(os.environ[env])

    def _redact(self, text: str) -> str:
        for secret in self._secrets:
            if len(secret) >= 4 and secret in text:
                text = text.replace(secret, REDACTED)
        return text

    def _collect_rejects(self, run: _StepRun) -> None:
        new = []
        for outcome in run.outcomes:
            if outcome is None or outcome.ok or outcome.kind == "not_cached":
                continue
            new.append({
                "step": run.step,
                "item_id": outcome.task.item_id,
                "sample": outcome.task.sample,
                "endpoint": outcome.task.endpoint,
                "kind": outcome.kind,
                "reason": outcome.reason,
                "raw_text": outcome.text,
            })
        with self._lock:
            self.rejects.extend(new)

    def _merge_plan(self, plan: StepPlan) -> None:
        existing = self._plans.get(plan.step)
        self._plans[plan.step] = existing.merge(plan) if existing else plan

    def _offline_error(self, step: str, p: _Prepared) -> GenError:
        return GenError("offline run: this call is not in the LLM cache", record=f"step {step}, item {p.task.item_id}",
                        field=f"endpoint {p.endpoint.name}",
                        expected=f"a cache filled by an earlier run with the same prompts and parameters ({self.cache.path})")

    def _reject_rate_error(self, run: _StepRun, rate: float | None) -> GenError:
        reasons = ", ".join(f"{kind} ×{n}" for kind, n in run.reject_reasons.most_common(4))
        return GenError(
            f"stopped: {run.stats.rejected} of {run.stats.items} items rejected, more than max_reject_rate "
            f"{rate:.0%} allows; by kind: {reasons}; see the run's rejects for reasons and raw replies",
            record=f"step {run.step}", field="max_reject_rate",
            expected="fewer failures (check the prompt, the parser and the endpoint), or a higher max_reject_rate")

    def _error_summary(self, run: _StepRun) -> str:
        if not run.stats.errors:
            return ""
        errors = ", ".join(f"{kind} ×{n}" for kind, n in run.stats.errors.most_common())
        return f"[llm] {run.step}: errors by type: {errors}"


@functools.lru_cache(maxsize=1)
def http_stack():
    """(HTTP module, openai's default async HTTP client class): httpx2 for openai 3.x, httpx before."""
    try:
        import httpx2
        from openai import DefaultAsyncHttpx2Client
    except ImportError:  # openai < 3
        import httpx
        from openai import DefaultAsyncHttpxClient

        return httpx, DefaultAsyncHttpxClient
    return httpx2, DefaultAsyncHttpx2Client


def _error_message(exc) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping) and inner.get("message"):
            return str(inner["message"])
        if body.get("message"):
            return str(body["message"])
    return str(getattr(exc, "message", "") or exc)
