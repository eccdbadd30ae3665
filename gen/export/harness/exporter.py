"""One export: the dataset's question configs, each written in the chosen format, and the manifest."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from gen import progress
from gen.eval.dataset import GoldAnswers
from gen.export.harness import beir, locomo, longmemeval
from gen.export.harness.names import safe_names
from gen.export.harness.questions import one_per_group, read_questions
from gen.export.harness.source import Source, open_source
from gen.export.harness.staging import OutputFolder
from gen.write_guard import refuse_writing_into

FORMATS = ("locomo", "longmemeval", "beir")


@dataclass
class Written:
    config: str
    path: str  # inside the export folder
    questions: int
    conversations: int
    folders: dict[str, str] = field(default_factory=dict)  # beir: conversation id → its folder
    tests: dict[str, str] = field(default_factory=dict)  # question id → its test, for splitting results


def export(dataset: Path, format_name: str, output: Path, config: str | None = None) -> list[Written]:
    refuse_writing_into({"--output": output}, {"DATASET": dataset})
    source = open_source(dataset)
    configs = source.question_configs(config)
    # LongMemEval reads "answer" in an id as evidence: its conversation names must not hold the word
    names = safe_names(list(source.conversations), avoid=longmemeval.EVIDENCE if format_name == "longmemeval" else None)
    with OutputFolder(output) as out, progress.task(f"exporting for {format_name}", len(configs), "configs") as bar:
        written = []
        for name in configs:
            written.append(write_config(format_name, source, name, out.path, names))
            bar.advance()
        out.write_manifest(manifest(format_name, source, written, names))
    return written


def write_config(format_name: str, source: Source, config: str, folder: Path, names: dict[str, str]) -> Written:
    questions = read_questions(source, config)
    conversations = source.conversations
    asked = len({question.conversation_id for question in questions})
    if format_name == "locomo":
        data = locomo.samples(conversations, questions, names)
        (folder / f"{config}.json").write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))
        written = Written(config, f"{config}.json", len(questions), len(data))
    elif format_name == "longmemeval":
        questions = one_per_group(questions, source.seed)
        write_json_list(folder / f"{config}.json", longmemeval.instances(conversations, questions, names))
        written = Written(config, f"{config}.json", len(questions), asked)
    else:
        folders = beir.write_collections(folder / config, conversations, questions, names)
        written = Written(config, f"{config}/", len(questions), len(folders), folders)
    written.tests = {question.question_id: question.test for question in questions}
    return written


def write_json_list(path: Path, items: Iterable[dict[str, Any]]) -> None:
    """A JSON list written item by item, so a large export is never held whole in memory."""
    with path.open("wb") as handle:
        handle.write(b"[")
        for position, item in enumerate(items):
            handle.write(b",\n" if position else b"\n")
            handle.write(orjson.dumps(item))
        handle.write(b"\n]\n")


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
