"""`gen push`, `gen export` and `gen import-predictions` (registered in gen/cli/main.py): publishing a run
folder, writing its questions for another harness, and reading that harness's results back, each a thin layer
over its function in gen/api/publishing.py."""

from __future__ import annotations

from pathlib import Path

import typer

from gen.cli.options import DATASET_HELP, REVISION


def push(
    output_dir: Path = typer.Argument(..., help="The run folder `gen run` wrote (outputs/<name>)."),
    repo_id: str | None = typer.Option(
        None,
        "--repo-id",
        help="owner/name of the dataset repo (default: export.hub.repo_id of the run's recipe; for --dry-run, "
        "me/<folder name>).",
    ),
    private: bool | None = typer.Option(
        None,
        "--private/--public",
        help="Visibility when the repo is created (default private). An existing public repo needs --public.",
    ),
    revision: str | None = typer.Option(
        None, "--revision", help="Branch to commit to (default main; created from main if missing)."
    ),
    create_pr: bool = typer.Option(False, "--create-pr", help="Open a pull request instead of committing."),
    message: str | None = typer.Option(None, "--message", "-m", help="Commit message."),
    max_shard_size: str | None = typer.Option(
        None, "--max-shard-size", help="Split a config's parquet data above this size (default 500MB)."
    ),
    export_dir: Path | None = typer.Option(
        None, "--export-dir", help="Keep the export folder here (to look at it, or load it offline with datasets)."
    ),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Build the export and print the target, the files and the card; send nothing."
    ),
    personal_data_ok: bool = typer.Option(
        False,
        "--personal-data-ok",
        help="Upload a run made from people's own logs (chat_logs sources, or sources marked personal: true); "
        "without it such a push is refused. The card records it.",
    ),
) -> None:
    """Publish a run folder to the Hugging Face Hub in one commit: parquet per config with explicit features,
    the dataset card, the recipe and the run report.

    The token comes from HF_TOKEN or `hf auth login` and is never printed or written.

    Example: gen push outputs/quickstart --repo-id me/quickstart --dry-run
    """
    import gen

    options = gen.PushOptions(
        repo_id=repo_id,
        private=private,
        revision=revision,
        create_pr=create_pr,
        message=message,
        max_shard_size=max_shard_size,
        export_dir=export_dir,
        dry_run=dry_run,
        personal_data_ok=personal_data_ok,
    )
    gen.push(output_dir, options, out=typer.echo, note=lambda line: typer.echo(line, err=True))


# The format names are checked by the format registry (gen/export/harness/formats.py), not here: plugins add
# formats, and reading their entry points at every start of `gen` would slow down `gen --help`.
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
    import gen
    from gen.export.harness.staging import MANIFEST

    written = gen.export_harness(dataset, format_name, output, gen.ExportOptions(config=config, revision=revision))
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
    import gen

    imported = gen.import_predictions(
        results, format_name, output, export_folder=export_folder, prediction_key=prediction_key
    )
    typer.echo(f"wrote {imported.predictions:,} predictions to {output}", err=True)
    if imported.next_step:
        typer.echo(imported.next_step, err=True)
