"""The engine's batch side (``mode: batch``, batch files): rounds of a step sent as batches, what came back.

Before a step's ordinary pass, when any of its endpoints is batched, the engine settles the step in rounds
(``Engine._settle_batches``): it walks the step without sending (as a plan does) to find the calls still missing
(a correction round's call appears once its first reply is in) and hands them to :meth:`Batching.round`, which
sends them as one batch per endpoint (:mod:`gen.llm.batch.rounds`) and takes every line that comes back, or to
:meth:`Batching.export`, which writes them as files (``--batch-export``); until nothing is missing. The engine
owns its event loop and its walk; this module never sees either. The ordinary pass then
finds every reply in the cache; :meth:`Batching.reply` tells it which of them a batch brought in this run (they
are counted as calls made, at the batch price) and gives it what the cache does not keep: truncated replies,
refusals and calls no batch could answer. ``--batch-import`` files are taken the same way when the engine opens.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Callable

from gen.callers import named
from gen.errors import Stopped
from gen.llm.accounts.counts import StepStats
from gen.llm.batch.files import LineResult
from gen.llm.batch.ledger import Ledger
from gen.llm.cache.store import Cache, CachedReply
from gen.llm.calls.attempts import CallFailed
from gen.llm.calls.endpoint import Endpoint, KeyScrubber
from gen.llm.calls.request import Failure, body_messages
from gen.llm.config import RunSettings
from gen.llm.engine.run import Misses, Prepared, Reply, StepRun

__all__ = ["Batching"]

ERRORS = {"empty": "empty_reply"}  # how the run report counts a failed call, as for online calls


class Batching:
    """See the module docstring."""

    def __init__(self, settings: RunSettings, cache: Cache, endpoints: dict[str, Endpoint], keys: KeyScrubber) -> None:
        self.settings, self.cache, self._endpoints, self._keys = settings, cache, endpoints, keys
        self._ledger: Ledger | None = None
        # batch replies the cache does not keep (truncated, empty) and calls no batch could answer
        self._outcomes: dict[str, Reply | CallFailed] = {}
        self._made: dict[str, tuple[int, int, bool]] = {}  # answered by a batch, not counted yet
        if settings.batch_import:
            from gen.llm.batch.files import import_outputs

            import_outputs(settings.batch_import, self.take_imported)

    def close(self) -> None:
        if self._ledger is not None:
            self._ledger.close()

    def batched(self, ep: Endpoint) -> bool:
        return ep.config.mode == "batch" or self.settings.batch_export is not None

    async def round(self, step: str, misses: Misses, stats: StepStats, tries: Counter[str]) -> None:
        """Send the calls still missing as one batch per endpoint and take every line that comes back; `tries`
        counts, per call, the rounds whose line said it may pass next time (against the call's retries)."""
        from gen.llm.batch.rounds import run_round

        if self._ledger is None:
            self._ledger = Ledger(self.cache.path)
        by_endpoint: dict[str, dict[str, dict]] = defaultdict(dict)
        for key, (p, body) in misses.items():
            by_endpoint[p.endpoint.name][key] = body
        taken: set[str] = set()

        def take(result: LineResult) -> None:
            if result.key in misses and result.key not in taken:
                taken.add(result.key)
                self.take_line(result, misses[result.key], tries)

        rounds = await asyncio.gather(
            *(
                run_round(self._endpoints[name], step, bodies, self._ledger, self._keys, take)
                for name, bodies in by_endpoint.items()
            )
        )
        stats.requests += sum(r.submitted for r in rounds)
        # a request no line answered goes again, as a failed one would; one that an earlier run's batch held,
        # abandoned since, goes again without counting against its retries (it was never tried in this run)
        resend = {key for r in rounds for key in r.resend}
        for key in misses.keys() - taken - resend:
            self.take_line(
                LineResult(key, None, Failure("retry", "no line of the batch answered it"), ""), misses[key], tries
            )
        cancelled = [batch_id for r in rounds for batch_id in r.cancelled]
        if cancelled:
            raise Stopped(
                f"batch {', '.join(cancelled)} was cancelled; the replies it had finished are in the cache",
                record=f"step {step}",
                expected="the same command again to send what is left in a new batch",
            )

    def take_line(self, result: LineResult, miss: tuple[Prepared, dict], tries: Counter[str]) -> None:
        """One line of a batch's results: a reply into the cache (or kept aside when the cache may not keep it),
        a failure that may pass next round counted against the call's retries, any other failure final."""
        p, body = miss
        if result.answer is not None:
            complete = lambda reply: not reply.truncated(p.task)  # noqa: E731 - as online
            self._answered(result, body_messages(body), p.endpoint.config.model, complete)
        elif result.retry:
            tries[result.key] += 1
            if tries[result.key] > p.endpoint.config.max_retries:
                last = result.failure.reason if result.failure else ""
                reason = f"given up after {tries[result.key]} batches; last: {last}"
                self._outcomes[result.key] = CallFailed("request_failed", reason, raw=self._keys(result.raw) or None)
        else:
            self._refused(result)

    def take_imported(self, result: LineResult) -> None:
        """A line of an output file given with --batch-import, taken as a batch's line is (a failure that may
        pass is left out: its request is written again with the next round's). Which task asked is not known
        here, so a reply that reached its cap is kept aside rather than cached."""
        if result.answer is not None:
            self._answered(result, [], None, lambda reply: reply.finish_reason != "length")
        elif not result.retry:
            self._refused(result)

    def _answered(
        self, result: LineResult, messages: list[dict], model: str | None, complete: Callable[[Reply], bool]
    ) -> None:
        answer, key = result.answer, result.key
        assert answer is not None
        self._made[key] = answer.tokens(messages)
        input_tokens, output_tokens = self._made[key][:2]
        if not isinstance(answer.text, str):
            refusal = f" (refusal: {self._keys(str(answer.refusal))[:300]})" if answer.refusal else ""
            self._outcomes[key] = CallFailed("empty", f"the endpoint returned no text{refusal}", raw=result.raw)
            return
        text = self._keys(answer.text)
        reply = Reply(text, answer.finish_reason, input_tokens, output_tokens, False, answer.logprobs)
        if complete(reply):
            self.cache.put(
                key, CachedReply(text, reply.finish_reason, input_tokens, output_tokens, model, reply.logprobs)
            )
        else:
            self._outcomes[key] = reply

    def _refused(self, result: LineResult) -> None:
        assert result.failure is not None
        kind = "refused" if result.failure.kind.startswith("http_") else result.failure.kind
        reason = f"the batch answered: {result.failure.reason}"
        self._outcomes[result.key] = CallFailed(kind, reason, raw=self._keys(result.raw) or None)

    def reply(self, run: StepRun, p: Prepared, key: str, hit: CachedReply | None) -> Reply | None:
        """What a batch answered for this call when the cache alone cannot say it: a reply kept aside or a
        failure (raised), or a cached reply a batch brought in this run (counted as a call made, once); None
        for any other call."""
        if hit is None and key in self._outcomes:
            outcome = self._outcomes[key]
            if run.misses is None:  # the pass whose outcomes are kept: counted as online
                if key in self._made:
                    self._count(run, p, key)
                failed = isinstance(outcome, CallFailed)
                run.stats.calls_failed += failed
                kind = ERRORS.get(outcome.kind, outcome.kind) if isinstance(outcome, CallFailed) else "truncated"
                run.stats.errors[kind] += 1
            if isinstance(outcome, CallFailed):
                raise outcome
            return outcome
        if hit is not None and key in self._made and run.misses is None:
            self._count(run, p, key)
            return Reply(hit.text, hit.finish_reason, hit.input_tokens, hit.output_tokens, False, hit.logprobs)
        return None

    def _count(self, run: StepRun, p: Prepared, key: str) -> None:
        """A call a batch answered, counted once (at the batch price) in the pass whose outcomes are kept."""
        input_tokens, output_tokens, estimated = self._made.pop(key)
        run.stats.add_call(input_tokens, output_tokens, p.endpoint.config.batch_price, estimated=estimated)
        run.stats.calls_batch += 1
        run.counters.note_request(input_tokens + output_tokens)

    def export(self, step: str, misses: Misses) -> Stopped:
        """Write the round's requests as batch files (--batch-export) and stop, saying what to run next."""
        from gen.llm.batch.files import request_line, write_request_files

        folder = self.settings.batch_export
        assert folder is not None
        folder.mkdir(parents=True, exist_ok=True)
        groups: dict[tuple[str, str], list[bytes]] = defaultdict(list)
        for key, (p, body) in misses.items():
            groups[(p.endpoint.name, "chat" if "messages" in body else "completions")].append(request_line(key, body))
        files = []
        for (name, kind), lines in sorted(groups.items()):
            config = self._endpoints[name].config
            stem = f"{step}.{name}" + ("" if kind == "chat" else ".completions")
            written = write_request_files(
                lines, folder, stem, max_requests=config.batch_max_requests, max_bytes=config.batch_max_bytes
            )
            files += [str(path) for path, _ in written]
        self.cache.flush()
        return Stopped(
            f"wrote the {len(misses):,} requests step {step} still needs into {', '.join(files)}",
            exit_code=0,
            resume="answer them through the Batch API or vLLM's run_batch, then run the same command with "
            f"{named('--batch-import', 'RunSettings.batch_import')} and the output files (and "
            f"{named('--batch-export', 'RunSettings.batch_export')} for the round after)",
        )
