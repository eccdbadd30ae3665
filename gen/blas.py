"""The threads of numpy's OpenBLAS, read and set while the sentence encoder runs (gen/embedding.py).

Why: OpenBLAS splits each matrix product over its threads, and between products (the encoder's other steps run
on one core) those threads wait by spinning. On a 2-core machine that costs as much CPU as the products save,
and on a shared machine it doubles the CPU time (bench/bench_quality.py: 50 s instead of 28 s). The encoder does
better with each product on one thread and its batches shared among as many threads of its own, every step of a
batch then running in parallel with another batch's. `one_thread_each` sets OpenBLAS to one thread for that time
and gives how many it had: the parallelism the user allows (OPENBLAS_NUM_THREADS, else the cores), kept.

OpenBLAS has no setting numpy exposes, so its own functions are called: the library is found among those the
process has loaded (/proc/self/maps, Linux), under the names numpy's and plain builds give them. Elsewhere (not
Linux, another BLAS) nothing is changed and the encoder runs its batches one after another, as before."""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from functools import lru_cache
from pathlib import Path
from typing import Any

MAPS = Path("/proc/self/maps")
# (get, set): numpy's wheels bundle scipy-openblas, whose symbols carry a prefix and, for 64-bit integers, a suffix
NAMES = [
    (f"{prefix}openblas_get_num_threads{suffix}", f"{prefix}openblas_set_num_threads{suffix}")
    for prefix in ("scipy_", "")
    for suffix in ("64_", "")
]
_lock = threading.Lock()  # the setting is the whole process's: one encoder at a time changes it


@lru_cache(maxsize=1)
def openblas() -> tuple[Any, Any] | None:
    """OpenBLAS's (get, set) thread-count functions, or None when no loaded library has them. Looked up after
    numpy is loaded (the caller imports it first), once per process."""
    try:
        maps = MAPS.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    paths = dict.fromkeys(line.split()[-1] for line in maps.splitlines() if "openblas" in line.lower())
    for path in (p for p in paths if p.startswith("/")):
        try:
            library = ctypes.CDLL(path)  # already loaded: this only gives a handle to it
        except OSError:
            continue
        for get, put in NAMES:
            if hasattr(library, get) and hasattr(library, put):
                return getattr(library, get), getattr(library, put)
    return None


@contextmanager
def one_thread_each() -> Iterator[int]:
    """Run the body with OpenBLAS on one thread; yields how many threads it had (1 when it cannot be told, so the
    caller then works on one thread and BLAS keeps its own). Restored afterwards, whatever happens."""
    functions = openblas()
    if functions is None:
        yield 1
        return
    get, put = functions
    with _lock:
        before = int(get())
        put(1)
        try:
            yield max(1, before)
        finally:
            put(before)
