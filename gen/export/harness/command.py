"""The `gen export` command (registered in gen/cli.py). The exporter is imported inside the function, so
`gen --help` stays fast."""

from __future__ import annotations

from pathlib import Path

import typer

from gen.hub_dataset import DATASET_HELP, REVISION


# The names are checked by the format registry (gen/export/harness/formats.py), not here: plugins add formats,
# and reading their entry points at every start of `gen` would slow down `gen --help`.
def export(
    dataset: Path = typer.Argument(..., metavar="DATASET", help=DATASET_HELP),
    revision: str | None = REVISION,
    format_name: str = typer.Option(
        ...,
        "--format",
        help="locomo (locomo10.json samples), longmemeval (instances), beir (retrieval folders), or a format an "
        "installed plugin adds.",
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
    from gen.export.harness.staging import MANIFEST
    from gen.hub_dataset import dataset_folder

    written = write_export(dataset_folder(dataset, revision), format_name, output, config)
    for item in written:
        typer.echo(
            f"{item.config}: {item.questions:,} questions over {item.conversations:,} conversations "
            f"→ {output / item.path}",
            err=True,
        )
    typer.echo(f"wrote {output} ({MANIFEST} describes it)", err=True)


def import_predictions(
    results: Path = typer.Argument(..., metavar="RESULTS", help="The result file the harness's own code wrote."),
    format_name: str = typer.Option(
        ...,
        "--format",
        help="longmemeval (run_retrieval.py's retrieval log), locomo (the QA evaluation's output with RAG), "
        "beir (a run dict as JSON, or a TREC run file), or a format an installed plugin adds.",
    ),
    export_folder: Path | None = typer.Option(
        None, "--export", help="The gen export folder the harness read (needed for locomo and longmemeval)."
    ),
    output: Path = typer.Option(..., "--output", help="The predictions file to write (JSONL, as gen eval reads)."),
    prediction_key: str | None = typer.Option(
        None, "--prediction-key", help="locomo: the key the evaluation wrote (default: the one `*_context` key)."
    ),
) -> None:
    """Read a harness's results on a gen export back into gen's predictions, for `gen eval`'s per-test table.

    Example: gen import-predictions retrievallog --format longmemeval --export exports/lme --output preds.jsonl
    """
    from gen.export.harness.results import import_results
    from gen.jsonl import encode_lines, replace_file
    from gen.write_guard import refuse_writing_into

    refuse_writing_into({"--output": output}, {"RESULTS": results, "--export": export_folder})
    lines, reader = import_results(results, format_name, export_folder, prediction_key)
    replace_file(output, encode_lines(lines), "predictions")
    typer.echo(f"wrote {len(lines):,} predictions to {output}", err=True)
    if reader.after:
        typer.echo(reader.after.format(output=output, export=export_folder), err=True)
