"""The export format registry: name → ExportFormat, found through the `gen.exports` entry point group
(gen/plugins.py). gen's own formats (locomo, longmemeval, beir: gen/export/harness/builtin.py) are registered
there exactly as an outside package registers its, in its pyproject.toml:

    [project.entry-points."gen.exports"]
    my_package = "my_package.export:MY_FORMAT"      # an ExportFormat, or a tuple of them

`find` is the one place a format name is looked up: `gen export`, `gen import-predictions` and the Python API
all go through it, so an unknown name is the same single error everywhere, listing every registered name.

A format writes one question config at a time into the export folder being built (`ConfigToWrite` says what
and where); the exporter around it handles the rest: the source dataset, conversation names, the manifest
(gen-export.json) and renaming the finished folder into place. A format that can also read a harness's results
back into gen's predictions has a `ResultsReader`.
"""

from __future__ import annotations

import difflib
import functools
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from gen import plugins
from gen.callers import named
from gen.errors import GenError
from gen.export.harness.questions import ExportQuestion
from gen.export.harness.source import Source
from gen.plugins import EXPORTS


@dataclass(frozen=True)
class ConfigToWrite:
    """One question config to write: everything a format's `write` reads."""

    source: Source  # the dataset: conversations (speakers, sessions, now, responses), run.json, seed
    config: str  # the question config's name: name the file or folder after it
    questions: list[ExportQuestion]  # its questions, in the dataset's order
    folder: Path  # the export folder being built: write inside it only
    names: dict[str, str]  # conversation id → its name in the export (letters, digits, `.` and `-`)


@dataclass
class Written:
    """What a format wrote for one config, for the manifest and the command's summary."""

    config: str
    path: str  # inside the export folder ("<config>.json", or "<config>/" for a folder)
    questions: int
    conversations: int
    folders: dict[str, str] = field(default_factory=dict)  # conversation id → its folder, for a folder per one
    tests: dict[str, str] = field(default_factory=dict)  # question id → its test, for splitting results
    # an id the harness reads under another name (LongMemEval's "_abs") → gen's id, for reading results back
    harness_ids: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls, job: ConfigToWrite, path: str, questions: Sequence[ExportQuestion], conversations: int, **rest: Any
    ) -> Written:
        """The record of `questions` (those the format wrote: every one, or a chosen subset) written at `path`."""
        tests = {question.question_id: question.test for question in questions}
        return cls(job.config, path, len(questions), conversations, tests=tests, **rest)


# A harness's result file (and the export folder it was run on, when the format needs it; `key`: the
# --prediction-key) → (question id, retrieved response indices) pairs, one per question, in the file's order.
ReadResults = Callable[[Path, Path | None, str | None], Iterator[tuple[str, list[int]]]]


@dataclass(frozen=True)
class ResultsReader:
    """How `gen import-predictions --format NAME` reads a harness's results."""

    read: ReadResults
    help: str  # what result file it reads, one line
    needs_export: bool = True  # the results' ids only mean something with the export's gen-export.json
    after: str = ""  # a line printed after a successful import; {output} and {export} are filled in


@dataclass(frozen=True)
class ExportFormat:
    """A layout `gen export --format NAME` writes."""

    name: str
    help: str  # one line: what it writes
    write: Callable[[ConfigToWrite], Written]
    results: ResultsReader | None = None  # None: `gen import-predictions` cannot read this harness's results
    avoid_in_names: str | None = None  # a word the harness reads meaning into: no conversation name holds it


def write_json(path: Path, data: Any) -> None:
    """JSON indented by two spaces, as gen's own formats write a file they build whole."""
    path.write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2))


def write_json_list(path: Path, items: Iterable[dict[str, Any]]) -> None:
    """A JSON list written item by item, so a large export is never held whole in memory."""
    with path.open("wb") as handle:
        handle.write(b"[")
        for position, item in enumerate(items):
            handle.write(b",\n" if position else b"\n")
            handle.write(orjson.dumps(item))
        handle.write(b"\n]\n")


@functools.cache
def registered() -> dict[str, ExportFormat]:
    """Every installed format, in entry point order (gen's first), read once per process."""
    return plugins.registered(
        EXPORTS,
        "export format",
        "a gen.export.harness.formats.ExportFormat, or a tuple of them",
        lambda item: isinstance(item, ExportFormat),
        lambda item: item.name,
    )


def find(name: str, *, reading: bool = False) -> ExportFormat:
    """The format called `name`, or one error naming the nearest registered name and listing them all. With
    `reading` (`gen import-predictions`), only the formats that can read a harness's results back count."""
    formats = {key: item for key, item in registered().items() if item.results is not None or not reading}
    if name in formats:
        return formats[name]
    if name in registered():
        message = f"the export format {name!r} cannot read a harness's results back"
    else:
        near = difflib.get_close_matches(name, formats, n=1)
        message = f"unknown export format {name!r}" + (f"; did you mean {near[0]!r}?" if near else "")
    raise GenError(message, field=named("--format", "format"), expected=f"one of {', '.join(formats)}")
