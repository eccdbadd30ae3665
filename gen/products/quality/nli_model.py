"""R1 from a local sequence-classification model (the `nli` extra: transformers and torch): each persona fact as
the premise, the reply as the hypothesis, the softmax over the model's three classes, mapped to entailment /
contradiction / neutral by the class names in the model's own config (docs/quality.md)."""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from gen.about import install_hint
from gen.errors import GenError
from gen.products.quality.signals import LABELS

BATCH = 32
PACKAGES = ("transformers", "torch")


def require(folder: str, where: str) -> Path:
    """The model folder, once its packages and files are known to be there (checked when the recipe loads)."""
    missing = [name for name in PACKAGES if importlib.util.find_spec(name) is None]
    if missing:
        raise GenError(
            f"nli_model needs {' and '.join(missing)}, which {'are' if len(missing) > 1 else 'is'} not installed",
            field=f"{where}.nli_model",
            expected=install_hint("nli"),
        )
    path = Path(folder).expanduser()
    if not (path / "config.json").is_file():
        raise GenError(
            "no model here",
            file=path,
            field=f"{where}.nli_model",
            expected="a folder with config.json, weights and tokenizer",
        )
    return path


def label_columns(id2label: dict[Any, str], path: Path) -> dict[str, int]:
    """label -> the model's output column, from its class names ("ENTAILMENT", "contradiction", "LABEL_0" refused)."""
    columns: dict[str, int] = {}
    for index, name in id2label.items():
        found = [label for label in LABELS if label[:6] in str(name).lower()]  # "entail", "contra", "neutra"
        if len(found) == 1 and found[0] not in columns:
            columns[found[0]] = int(index)
    if sorted(columns) != sorted(LABELS) or len(id2label) != len(LABELS):
        raise GenError(
            f"the model's classes {sorted(map(str, id2label.values()))} are not entailment, contradiction and neutral",
            file=path / "config.json",
            field="id2label",
            expected="a three-way NLI model whose id2label names the three classes",
        )
    return columns


class NLIModel:
    def __init__(self, path: Path) -> None:
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.path = path
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.model = AutoModelForSequenceClassification.from_pretrained(path).eval()
        self.columns = label_columns(self.model.config.id2label, path)

    def probabilities(self, pairs: Sequence[tuple[str, str]]) -> list[dict[str, float]]:
        """P(label) for each (premise, hypothesis), in order."""
        import torch

        found: list[dict[str, float]] = []
        for start in range(0, len(pairs), BATCH):
            chunk = pairs[start : start + BATCH]
            encoded = self.tokenizer(
                [p for p, _ in chunk], [h for _, h in chunk], padding=True, truncation=True, return_tensors="pt"
            )
            with torch.no_grad():
                rows = torch.softmax(self.model(**encoded).logits.float(), dim=-1).tolist()
            found += [{label: row[column] for label, column in self.columns.items()} for row in rows]
        return found


@lru_cache(maxsize=2)
def load(folder: str) -> NLIModel:
    return NLIModel(Path(folder).expanduser())
