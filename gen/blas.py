"""The threads of numpy's BLAS, read and set while the sentence encoder runs (gen/embedding.py), through
threadpoolctl (the library scikit-learn uses for the same).

Why: OpenBLAS splits each matrix product over its threads, and between products (the encoder's other steps run
on one core) those threads wait by spinning. On a 2-core machine that costs as much CPU as the products save,
and on a shared machine it doubles the CPU time (bench/bench_quality.py: 50 s instead of 28 s). The encoder does
better with each product on one thread and its batches shared among as many threads of its own, every step of a
batch then running in parallel with another batch's. `one_thread_each` sets BLAS to one thread for that time
and gives how many it had: the parallelism the user allows (OPENBLAS_NUM_THREADS, else the cores), kept.
Where no BLAS library is found, nothing is changed and the encoder runs its batches one after another."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()  # the setting is the whole process's: one encoder at a time changes it


def blas_threads() -> int | None:
    """The threads numpy's BLAS runs each product on (the most of any BLAS loaded), or None without one."""
    from threadpoolctl import threadpool_info

    found = [info["num_threads"] for info in threadpool_info() if info.get("user_api") == "blas"]
    return max(found) if found else None


@contextmanager
def one_thread_each() -> Iterator[int]:
    """Run the body with BLAS on one thread; yields how many threads it had (1 when no BLAS is found, so the
    caller then works on one thread). Restored afterwards, whatever happens."""
    from threadpoolctl import threadpool_limits

    with _lock:
        before = blas_threads()
        if before is None:
            yield 1
            return
        with threadpool_limits(limits=1, user_api="blas"):
            yield max(1, before)
