"""One round of a step through the Batch API: request files up, batches created, polled, results down.

:func:`run_round` is given the requests one endpoint still has to answer in a round (cache key -> body). It
first polls every batch the ledger knows that already holds some of them (a run that was stopped while they
were in flight), then writes the others into request files within the endpoint's limits, uploads each
(``files.create``, purpose ``batch``), creates its batch (``batches.create``, window ``24h``) and records the
batch id in the ledger at once. A batch sent in this round is first polled ``batch_poll_s`` after it was
created (one from an earlier run at once: it may well be done), then with a wait that doubles up to
:data:`MAX_POLL_S`, until it ends; its output and error files are read line by line (never whole) and each
line goes to ``take``, which the engine uses to fill the cache. How a batch ends:

* completed, expired, cancelled: every line that came back is taken (a request that did not is left for the
  engine to send in its next round); a cancelled batch is reported in :attr:`Round.cancelled`;
* failed (the request file did not pass the API's validation): :class:`gen.errors.Stopped`, quoting the API;
* the endpoint answers 404 for the batch or one of its result files (the batch was made with another key, or
  the provider purged it): it is marked abandoned in the ledger and never polled again, and the requests it
  did not answer are left for the next round (:attr:`Round.abandoned`). Stopping instead would leave the cache
  unable to run: every later run would poll the same unknown batch.

Once a batch's results are in the cache, its request, output and error files are deleted from the provider
(:func:`_discard`; they hold the corpus text), unless the endpoint sets ``batch_keep_files``. A file that cannot
be deleted is a warning, never a stop: the replies are already safe.
"""

from __future__ import annotations

import asyncio
import logging
import tempfile
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gen.errors import Stopped
from gen.llm.batch.files import LineResult, read_result, request_line, write_request_files
from gen.llm.batch.ledger import ABANDONED, TERMINAL, Ledger
from gen.llm.calls.endpoint import Endpoint, KeyScrubber
from gen.llm.calls.request import Failure, server_message, stop_error

__all__ = ["API_RETRIES", "MAX_POLL_S", "Round", "run_round"]

log = logging.getLogger("gen.llm")

MAX_POLL_S = 600.0
API_RETRIES = 4  # the openai client's own retries of a files/batches call (connection errors, 5xx, 429)
_sleep = asyncio.sleep  # every wait between polls goes through here (a test counts them instead of waiting)


class _Gone(Exception):
    """The endpoint answered 404 for a batch or one of its files: it does not know it (any more)."""


@dataclass
class Round:
    submitted: int = 0  # requests sent in new batches
    batches: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    abandoned: list[str] = field(default_factory=list)  # batches the endpoint no longer knows
    resend: set[str] = field(default_factory=set)  # requests of abandoned batches sent by an earlier run
    unreadable_lines: int = 0


@dataclass(frozen=True)
class _Link:
    """What every files/batches call of one endpoint's round needs."""

    client: Any
    ep: Endpoint
    step: str
    ledger: Ledger
    keys: KeyScrubber


async def run_round(
    ep: Endpoint,
    step: str,
    bodies: Mapping[str, dict],
    ledger: Ledger,
    keys: KeyScrubber,
    take: Callable[[LineResult], None],
) -> Round:
    client = ep.client(keys).with_options(max_retries=API_RETRIES, timeout=MAX_POLL_S)
    link = _Link(client, ep, step, ledger, keys)
    round_ = Round()
    waiting = ledger.open_for(bodies, ep.config.base_url)
    for batch_id in waiting:
        log.info("[llm] %s: polling batch %s, sent by an earlier run", step, batch_id)
    covered = {key for held in waiting.values() for key in held}
    by_url: dict[str, list[str]] = defaultdict(list)
    for key, body in bodies.items():
        if key not in covered:
            by_url["/v1/chat/completions" if "messages" in body else "/v1/completions"].append(key)
    ids = list(waiting)
    for url, url_keys in by_url.items():
        ids += await _submit(link, url, url_keys, bodies)
        round_.submitted += len(url_keys)
    round_.batches = ids
    ends = await asyncio.gather(
        *(_finish(link, batch_id, take, round_, sent_now=batch_id not in waiting) for batch_id in ids)
    )
    ended = dict(zip(ids, ends, strict=True))
    round_.cancelled = [batch_id for batch_id, status in ended.items() if status == "cancelled"]
    round_.abandoned = [batch_id for batch_id, status in ended.items() if status == ABANDONED]
    round_.resend = {key for batch_id in round_.abandoned for key in waiting.get(batch_id, ())}
    return round_


async def _submit(link: _Link, url: str, url_keys: list[str], bodies: Mapping[str, dict]) -> list[str]:
    """Upload the requests as files within the endpoint's limits and create a batch of each; their ids."""
    client, ep, step, keys = link.client, link.ep, link.step, link.keys
    config, ids = ep.config, []
    with tempfile.TemporaryDirectory(prefix="gen-batch-") as folder:
        files = write_request_files(
            (request_line(key, bodies[key]) for key in url_keys),
            Path(folder),
            "requests",
            max_requests=config.batch_max_requests,
            max_bytes=config.batch_max_bytes,
        )
        start = 0
        for path, count in files:
            file_keys = url_keys[start : start + count]  # lines are written in key order
            start += count
            with path.open("rb") as handle:
                uploaded = await _api(
                    ep, keys, "upload a request file", client.files.create(file=(path.name, handle), purpose="batch")
                )
            try:
                batch = await _api(
                    ep,
                    keys,
                    "create a batch",
                    client.batches.create(
                        input_file_id=uploaded.id,
                        endpoint=url,
                        completion_window="24h",
                        metadata={"gen_step": step[:500]},
                    ),
                )
            except Stopped:
                await _discard(link, [uploaded.id])  # no batch will ever read it
                raise
            link.ledger.add(batch.id, ep.name, config.base_url, config.api_key_env, step, file_keys)
            log.info("[llm] %s: batch %s created with %s requests on %s", step, batch.id, f"{count:,}", ep.name)
            ids.append(batch.id)
    return ids


async def _finish(
    link: _Link, batch_id: str, take: Callable[[LineResult], None], round_: Round, *, sent_now: bool
) -> str:
    """Poll the batch until it ends, take every line it answered, delete its files; its final status
    (``abandoned`` when the endpoint no longer knows it)."""
    ledger = link.ledger
    try:
        batch = await _until_done(link, batch_id, sent_now=sent_now)
        if batch.status == "failed":
            ledger.collected(batch_id)
            await _discard(link, [batch.input_file_id])
            raise _failed(link.ep, batch_id, batch)
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                await _read_file(link, file_id, take, round_)
    except _Gone as gone:
        ledger.abandon(batch_id)
        log.warning(
            "[llm] %s: %s does not know batch %s (%s): it is marked abandoned, and its requests that have no "
            "reply yet are sent again",
            link.step,
            link.ep.name,
            batch_id,
            gone,
        )
        return ABANDONED
    ledger.collected(batch_id)  # first: a run killed before the files are deleted finds nothing left to read
    await _discard(link, [batch.input_file_id, batch.output_file_id, batch.error_file_id])
    return str(batch.status)


async def _until_done(link: _Link, batch_id: str, *, sent_now: bool) -> Any:
    """The batch once it has ended. A batch sent now is first polled after ``batch_poll_s``, one an earlier run
    sent at once; then the wait doubles up to MAX_POLL_S."""
    wait, seen = link.ep.config.batch_poll_s, None
    if sent_now:
        await _sleep(wait)
        wait = min(wait * 2, MAX_POLL_S)
    while True:
        batch = await _api(
            link.ep, link.keys, f"poll batch {batch_id}", link.client.batches.retrieve(batch_id), gone=True
        )
        counts = batch.request_counts
        done, failed, total = (counts.completed, counts.failed, counts.total) if counts else (0, 0, 0)
        link.ledger.update(batch_id, batch.status, done, failed)
        if (batch.status, done, failed) != seen:
            seen = (batch.status, done, failed)
            log.info(
                "[llm] %s: batch %s %s, %s/%s done, %s failed", link.step, batch_id, batch.status, done, total, failed
            )
        if batch.status in TERMINAL:
            return batch
        await _sleep(wait)
        wait = min(wait * 2, MAX_POLL_S)


async def _discard(link: _Link, file_ids: list[str | None]) -> None:
    """Delete these files from the provider, unless the endpoint keeps them (``batch_keep_files``). Called only
    once nothing needs them; one that is gone already is fine, and one that cannot be deleted is a warning."""
    import httpx2
    import openai

    if link.ep.config.batch_keep_files:
        return
    for file_id in filter(None, file_ids):
        try:
            await link.client.files.delete(file_id)
        except openai.NotFoundError:
            pass
        except (openai.OpenAIError, httpx2.HTTPError) as exc:
            log.warning(
                "[llm] could not delete file %s from %s (%s); it stays there until you delete it",
                file_id,
                link.ep.name,
                _reason(exc, link.keys),
            )


async def _read_file(link: _Link, file_id: str, take: Callable[[LineResult], None], round_: Round) -> None:
    """Every line of a result file, streamed."""
    keys = link.keys

    async def read() -> None:
        async with link.client.files.with_streaming_response.content(file_id) as response:
            async for raw in response.iter_lines():
                if not raw.strip():
                    continue
                result = read_result(raw)
                if result is None:
                    round_.unreadable_lines += 1
                    log.warning("[llm] a line of batch file %s names no request: %s", file_id, keys(raw)[:200])
                else:
                    take(result)

    await _api(link.ep, keys, f"download file {file_id}", read(), gone=True)


async def _api(ep: Endpoint, keys: KeyScrubber, what: str, call: Any, *, gone: bool = False) -> Any:
    """A files/batches call; what it failed with becomes one stop naming the endpoint (every reply already
    taken stays in the cache, every batch created stays in the ledger). ``gone``: a 404 is :class:`_Gone`
    (the call reads a batch or a file the endpoint made, so a 404 means it no longer has it)."""
    import httpx2
    import openai

    from gen.llm.calls.clients import RedirectRefused

    try:
        return await call
    except openai.APIStatusError as exc:
        reason = _reason(exc, keys)
        if gone and exc.status_code == 404:
            raise _Gone(reason) from None
    except RedirectRefused as exc:
        stop = stop_error(Failure("redirect", str(exc)), ep.where, ep.config.api_key_env)
        assert stop is not None
        raise stop from None
    except (openai.APIError, httpx2.HTTPError) as exc:  # (httpx2: a file's stream cut off while it is read)
        reason = server_message(keys(str(exc)))
    raise Stopped(
        f"the Batch API could not {what}: {reason}",
        record=ep.where,
        field="mode",
        expected="an endpoint that offers the Batch API (/v1/files and /v1/batches), or mode: online",
    )


def _reason(exc: Exception, keys: KeyScrubber) -> str:
    """What a files/batches call failed with, in the API's own words when it gave some (``HTTP 404: …``)."""
    import openai

    if not isinstance(exc, openai.APIStatusError):
        return server_message(keys(str(exc)))
    body = exc.body.get("error", exc.body) if isinstance(exc.body, dict) else None
    message = body.get("message") if isinstance(body, dict) else None
    return f"HTTP {exc.status_code}: {server_message(keys(str(message or exc)))}"


def _failed(ep: Endpoint, batch_id: str, batch: Any) -> Stopped:
    errors = getattr(batch.errors, "data", None) or []
    quoted = "; ".join(
        f"{'line ' + str(e.line) + ': ' if e.line is not None else ''}{e.message} ({e.code})" for e in errors[:3]
    )
    return Stopped(
        f"the Batch API refused batch {batch_id}'s request file: {server_message(quoted or 'no reason given')}",
        record=ep.where,
        field="mode",
        expected="requests the endpoint's Batch API accepts (the model and parameters as for online calls)",
    )
