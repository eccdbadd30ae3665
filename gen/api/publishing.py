"""Publishing and exchanging a finished dataset: push a run folder to the Hub (`gen push`), write its questions in
a harness's layout (`gen export`), and read a harness's results back as predictions (`gen import-predictions`)."""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from gen.api.calls import CallOptions, api_call
from gen.callers import named
from gen.errors import GenError

if TYPE_CHECKING:
    from gen.export.harness.formats import Written
    from gen.export.spec import HubTarget


def say(line: str) -> None:
    print(line, file=sys.stderr)


class PushOptions(CallOptions):
    """Where and how `push` publishes; None takes the run's recipe's `export.hub` setting, else the default.
    `progress`: this call's displays."""

    repo_id: str | None = None
    private: bool | None = None
    revision: str | None = None
    create_pr: bool = False
    message: str | None = None
    max_shard_size: str | None = None
    export_dir: Path | None = None
    dry_run: bool = False
    personal_data_ok: bool = False


@api_call(PushOptions)
def push(
    run_folder: str | Path,
    options: PushOptions | None = None,
    out: Callable[[str], None] = print,
    note: Callable[[str], None] = say,
) -> None:
    """Publish a run folder to the Hugging Face Hub in one commit (`gen push`): parquet per config, the card, the
    recipe and the run report; with `dry_run`, build the export and show it through `out`, sending nothing
    (`note`, stderr by default, says what a dry run stood in). The token (HF_TOKEN or `hf auth login`) is never
    printed or written."""
    from gen.export.hub import push as push_run

    chosen = options if options is not None else PushOptions()
    folder = Path(run_folder)
    target = hub_target(folder, chosen, note)
    push_run(folder, target, dry_run=chosen.dry_run, export_dir=chosen.export_dir, message=chosen.message, out=out)


def hub_target(folder: Path, options: PushOptions, out: Callable[[str], None]) -> HubTarget:
    """The recipe's `export.hub` settings with the options given over them, checked."""
    from pydantic import ValidationError

    from gen.export.hub import recipe_target
    from gen.export.spec import HubTarget

    repo_id = options.repo_id
    try:
        defaults = recipe_target(folder)
    except GenError:
        if repo_id is None:
            raise
        defaults = None  # an explicit repo_id does not need the recipe's export section
    settings = defaults.model_dump() if defaults else {}
    if repo_id is None and defaults is None:
        if not options.dry_run:
            where = named("--repo-id", "PushOptions.repo_id")
            raise GenError(f"say where to push: {where} owner/name (or export.hub.repo_id in the recipe)", field=where)
        # nothing is sent: a stand-in owner lets the card and the file list be shown
        repo_id = "me/" + (re.sub(r"[^A-Za-z0-9._-]+", "-", folder.resolve().name).strip("-.") or "dataset")
        unnamed = named("--repo-id", "PushOptions.repo_id")
        out(f"dry run without {unnamed}: showing the export as it would be for {repo_id}")
    overrides = {
        "repo_id": repo_id,
        "private": options.private,
        "revision": options.revision,
        "max_shard_size": options.max_shard_size,
    }
    settings.update({key: value for key, value in overrides.items() if value is not None})
    settings["create_pr"] = options.create_pr or settings.get("create_pr", False)
    settings["personal_data_ok"] = options.personal_data_ok or settings.get("personal_data_ok", False)
    try:
        return HubTarget.model_validate(settings)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "options"
        field = named(f"--{where.replace('_', '-')}", f"PushOptions.{where}")
        raise GenError(f"{first['msg']}, got {first.get('input')!r}", field=field) from None


class ExportOptions(CallOptions):
    """Which of a dataset's question configs `export_harness` writes (`config`, default every one the format
    takes), the revision of a Hub dataset to read, and `progress`: this call's displays."""

    config: str | None = None
    revision: str | None = None


@api_call(ExportOptions)
def export_harness(
    dataset: str | Path, format: str, output: str | Path, options: ExportOptions | None = None
) -> list[Written]:
    """Write a dataset's questions in a harness's layout (`gen export`): locomo, longmemeval, beir, or an
    installed plugin's format; returns what was written per config (gen-export.json in `output` says it too).
    `dataset`: a run or export folder, or a Hub dataset (`hf:owner/name`, at `revision`)."""
    from gen.export.harness.exporter import export as write_export
    from gen.hub_dataset import dataset_folder

    chosen = options if options is not None else ExportOptions()
    return write_export(dataset_folder(dataset, chosen.revision), format, Path(output), chosen.config)


@dataclass(frozen=True)
class Imported:
    """What import_predictions wrote: how many prediction lines, and the format's hint of what to do next."""

    predictions: int
    next_step: str | None


@api_call()
def import_predictions(
    results: str | Path,
    format: str,
    output: str | Path,
    *,
    export_folder: str | Path | None = None,
    prediction_key: str | None = None,
) -> Imported:
    """Read a harness's results on a gen export back into gen's predictions file (`gen import-predictions`)."""
    from gen.export.harness.results import import_results
    from gen.jsonl import encode_lines, replace_file
    from gen.write_guard import refuse_writing_into

    source, written = Path(results), Path(output)
    export = Path(export_folder) if export_folder is not None else None
    writes = {named("--output", "import_predictions(output=...)"): written}
    reads = {named("RESULTS", "import_predictions(results=...)"): source}
    refuse_writing_into(writes, reads | {named("--export", "import_predictions(export_folder=...)"): export})
    lines, reader = import_results(source, format, export, prediction_key)
    replace_file(written, encode_lines(lines), "predictions")
    hint = reader.after.format(output=written, export=export) if reader.after else None
    return Imported(len(lines), hint)
