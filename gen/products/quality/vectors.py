"""Sentence vectors for the quality labels: the bundled all-MiniLM-L6-v2 (mean-pooled, unit length), loaded once
per process.

Every vector the labels and their validator use comes from `encode`, the one place texts meet the encoder. It
encodes each distinct text once, in batches sorted by length across everything asked at once, and keeps the
last MEMO_SIZE vectors by text: the runner validates a batch of conversations right after building it, so the
validator reuses the vectors the labelling computed (looked up by text, not by position) and recomputes every
cosine, memory ranking and reward from them by its own formulas. A text that has left the memo is encoded
again, which gives the same vector to float32 rounding."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np

EMBEDDER = "all-MiniLM-L6-v2 (mean-pooled, unit length)"
MEMO_SIZE = 32_768  # vectors kept (384 float32 each: about 50 MB), more than a batch of LoCoMo-sized conversations
DIMENSION = 384


@lru_cache(maxsize=1)
def model() -> Any:
    from gen.embedding import MiniLM, model_folder  # the eval extra and the model package, only when labelling

    return MiniLM(model_folder())


_memo: OrderedDict[str, Any] = OrderedDict()
_owner: list[type] = []  # the kind of encoder the kept vectors come from


def encode(texts: Sequence[str]) -> np.ndarray:
    """One unit vector per text (rows in the order given)."""
    import numpy as np  # only when labelling: every other run (and every Ray worker) is spared its memory

    encoder = model()
    if _owner != [type(encoder)]:  # another encoder (a test's stand-in): its vectors are not these
        _memo.clear()
        _owner[:] = [type(encoder)]
    new = [text for text in dict.fromkeys(texts) if text not in _memo]
    found = dict(zip(new, encoder.encode(new))) if new else {}
    for text in dict.fromkeys(texts):
        vector = found.get(text)
        if vector is None:
            _memo.move_to_end(text)
        else:
            _memo[text] = vector
    rows = [found[text] if text in found else _memo[text] for text in texts]
    while len(_memo) > MEMO_SIZE:
        _memo.popitem(last=False)
    if not rows:
        return np.zeros((0, getattr(encoder, "dimension", DIMENSION)), dtype=np.float32)
    return np.stack(rows)
