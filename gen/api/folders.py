"""Reading a finished run folder from Python: its summary table and its configs as datasets."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gen import reading
from gen.api.calls import api_call
from gen.errors import GenError

if TYPE_CHECKING:
    import pandas as pd
    from datasets import DatasetDict


@api_call()
def summary(run_folder: str | Path) -> pd.DataFrame:
    """One row per config of a run folder: its product, records, whether its product's validation passed, and
    the config's description (from run.json)."""
    import pandas as pd

    report = read_report(Path(run_folder))
    validation = report.get("validation", {})
    rows = [
        {
            "config": name,
            "product": info.get("product"),
            "records": info.get("records"),
            "validation_passed": (validation.get(info.get("product"), {}) or {}).get("passed"),
            "questions": "questions" in info,
            "description": info.get("description", ""),
        }
        for name, info in report["configs"].items()
    ]
    return pd.DataFrame(rows)


def read_report(folder: Path) -> dict:
    path = folder / "run.json"
    try:
        report = reading.read_json(path, "run.json written by gen run")
        report["configs"].items()
    except (OSError, ValueError, KeyError, AttributeError, TypeError) as exc:
        raise GenError(
            f"not a run folder ({type(exc).__name__})", file=path, expected="run.json written by gen run"
        ) from None
    return report


@api_call()
def load(run_folder: str | Path) -> DatasetDict:
    """A finished run folder (or an export folder) as a `datasets.DatasetDict`, one Dataset per config, each with
    the features its product declares: what `datasets.load_dataset(folder, config)` gives, for every config."""
    from datasets import DatasetDict, load_dataset

    from gen.eval.dataset import finished_report

    folder = Path(run_folder)
    report = finished_report(folder, "loaded")
    split = report.get("split", "test")
    return DatasetDict({name: load_dataset(str(folder), name, split=split) for name in report["configs"]})
