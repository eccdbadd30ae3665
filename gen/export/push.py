"""The `gen push` command (registered in gen/cli.py). Heavy imports happen inside the function."""

from __future__ import annotations

import re
from pathlib import Path

import typer


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
    from pydantic import ValidationError

    from gen.errors import GenError
    from gen.export.hub import push as push_run
    from gen.export.hub import recipe_target
    from gen.export.spec import HubTarget

    try:
        defaults = recipe_target(output_dir)
    except GenError:
        if repo_id is None:
            raise
        defaults = None  # an explicit --repo-id does not need the recipe's export section
    settings = defaults.model_dump() if defaults else {}
    if repo_id is None and defaults is None:
        if not dry_run:
            raise GenError(
                "say where to push: --repo-id owner/name (or export.hub.repo_id in the recipe)", field="--repo-id"
            )
        # nothing is sent: a stand-in owner lets the card and the file list be shown
        repo_id = "me/" + (re.sub(r"[^A-Za-z0-9._-]+", "-", output_dir.resolve().name).strip("-.") or "dataset")
        typer.echo(f"dry run without --repo-id: showing the export as it would be for {repo_id}", err=True)
    overrides = {"repo_id": repo_id, "private": private, "revision": revision, "max_shard_size": max_shard_size}
    settings.update({key: value for key, value in overrides.items() if value is not None})
    settings["create_pr"] = create_pr or settings.get("create_pr", False)
    settings["personal_data_ok"] = personal_data_ok or settings.get("personal_data_ok", False)
    try:
        target = HubTarget.model_validate(settings)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "options"
        raise GenError(f"{first['msg']}, got {first.get('input')!r}", field=f"--{where.replace('_', '-')}") from None
    push_run(
        output_dir,
        target,
        dry_run=dry_run,
        export_dir=export_dir,
        message=message,
        out=typer.echo,
    )
