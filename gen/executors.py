"""Executors: run the shards of a stage and yield their results in conversation order, so the bytes written
are the same whichever executor ran them.

  local   one conversation per shard, in this process or, with workers > 1, in a pool of forked processes
  llm     batches of conversations in this process, which holds the run's one LLM engine (one cache, one set
          of rate limits for every step)
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from gen.errors import GenError
from gen.products.registry import Bound
from gen.work import Prepared, ShardResult, process_shard

if TYPE_CHECKING:
    from gen.llm.engine import Engine

LLM_BATCH = 64  # conversations per batch in the LLM stage: one engine step covers all their items

_WORKER_STATE: dict[str, Any] = {}  # set in the parent before the pool forks, read by the workers


def _process_in_worker(positions: Sequence[int]) -> ShardResult:
    return process_shard(_WORKER_STATE["prepared"], positions, _WORKER_STATE["products"])


def local_results(prepared: Prepared, products: list[Bound], workers: int) -> Iterator[ShardResult]:
    shards = [[position] for position in range(len(prepared.conversations))]
    if workers <= 1 or len(shards) <= 1:
        for shard in shards:
            yield process_shard(prepared, shard, products)
        return
    if "fork" not in multiprocessing.get_all_start_methods():
        raise GenError(
            "--workers needs the 'fork' start method, which this platform lacks",
            field="--workers",
            expected="--workers 1",
        )
    _WORKER_STATE.update(prepared=prepared, products=products)
    try:
        with multiprocessing.get_context("fork").Pool(workers) as pool:
            yield from pool.imap(_process_in_worker, shards, chunksize=1)
    finally:
        _WORKER_STATE.clear()


def llm_results(prepared: Prepared, products: list[Bound], engine: Engine) -> Iterator[ShardResult]:
    count = len(prepared.conversations)
    for first in range(0, count, LLM_BATCH):
        yield process_shard(prepared, range(first, min(first + LLM_BATCH, count)), products, engine)
