"""Executors: run the shards of a stage and yield their results in conversation order, so the bytes written
are the same whichever executor ran them.

  local   one conversation per shard, in this process or, with workers > 1, in a pool of forked processes
  ray     shards of one or more conversations (sized from how long one takes), as Ray tasks (a local Ray
          instance, or a cluster at --ray-address)
  llm     batches of conversations in this process, which holds the run's one LLM engine (one cache, one set
          of rate limits for every step): in each, the products that need no LLM conversation by conversation,
          then the LLM products over the batch (gen/pipeline/shards.py, process_batch)
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import multiprocessing
import os
import queue
import tempfile
from collections import deque
from collections.abc import Generator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from queue import SimpleQueue
from typing import TYPE_CHECKING, Any

from gen import stopping
from gen.about import install_hint
from gen.callers import named
from gen.errors import GenError
from gen.llm.accounts.lanes import Lane
from gen.pipeline.shards import Prepared, ShardResult, fewer_collections, process_batch, process_shard
from gen.pipeline.spool import spool
from gen.products.registry import Bound
from gen.sources.store import ConversationStore, HeldConversations

if TYPE_CHECKING:
    from gen.llm.engine import Engine

# The LLM stage's batches: one engine step covers the items of a batch's conversations, and a step fills up
# and drains at its ends, so a step should hold several times what may be in flight. The first batch has as
# many conversations as may be in flight; the next are sized from the items per conversation seen so far;
# every batch has between LLM_BATCH and LLM_BATCH_MAX conversations (what a batch holds in memory).
LLM_BATCH = 64
LLM_BATCH_MAX = 256
LLM_ROUNDS_PER_STEP = 8  # items per step, in multiples of the endpoints' concurrency
LLM_IN_FLIGHT = 2  # batches whose steps run at once (gen/llm/accounts/lanes.py): one fills the limits, one drains
BATCH_ITEMS = 50_000  # what one Batch API input file may hold
RAY_IN_FLIGHT_PER_WORKER = 2  # Ray tasks submitted but not yet written, per worker: bounds the memory they hold
# Ray shards: one conversation until a shard has come back; then sized for RAY_TASK_SECONDS of work
# from the seconds per conversation seen so far, with at least RAY_SHARDS_PER_CPU shards per CPU left for the
# conversations still to come (so the last shards end together) and at most RAY_SHARD_MAX conversations.
RAY_TASK_SECONDS = 0.1
RAY_SHARDS_PER_CPU = 4
RAY_SHARD_MAX = 64
# The local Ray instance gen starts: its object store only carries the shards' conversations and the results
# of the shards that could not be spooled, so a small one is enough (Ray's default takes 30% of the memory).
RAY_OBJECT_STORE_BYTES = 256 * 1024 * 1024

_WORKER_STATE: dict[str, Any] = {}  # set in the parent before the pool forks, read by the workers


def _start_worker() -> None:
    """Ctrl-C and SIGHUP reach the whole process group: the parent stops the pool and reports; workers stay quiet,
    and SIGTERM (the pool's end sends it, a job scheduler may send it to the whole group) ends them silently, with
    the pool's queue lock released (gen/stopping.py). What the worker inherited (the run's Prepared, the modules)
    is left out of garbage collections, which would otherwise read it and write to it, and so copy the pages it
    shares with the parent."""
    stopping.leave_to_parent(unwind_on_sigterm=True)  # (a forked worker would otherwise inherit the CLI's handlers)
    gc.freeze()


def _process_in_worker(positions: Sequence[int]) -> ShardResult:
    result = process_shard(_WORKER_STATE["prepared"], positions, _WORKER_STATE["products"])
    return spool(result, _WORKER_STATE["spool"] / str(positions[0]))


def local_results(
    prepared: Prepared, products: list[Bound], workers: int | None, spool_folder: Path | None = None
) -> Generator[ShardResult, None, None]:
    """One conversation per shard. With workers, each worker leaves its shards' lines in `spool_folder`
    (gen/pipeline/spool.py; a temporary folder when none is given) and sends back where."""
    shards = [[position] for position in range(len(prepared.conversations))]
    if workers is None or workers <= 1 or len(shards) <= 1:
        for shard in shards:
            yield process_shard(prepared, shard, products)
        return
    if "fork" not in multiprocessing.get_all_start_methods():
        workers_named = named("--workers", "RunOptions.workers")
        raise GenError(
            f"{workers_named} needs the 'fork' start method, which this platform lacks",
            field=workers_named,
            expected=f"{workers_named} 1",
        )
    with contextlib.ExitStack() as cleanup:
        if spool_folder is None:
            spool_folder = Path(cleanup.enter_context(tempfile.TemporaryDirectory(prefix="gen-spool-")))
        _WORKER_STATE.update(prepared=prepared, products=products, spool=spool_folder)
        cleanup.callback(_WORKER_STATE.clear)
        processes = min(workers, len(shards))  # never a process with no conversation to work on
        with multiprocessing.get_context("fork").Pool(processes, initializer=_start_worker) as pool:
            results = pool.imap(_process_in_worker, shards, chunksize=1)
            for _ in shards:  # waited for in slices: a stop must not wait for a result (gen/stopping.py)
                yield stopping.patiently(results.next, multiprocessing.TimeoutError)


# --- Ray ------------------------------------------------------------------------------------------------

_RAY_PREPARED: dict[str, Prepared] = {}  # in a Ray worker process: the run's Prepared, fetched once per process


def _process_in_ray(
    prepared_ref: list[Any],
    positions: Sequence[int],
    products: list[Bound],
    blobs: dict[int, bytes],
    spool_to: tuple[str, str] | None,
) -> ShardResult:
    """A Ray task: one shard, exactly as the local executor runs it. `prepared_ref` is [ObjectRef] of the run's
    Prepared without its conversations, wrapped so that Ray does not fetch it for every task: each worker
    process fetches it once. `blobs` are the conversations the shard reads (its own and their donors'), unless
    the Prepared reads them from the driver's file (gen's own local instance). On the driver's node (`spool_to`:
    spool folder, node id) the lines go to the spool folder, as a local worker's."""
    import ray

    key = prepared_ref[0].hex()
    prepared = _RAY_PREPARED.get(key)
    if prepared is None:
        _RAY_PREPARED.clear()  # a worker of a long-lived cluster keeps only the latest run's
        prepared = _RAY_PREPARED[key] = ray.get(prepared_ref[0])
        gc.freeze()  # what the worker holds for the run (Ray, gen, the Prepared) is left out of collections
    held = prepared.conversations.store
    if isinstance(held, HeldConversations):
        held.hold(blobs)
    try:
        result = process_shard(prepared, positions, products)
    finally:
        if isinstance(held, HeldConversations):
            held.hold({})
    if spool_to is not None and ray.get_runtime_context().get_node_id() == spool_to[1]:
        return spool(result, Path(spool_to[0]) / str(positions[0]))
    return result


def require_ray() -> Any:
    """The `ray` module, or the one error that says how to install it."""
    try:
        import ray
    except ImportError as error:
        executor = named("--executor", "RunOptions.executor")
        raise GenError(
            f"{named('--executor ray', 'executor=' + repr('ray'))} needs Ray, which is not installed ({error})",
            field=executor,
            expected=f"{install_hint('ray')}, or {named('--executor local', 'executor=' + repr('local'))}",
        ) from None
    return ray


class RayConnection:
    """The run's Ray, started or connected to in this thread (Ray's driver must be the main thread).

    Without `address`, gen starts a local Ray instance of its own (`workers` CPUs, default every CPU; an
    object store of RAY_OBJECT_STORE_BYTES; no dashboard, autoscaler monitor or log monitor; worker output not
    forwarded, no usage stats sent), never one found through RAY_ADDRESS, and `close` shuts it down. With
    `address` (`auto`, `host:port`, `ray://host:10001`) it connects to that cluster, whose workers must be able
    to import gen, and `close` only disconnects; `workers` then bounds the tasks in flight (default: from the
    cluster's CPUs). A Ray already initialised in this process (a notebook, a test) is used as it is and left
    running."""

    def __init__(self, workers: int | None, address: str | None = None) -> None:
        self.ray = require_ray()
        self.started_here = not self.ray.is_initialized()
        self.local = self.started_here and address is None  # gen's own instance: every worker on this machine
        self.workers = local_cpus(workers) if self.local else workers
        if not self.started_here:
            return
        quiet = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.ERROR}
        if address is None:
            self.ray.init(address="local", num_cpus=self.workers, object_store_memory=RAY_OBJECT_STORE_BYTES, **quiet)
            self._stop_unused_head_processes()
            return
        try:
            self.ray.init(address=address, **quiet)
        except (ConnectionError, ValueError, RuntimeError) as error:
            raise GenError(
                f"cannot connect to the Ray cluster at {address!r}: {error}",
                field=named("--ray-address", "RunOptions.ray_address"),
                expected="auto, host:port or ray://host:10001 of a running cluster, or none",
            ) from None

    def _stop_unused_head_processes(self) -> None:
        """ray.init starts an autoscaler monitor and a log monitor with every local instance and has no switch to
        leave them out; a one-machine instance that forwards no worker output uses neither, and they hold about
        170 MB (RSS) of Python. Killed outright: a monitor sent SIGTERM reports its end as an error on the
        driver's terminal."""
        from ray._private import ray_constants

        node = self.ray._private.worker._global_node
        for process_type in (ray_constants.PROCESS_TYPE_MONITOR, ray_constants.PROCESS_TYPE_LOG_MONITOR):
            node._kill_process_type(process_type, allow_graceful=False, check_alive=False, wait=True)

    def close(self) -> None:
        if self.started_here and self.ray.is_initialized():
            self.ray.shutdown()


def local_cpus(workers: int | None) -> int | None:
    """The CPUs gen's own Ray instance declares: at most the machine's. Ray starts a worker process per declared
    CPU as tasks arrive, and the tasks are CPU-bound, so CPUs beyond the machine's would be processes with no
    core to run on."""
    machine = os.cpu_count() or 1
    return None if workers is None else min(workers, machine)


def ray_results(
    prepared: Prepared, products: list[Bound], connection: RayConnection, spool_folder: Path | None = None
) -> Generator[ShardResult, None, None]:
    """The stage that needs no LLM as Ray tasks, yielded in conversation order; `connection` is closed at its
    end (an LLM stage that follows does not use Ray).

    The run's Prepared goes once into the object store without its conversations; each task carries the conversations
    its shard reads (its own and their padding donors', told from the summaries), so no Ray process holds the
    corpus. On gen's own local instance the tasks instead read them from the driver's store file
    (`ConversationStore.shared`): nothing is copied into the object store, the driver reads nothing. A shard is one
    conversation at first, then as many as take about RAY_TASK_SECONDS (`ray_shard_size`). At most
    RAY_IN_FLIGHT_PER_WORKER × workers tasks are in flight (submitted and not yet written), so what waits in the
    object store stays bounded on any corpus; the writer gets the results in order, so the bytes are those of the
    local executor. A task that runs on this node leaves its lines in `spool_folder` (gen/pipeline/spool.py) instead of
    sending them through the object store.

    Only this stage runs on Ray. The LLM stage stays in the driver (`llm_results`) with the run's one
    engine: that is what keeps the LLM limits (requests and tokens per minute, concurrency) global and the
    reply cache one cache, whatever the number of Ray workers.
    """
    ray = connection.ray
    pending: deque[tuple[int, Any]] = deque()  # (conversations, ObjectRef) per task, in conversation order
    try:
        width = connection.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        store = prepared.conversations.store
        assert isinstance(store, ConversationStore)  # the driver's own: it holds every conversation
        shared = store.shared() if connection.local else None
        prepared_ref = [ray.put(prepared.reading(shared or HeldConversations(store.summaries)))]
        products_ref = ray.put(products)
        spool_to = (str(spool_folder), ray.get_runtime_context().get_node_id()) if spool_folder else None
        task = ray.remote(_process_in_ray)
        count, first, done, seconds = len(prepared.conversations), 0, 0, 0.0
        while first < count or pending:
            while first < count and len(pending) < RAY_IN_FLIGHT_PER_WORKER * width:
                size = ray_shard_size(seconds, done, count - first, width)
                positions = range(first, min(count, first + size))
                blobs = (
                    {} if shared else {at: store.blob(at) for position in positions for at in prepared.reads(position)}
                )
                pending.append((len(positions), task.remote(prepared_ref, positions, products_ref, blobs, spool_to)))
                first = positions.stop
            conversations, ref = pending.popleft()
            result = _ray_get(ray, ref)
            done, seconds = done + conversations, seconds + sum(result.seconds.values())
            yield result
    finally:
        for _, ref in pending:  # the run failed or was interrupted: drop what is still queued
            with contextlib.suppress(Exception):  # already finished, or gone with the cluster
                ray.cancel(ref)
        connection.close()


def ray_shard_size(seconds: float, done: int, left: int, width: int) -> int:
    """Conversations in the next Ray shard: one until a shard has come back; then about RAY_TASK_SECONDS of
    work at the `seconds` per `done` conversations seen so far, at least RAY_SHARDS_PER_CPU shards per CPU for
    the `left` conversations, and between 1 and RAY_SHARD_MAX."""
    if not done:
        return 1
    wanted = RAY_SHARD_MAX if seconds <= 0 else max(1, round(RAY_TASK_SECONDS * done / seconds))
    balanced = max(1, math.ceil(left / (RAY_SHARDS_PER_CPU * width)))
    return max(1, min(wanted, balanced, RAY_SHARD_MAX))


def _ray_get(ray: Any, ref: Any) -> ShardResult:
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as error:  # a user error in a task reads as it would locally
        if isinstance(error.cause, GenError):
            raise error.cause from None
        raise


def llm_results(prepared: Prepared, products: list[Bound], engine: Engine) -> Generator[ShardResult, None, None]:
    """Batches of conversations through the LLM products, yielded in conversation order. LLM_IN_FLIGHT batches run at
    once, each in a thread of its own and in an engine lane (gen/llm/accounts/lanes.py): the next batch's items
    are prepared and its calls sent while the current one drains, so the endpoints' limits never idle between
    steps. Lanes are merged into the engine in batch order, so rejects come out as with one batch at a time. When
    the run stops (a stop in a batch, an error, Ctrl-C), the batches after the oldest one in flight are cancelled
    and left out (their completed calls stay cached), and the oldest is merged as it stands. Products ask one
    item or more per conversation: the first batches are as large as the concurrency. Through the Batch API a
    step's round waits for its batch whatever its size: there one batch at a time holds up to a full batch file
    of items."""
    if engine.batch_mode:
        concurrency, most = BATCH_ITEMS // LLM_ROUNDS_PER_STEP, BATCH_ITEMS
    else:
        concurrency, most = engine.concurrency, LLM_BATCH_MAX
    if engine.batch_mode or not all(b.product.concurrent_batches for b in products if b.product.needs.llm):
        yield from _one_batch_at_a_time(prepared, products, engine, concurrency, most)
        return
    count, first = len(prepared.conversations), 0
    items = conversations = 0  # over the batches finished so far: what sizes the next
    pending: deque[Batch] = deque()  # in conversation order
    with fewer_collections(), ThreadPoolExecutor(LLM_IN_FLIGHT, thread_name_prefix="gen-llm-batch") as threads:
        try:
            while first < count or pending:
                while first < count and len(pending) < LLM_IN_FLIGHT:
                    size = llm_batch_size(items, conversations, concurrency, most) if conversations else None
                    positions = range(first, min(count, first + (size or max(LLM_BATCH, min(most, concurrency)))))
                    batch = Batch(Lane(order=first), len(positions), SimpleQueue())
                    batch.done = threads.submit(_llm_batch, prepared, positions, products, engine, batch)
                    pending.append(batch)
                    first = positions.stop
                batch = pending[0]
                try:
                    while (result := next_result(batch)) is not None:
                        yield result
                    stopping.patiently(batch.done.result, TimeoutError)
                except BaseException:
                    _cancel(pending)  # and wait for their threads, so that nothing changes the lane merged below
                    raise
                finally:
                    asked = batch.lane.items  # (merging empties the lane)
                    engine.merge(batch.lane)
                pending.popleft()
                items, conversations = items + asked, conversations + batch.conversations
        finally:
            _cancel(pending)


def next_result(batch: Batch) -> ShardResult | None:
    """The batch's next result (None after its last), waited for in slices: a stop must not wait for it."""
    return stopping.patiently(lambda seconds: batch.results.get(timeout=seconds), queue.Empty)


def _one_batch_at_a_time(
    prepared: Prepared, products: list[Bound], engine: Engine, concurrency: int, most: int
) -> Generator[ShardResult, None, None]:
    """The LLM stage for products that count over the run (or read engine.rejects), and through the Batch API:
    each batch in this thread, after the one before."""
    count, first, size = len(prepared.conversations), 0, max(LLM_BATCH, min(most, concurrency))
    while first < count:
        last, lane = min(first + size, count), Lane()
        try:
            with engine.lane(lane):
                yield from process_batch(prepared, range(first, last), products, engine)
        finally:
            asked = lane.items  # (merging empties the lane)
            engine.merge(lane)
        size = llm_batch_size(asked, last - first, concurrency, most)
        first = last


@dataclass
class Batch:
    """A batch in flight: its lane, its conversations, its results as they come (None after the last) and its
    thread's future (which holds its error)."""

    lane: Lane
    conversations: int
    results: SimpleQueue[ShardResult | None]
    done: Future[None] = field(default_factory=Future)


def _llm_batch(
    prepared: Prepared, positions: Sequence[int], products: list[Bound], engine: Engine, batch: Batch
) -> None:
    try:
        with engine.lane(batch.lane):
            for result in process_batch(prepared, positions, products, engine):
                batch.results.put(result)
    finally:
        batch.results.put(None)


def _cancel(pending: deque[Batch]) -> None:
    """Cancel the batches still in flight and wait until their threads have stopped."""
    for batch in pending:
        batch.lane.cancel()
    wait([batch.done for batch in pending])


def llm_batch_size(items: int, conversations: int, concurrency: int, most: int = LLM_BATCH_MAX) -> int:
    """Conversations in the next batch, for about LLM_ROUNDS_PER_STEP × concurrency items per step, from the
    `items` the `conversations` of the batches finished so far asked."""
    if not items:
        return most
    wanted = math.ceil(LLM_ROUNDS_PER_STEP * concurrency * conversations / items)
    return max(LLM_BATCH, min(most, wanted))
