"""The `gen export` command (registered in gen/cli.py). The exporter is imported inside the function, so
`gen --help` stays fast."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

import typer


class HarnessFormat(StrEnum):
    locomo = "locomo"
    longmemeval = "longmemeval"
    beir = "beir"


def export(
    dataset: Path = typer.Argument(
        ..., metavar="RUN_FOLDER", help="A finished run folder (outputs/<name>) or an export folder (parquet)."
    ),
    format_name: HarnessFormat = typer.Option(
        ..., "--format", help="locomo (locomo10.json samples), longmemeval (instances), or beir (retrieval folders)."
    ),
    output: Path = typer.Option(
        ..., "--output", help="The folder to write (new, empty, or an earlier gen export, which is replaced)."
    ),
    config: str | None = typer.Option(
        None, "--config", help="Export only this question config (default: every question config in the dataset)."
    ),
) -> None:
    """Write a dataset's questions in the layout another evaluation harness reads: one file (or, for beir, one
    folder per conversation) per question config, and gen-export.json saying what is where.

    Questions without a gold answer (every current config) support the harness's retrieval metrics only.

    Example: gen export outputs/quickstart --format locomo --output exports/quickstart-locomo
    """
    from gen.export.harness.exporter import export as write_export
    from gen.export.harness.folder import MANIFEST

    written = write_export(dataset, format_name.value, output, config)
    for item in written:
        typer.echo(
            f"{item.config}: {item.questions:,} questions over {item.conversations:,} conversations "
            f"→ {output / item.path}",
            err=True,
        )
    typer.echo(f"wrote {output} ({MANIFEST} describes it)", err=True)
