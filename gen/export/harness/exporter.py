"""One export: the dataset's question configs, each written in the chosen format, and the manifest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gen import progress
from gen.callers import named
from gen.eval.dataset import GoldAnswers
from gen.export.harness.formats import ConfigToWrite, ExportFormat, Written, find
from gen.export.harness.names import safe_names
from gen.export.harness.questions import read_questions
from gen.export.harness.source import Source, open_source
from gen.export.harness.staging import OutputFolder
from gen.write_guard import refuse_writing_into


def export(dataset: Path, format_name: str, output: Path, config: str | None = None) -> list[Written]:
    """Every question config of the dataset (or only `config`) written by the format named `format_name`, into
    a folder built beside `output` and renamed into place with its manifest."""
    chosen = find(format_name)
    refuse_writing_into(
        {named("--output", "output"): output},
        {named("DATASET", "dataset"): dataset},
    )
    source = open_source(dataset)
    configs = source.question_configs(config)
    names = safe_names(list(source.conversations), avoid=chosen.avoid_in_names)
    with OutputFolder(output) as out, progress.task(f"exporting for {chosen.name}", len(configs), "configs") as bar:
        written = []
        for name in configs:
            written.append(write_config(chosen, source, name, out.path, names))
            bar.advance()
        out.write_manifest(manifest(chosen.name, source, written, names))
    return written


def write_config(chosen: ExportFormat, source: Source, config: str, folder: Path, names: dict[str, str]) -> Written:
    return chosen.write(ConfigToWrite(source, config, read_questions(source, config), folder, names))


def manifest(format_name: str, source: Source, written: list[Written], names: dict[str, str]) -> dict[str, Any]:
    """What the folder holds and where it came from (no path of this machine: the recipe's name, not its file),
    and what maps a harness's results back: each conversation's name in the export with the response index
    that starts each of its sessions, and each exported question's test."""
    recipe = source.report.get("recipe") or {}
    return {
        "format": format_name,
        "dataset": {
            "recipe": recipe.get("name"),
            "fingerprint": recipe.get("fingerprint"),
            "seed": source.seed,
            "gen": (source.report.get("packages") or {}).get("gen"),
        },
        "configs": {
            item.config: {
                "path": item.path,
                "questions": item.questions,
                "conversations": item.conversations,
                "gold_answer": GoldAnswers(source.dataset, item.config).where(),
                **({"folders": item.folders} if item.folders else {}),
                "tests": item.tests,
                **({"harness_ids": item.harness_ids} if item.harness_ids else {}),
            }
            for item in written
        },
        "conversations": {
            names[conversation_id]: {
                "conversation_id": conversation_id,
                "session_starts": session_starts(conversation.places),
                "responses": len(conversation.responses),
            }
            for conversation_id, conversation in source.conversations.items()
        },
    }


def session_starts(places: list[tuple[int, int]]) -> list[int]:
    """The response_index of each session's first response (session 1 first)."""
    return [index for index, (_, position) in enumerate(places) if position == 0]
