"""The recipe's `export:` section. `export: {hub: {repo_id: me/name}}` pushes the run at the end of `gen run`.

Imported by gen/recipe.py, so it must not import gen.recipe (circular) or anything heavy.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from gen.validation import InputModel

REPO_ID = r"^[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$"
DEFAULT_MAX_SHARD_SIZE = "500MB"  # the same default as datasets' push_to_hub
GENERATED_KEYS = ("configs", "dataset_info")  # card metadata gen must own, or the data would not load
UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30}


def parse_size(value: str | int) -> int:
    """'500MB' → 500_000_000 (kB/MB/GB decimal, KiB/MiB/GiB binary, or a plain number of bytes)."""
    number: float
    if isinstance(value, int) and not isinstance(value, bool):
        number, unit = value, ""
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(value))
        if not match or match.group(2).lower() not in UNITS:
            raise ValueError(f"not a size: {value!r} (expected e.g. 500MB, 64MiB or a number of bytes)")
        number, unit = float(match.group(1)), match.group(2).lower()
    size = int(number * UNITS[unit])
    if size < 1:
        raise ValueError(f"a shard size must be at least 1 byte, got {value!r}")
    return size


class HubTarget(InputModel):
    """Where and how `gen push` (or `gen run` with this section) publishes. The token is never part of it."""

    repo_id: str = Field(pattern=REPO_ID, description="owner/name of the dataset repo on the Hub")
    private: bool = Field(
        default=True, description="visibility when the repo is created (an existing repo keeps its own)"
    )
    revision: str | None = Field(default=None, description="branch to commit to (created from main when missing)")
    create_pr: bool = Field(default=False, description="open a pull request instead of committing to the branch")
    commit_message: str | None = None
    max_shard_size: str = Field(default=DEFAULT_MAX_SHARD_SIZE, description="split a config's parquet above this size")
    card: dict[str, Any] = Field(
        default={}, description="extra card metadata (tags, language, license of your own data...)"
    )
    personal_data_ok: bool = Field(
        default=False,
        description="upload a run made from people's own logs (gen push --personal-data-ok); the card records it",
    )

    @model_validator(mode="before")
    @classmethod
    def no_token(cls, data: Any) -> Any:
        if isinstance(data, dict) and any("token" in str(key).lower() for key in data):
            raise ValueError("a recipe never holds a Hub token; set HF_TOKEN or run `hf auth login`")
        return data

    @field_validator("max_shard_size")
    @classmethod
    def size(cls, value: str) -> str:
        parse_size(value)
        return value

    @field_validator("card")
    @classmethod
    def card_keys(cls, value: dict[str, Any]) -> dict[str, Any]:
        if owned := [key for key in GENERATED_KEYS if key in value]:
            raise ValueError(f"card metadata {', '.join(owned)} is written by gen from the data files; remove it")
        return value


class ExportSpec(InputModel):
    hub: HubTarget | None = None
