"""Exact match and token F1 of a written answer against a gold one, as LoCoMo's QA scorer computes them
(task_eval/evaluation.py: `normalize_answer` and `f1_score`, the path its temporal category takes).

Normalisation: commas dropped, lower case, punctuation removed, the words a, an, the and and removed, runs of
blank space made one. F1 compares the normalised words after Porter stemming (nltk's PorterStemmer, the stemmer
LoCoMo's code uses, so "days" and "day" are one token), counting repeats. Exact match is the normalised texts
being equal. Both live here alone, so every score gen prints for a written answer follows the same rules; the
tests check them against LoCoMo's own code.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from functools import lru_cache
from typing import Any

ARTICLES = re.compile(r"\b(a|an|the|and)\b")
PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalise(text: str) -> str:
    text = text.replace(",", "").lower().translate(PUNCTUATION)
    return " ".join(ARTICLES.sub(" ", text).split())


@lru_cache(maxsize=1)
def stemmer() -> Any:
    from nltk.stem import PorterStemmer  # loaded once, by the first answer scored

    return PorterStemmer()


def tokens(text: str) -> list[str]:
    stem = stemmer().stem
    return [stem(word) for word in normalise(text).split()]


def exact_match(prediction: str, gold: str) -> float:
    return 1.0 if normalise(prediction) == normalise(gold) else 0.0


def token_f1(prediction: str, gold: str) -> float:
    predicted, wanted = tokens(prediction), tokens(gold)
    same = sum((Counter(predicted) & Counter(wanted)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(wanted)
    return 2 * precision * recall / (precision + recall)
