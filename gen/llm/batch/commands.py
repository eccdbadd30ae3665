"""What ``gen batches`` does with the batches a cache has sent: list them, cancel one, forget one. The command
line (gen/cli/caches.py) reaches them through gen/api/tools.py and prints what they give.

A batch id the cache's ledger does not hold is one error for both cancel and forget (:func:`_unknown`), naming
the id and what was expected, so the two commands cannot drift apart.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

from gen.callers import named
from gen.errors import GenError
from gen.llm.batch.ledger import BatchRow, Ledger
from gen.llm.batch.rounds import API_RETRIES, MAX_POLL_S
from gen.llm.calls.endpoint import KeyScrubber
from gen.llm.calls.request import server_message
from gen.llm.config import RunSettings

__all__ = ["cancel_batch", "forget_batch", "known_batches"]


def known_batches(cache_dir: Path | None) -> list[BatchRow]:
    """The batches the cache in ``cache_dir`` has sent (``gen batches``)."""
    ledger = _ledger(cache_dir)
    try:
        return ledger.all()
    finally:
        ledger.close()


def cancel_batch(cache_dir: Path | None, batch_id: str) -> str:
    """Ask the batch's endpoint to cancel it (``gen batches cancel``); the status it reports."""
    import openai

    ledger = _ledger(cache_dir)
    try:
        row = ledger.get(batch_id)
        if row is None:
            raise _unknown(batch_id)
        key = os.environ.get(row.api_key_env, "") if row.api_key_env else "no-key"
        if not key:
            raise GenError(f"the environment variable {row.api_key_env} is not set", record=batch_id)
        keys = KeyScrubber()
        keys.add(key)
        try:
            batch = asyncio.run(_cancel(row.base_url, key, batch_id))
        except openai.OpenAIError as exc:
            raise GenError(
                f"the Batch API could not cancel it: {server_message(keys(str(exc)))}", record=batch_id
            ) from None
        counts = batch.request_counts
        ledger.update(batch_id, batch.status, counts.completed if counts else 0, counts.failed if counts else 0)
        return str(batch.status)
    finally:
        ledger.close()


def forget_batch(cache_dir: Path | None, batch_id: str) -> BatchRow:
    """Remove a batch from the cache's ledger (``gen batches forget``): no run polls or collects it again, and
    its requests that have no reply in the cache are sent again by the next run. The batch as it was."""
    ledger = _ledger(cache_dir)
    try:
        row = ledger.get(batch_id)
        if row is None or not ledger.forget(batch_id):
            raise _unknown(batch_id)
        return row
    finally:
        ledger.close()


def _unknown(batch_id: str) -> GenError:
    return GenError("this cache sent no batch with that id", record=batch_id, expected="an id `gen batches` lists")


async def _cancel(base_url: str, key: str, batch_id: str) -> Any:
    """batches.cancel through a client made as every other (gen.llm.calls.clients), with the Batch API's retries."""
    from gen.llm.calls.clients import openai_client

    async with openai_client(base_url, key, connections=1, timeout=MAX_POLL_S) as client:
        return await client.with_options(max_retries=API_RETRIES).batches.cancel(batch_id)


def _ledger(cache_dir: Path | None) -> Ledger:
    path = RunSettings(cache_dir=cache_dir).cache_path()
    if not path.is_file():
        raise GenError(
            "there is no LLM cache here", file=str(path), expected=f"the {named('--cache-dir', 'cache_dir')} a run used"
        )
    return Ledger(path)
