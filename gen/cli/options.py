"""Command-line options shared by several commands: the dataset a scoring or export command reads, and for the
commands that call an LLM (`gen run`, `gen judge`, `gen plan`...) where the cache is and how fast calls may go
(they change no data and enter no hash), with the allowed range of every number the command line takes."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gen.errors import GenError

if TYPE_CHECKING:
    from gen.llm.config import RunSettings

# the argument and option of the commands that read a finished dataset (gen/hub_dataset.py)
DATASET_HELP = "A run folder (outputs/<name>), an export folder, or a dataset id on the Hugging Face Hub (me/name)."
REVISION = typer.Option(
    None, "--revision", help="With a Hub dataset id: the branch, tag or commit to read (default: main)."
)
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
# The allowed range of every number the command line takes. Absurd values are refused by the parser (exit 2,
# naming the option and its range) before any work starts (NaN too: it is in no range).
# --max-concurrency is the endpoints' own bound (EndpointConfig.max_concurrency); the others bound fan-out
# (--workers, --request-processes: a process each) or are far above any real use.
# An option that sets a field of gen.RunOptions, RunSettings or RateLimits has that field's range, so a Python
# caller is refused the same values (gen/validation.py's OptionsModel); written out here rather than read from
# the models so that `gen -h` imports none of them (tests/test_cli_usage.py holds the two equal).
RANGES: dict[str, tuple[float, float]] = {
    "--limit": (0, 1_000_000_000),
    "--index": (0, 1_000_000_000),
    "--k": (1, 100_000),
    "--workers": (1, 256),
    "--request-processes": (0, 64),  # gen.llm.config.MAX_REQUEST_PROCESSES
    "--max-concurrency": (1, 1024),
    "--requests-per-minute": (0.001, 1e9),
    "--tokens-per-minute": (1, 1e12),
    "--port": (0, 65535),
}


def number(default, name: str, help: str):
    """A typer option for the number `name`, limited to its range in RANGES."""
    low, high = RANGES[name]
    if isinstance(low, float) or isinstance(high, float):
        return typer.Option(default, name, min=low, max=high, help=help)
    return typer.Option(default, name, min=int(low), max=int(high), help=help)


MAX_CONCURRENCY = number(None, "--max-concurrency", help="Override the endpoints' max_concurrency.")
REQUESTS_PER_MINUTE = number(None, "--requests-per-minute", help="Override the endpoints' requests_per_minute.")
TOKENS_PER_MINUTE = number(None, "--tokens-per-minute", help="Override the endpoints' tokens_per_minute.")
REQUEST_PROCESSES = number(
    0,
    "--request-processes",
    help="Send the LLM requests from N worker processes (the openai client's work per request leaves this process; "
    "limits, retries and the cache stay in it; same output; never more processes than requests may be in flight "
    "at once). Default 0: from this process.",
)


def run_settings(
    offline: bool,
    cache_dir: Path | None,
    max_concurrency: int | None,
    requests_per_minute: float | None,
    tokens_per_minute: float | None,
) -> RunSettings:
    """The run-only LLM settings of these options (their ranges checked by the parser: RANGES)."""
    from gen.llm.config import RateLimits, RunSettings

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
