"""Command-line options shared by the commands that call an LLM (`gen run`, `gen judge`, `gen plan`...): where
the cache is and how fast calls may go. They change no data and enter no hash."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gen.errors import GenError

if TYPE_CHECKING:
    from gen.llm.config import RunSettings

SOURCE_DIR = typer.Option(
    None,
    "--source-dir",
    help="Where to find inputs the recipe names by file name alone (as a run folder's recipe.yaml does); "
    "looked in before the recipe's folder and the bundled sample.",
)
CACHE_DIR = typer.Option(
    None, "--cache-dir", help="Folder of the LLM cache llm.sqlite (default: $GEN_CACHE_DIR, else ~/.cache/gen)."
)
OFFLINE = typer.Option(
    False, "--offline", help="Fail on the first LLM call that is not already cached (reproducible CI)."
)
MAX_CONCURRENCY = typer.Option(None, "--max-concurrency", min=1, help="Override the endpoints' max_concurrency.")
REQUESTS_PER_MINUTE = typer.Option(
    None, "--requests-per-minute", min=0.001, help="Override the endpoints' requests_per_minute."
)
TOKENS_PER_MINUTE = typer.Option(None, "--tokens-per-minute", min=1, help="Override the endpoints' tokens_per_minute.")
REQUEST_PROCESSES = typer.Option(
    0,
    "--request-processes",
    min=0,
    max=64,  # gen.llm.config.MAX_REQUEST_PROCESSES (not imported here: the CLI's options load before the engine)
    help="Send the LLM requests from N worker processes (the openai client's work per request leaves this process; "
    "limits, retries and the cache stay in it; same output). Default 0: from this process.",
)


def run_settings(
    offline: bool,
    cache_dir: Path | None,
    max_concurrency: int | None,
    requests_per_minute: float | None,
    tokens_per_minute: float | None,
) -> RunSettings:
    """The run-only LLM settings of these options. The parser takes `inf` for a number; a limit must be a real
    one (as in the recipe's llm: section)."""
    from gen.llm.config import RateLimits, RunSettings

    for name, value in {"--requests-per-minute": requests_per_minute, "--tokens-per-minute": tokens_per_minute}.items():
        if value is not None and not math.isfinite(value):
            raise GenError(f"{value} is not a usable limit", field=name, expected="a finite number")
    limits = RateLimits(
        max_concurrency=max_concurrency, requests_per_minute=requests_per_minute, tokens_per_minute=tokens_per_minute
    )
    return RunSettings(limits=limits, offline=offline, cache_dir=cache_dir)


def import_files(given: list[Path]) -> tuple[Path, ...]:
    """--batch-import's files: each file given, and every .jsonl of each folder given."""
    files: list[Path] = []
    for path in given:
        if path.is_dir():
            files += sorted(path.glob("*.jsonl"))
        elif path.is_file():
            files.append(path)
        else:
            raise GenError("no such file or folder", file=path, field="--batch-import", expected="a batch output file")
    return tuple(files)
