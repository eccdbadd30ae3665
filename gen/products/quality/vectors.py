"""Sentence vectors for the quality labels: the bundled all-MiniLM-L6-v2 (mean-pooled, unit length), loaded once
per process. The labels and their validator each encode what they need, so the validator's is a fresh pass."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

EMBEDDER = "all-MiniLM-L6-v2 (mean-pooled, unit length)"


@lru_cache(maxsize=1)
def model() -> Any:
    from gen.embedding import MiniLM, model_folder  # the eval extra and the model package, only when labelling

    return MiniLM(model_folder())


def encode(texts: Sequence[str]) -> np.ndarray:
    import numpy as np  # only when labelling: every other run (and every Ray worker) is spared its memory

    if not texts:
        return np.zeros((0, 384), dtype=np.float32)
    return model().encode(list(texts))
