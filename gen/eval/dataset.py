"""A finished dataset as the scorer sees it, from either folder layout gen writes:

    run folder      run.json, <config>/<split>.jsonl                  (`gen run`)
    export folder   README.md, run.json, data/<config>/*.parquet       (`gen push`, or a download from the Hub)

Only the records are read; which configs hold questions, and the field their scores are grouped by, is a fixed
table here (checked against the products' own declarations by the tests), so no product code is imported.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path
from typing import Any

import orjson

from gen import reading
from gen.errors import GenError

DATASET_EXPECTED = "a run folder (run.json and <config>/<split>.jsonl) or an export folder (data/<config>/*.parquet)"


@dataclass(frozen=True)
class Located:
    """A record and where it came from, so a bad field can be named with its file and line or row."""

    record: dict[str, Any]
    file: Path
    place: str  # "line 12" (JSONL) or "row 12" (parquet)


@dataclass
class Question:
    question_id: str
    conversation_id: str
    group: str
    relevant: list[int]
    item: Located  # the whole record, and where it is


@dataclass
class Dataset:
    folder: Path
    layout: str  # "run" or "export"
    files: dict[str, list[Path]]  # config → its data files
    # config of questions → what its product declared in run.json: group_field, answer_field, asked_by_speaker_a
    declared: dict[str, dict[str, Any]]

    @property
    def question_configs(self) -> list[str]:
        return [name for name in self.declared if name in self.files]

    def records(self, config: str) -> Iterator[Located]:
        if config not in self.files:
            raise GenError(f"the dataset has no {config} config", file=self.folder, expected=DATASET_EXPECTED)
        for path in self.files[config]:
            if path.suffix == ".parquet":
                yield from parquet_records(path)
            else:
                for number, record in numbered_jsonl(path):
                    yield Located(record, path, f"line {number}")

    def questions(self, config: str) -> list[Question]:
        group_field = self.declared[config]["group_field"]
        return [read_question(item, group_field) for item in self.records(config)]

    def conversation_lengths(self) -> dict[str, int]:
        """Responses per conversation (padding included): from the log, else from `conversations`."""
        if "log" in self.files:
            return dict(Counter(str(require(item, "conversation_id", str)) for item in self.records("log")))
        if "conversations" in self.files:
            return {
                require(item, "conversation_id", str): require(item, "num_responses", int)
                for item in self.records("conversations")
            }
        raise GenError(
            "the dataset has neither a log nor a conversations config, so response indices cannot be checked",
            file=self.folder,
            expected="a dataset written with the log (or conversations) config",
        )

    def log(self) -> dict[str, list[dict[str, Any]]]:
        """The log's records per conversation, in response_index order."""
        if "log" not in self.files:
            raise GenError("the baselines read the responses, and the dataset has no log config", file=self.folder)
        by_conversation: dict[str, list[dict[str, Any]]] = {}
        for item in self.records("log"):
            require(item, "response_index", int)
            for name in ("text", "timestamp"):
                require(item, name, str)
            by_conversation.setdefault(require(item, "conversation_id", str), []).append(item.record)
        for responses in by_conversation.values():
            responses.sort(key=lambda response: response["response_index"])
        return by_conversation

    def nows(self) -> dict[str, str]:
        """Each conversation's "now" (from `conversations`; empty when the dataset has no such config)."""
        if "conversations" not in self.files:
            return {}
        return {
            require(item, "conversation_id", str): require(item, "now", str) for item in self.records("conversations")
        }


RUN_REPORT = "run.json as gen run writes it"


def finished_report(folder: Path, use: str) -> dict[str, Any]:
    """run.json (both layouts carry it), refusing a run that stopped early or failed validation: its records are
    incomplete or unchecked. `use` says what is refused ("exported", "scored")."""
    path = folder / "run.json"
    if not folder.is_dir():
        raise GenError("no such folder", file=folder, expected="a folder gen run wrote (outputs/<name>)")
    if not path.is_file():
        raise GenError("not a dataset folder: run.json is missing", file=folder, expected="a folder gen run wrote")
    report = reading.read_json(path, RUN_REPORT)
    if not isinstance(report, dict):
        raise GenError("run.json is not a gen run report", file=path, expected="a JSON object")
    if report.get("stopped"):
        reason = report["stopped"].get("reason", "?") if isinstance(report["stopped"], dict) else "?"
        raise GenError(
            f"this run stopped: {reason}; only a finished run is {use}",
            file=path,
            field="stopped",
            expected="the folder of a run that finished (run the same command again to resume it)",
        )
    validation = report.get("validation") or {}
    failed = [name for name, result in validation.items() if not (isinstance(result, dict) and result.get("passed"))]
    if failed:
        raise GenError(
            f"validation failed for {', '.join(failed)}; a failed run is never {use}",
            file=path,
            field="validation",
        )
    return report


def open_dataset(folder: Path) -> Dataset:
    folder = Path(folder)
    if not folder.is_dir():
        raise GenError("no such folder", file=folder, expected=DATASET_EXPECTED)
    exported = export_files(folder)
    if exported:
        return Dataset(folder, "export", exported, declared_questions(folder))
    return Dataset(folder, "run", run_files(folder), declared_questions(folder))


def declared_questions(folder: Path) -> dict[str, dict[str, Any]]:
    """The configs run.json declares as questions, with how they are scored (either layout carries run.json; an
    export folder without it has records to read but no questions to score)."""
    path = folder / "run.json"
    if not path.is_file():
        return {}
    try:
        configs = reading.read_json(path, RUN_REPORT)["configs"]
        declared = {name: info["questions"] for name, info in configs.items() if "questions" in info}
    except (KeyError, TypeError, AttributeError) as exc:
        raise GenError(f"run.json is not a gen run report ({exc})", file=path) from None
    for name, questions in declared.items():
        if not isinstance(questions, dict) or not isinstance(questions.get("group_field"), str):
            raise GenError(
                "a config's questions must name their group_field",
                file=path,
                field=f"configs.{name}.questions",
                expected='{"group_field": "...", "answer_field": ..., "asked_by_speaker_a": ...}',
            )
    return declared


def export_files(folder: Path) -> dict[str, list[Path]]:
    data = folder / "data"
    if not data.is_dir():
        return {}
    found = {sub.name: sorted(sub.glob("*.parquet")) for sub in sorted(data.iterdir()) if sub.is_dir()}
    return {name: paths for name, paths in found.items() if paths}


def run_files(folder: Path) -> dict[str, list[Path]]:
    report_path = folder / "run.json"
    if not report_path.is_file():
        raise GenError("not a dataset folder: no run.json and no data/ folder", file=folder, expected=DATASET_EXPECTED)
    try:
        configs = reading.read_json(report_path, RUN_REPORT)["configs"]
        files = {name: [folder / info["path"]] for name, info in configs.items()}
    except (KeyError, TypeError) as exc:
        raise GenError(f"run.json is not a gen run report ({exc})", file=report_path) from None
    for name, paths in files.items():
        if not paths[0].is_file():
            raise GenError(f"the data file of config {name} is missing", file=paths[0], expected=DATASET_EXPECTED)
    return files


def numbered_jsonl(
    path: Path, expected: str = "JSON lines", strict: bool = False
) -> Iterator[tuple[int, dict[str, Any]]]:
    """The objects of a JSONL file with their line numbers; blank lines are skipped. `strict` for a file a user
    wrote (predictions, answers): gen/strict_json.py's rules, a repeated key refused; gen's own files are read
    with orjson, which is faster."""
    for number, line in reading.text_lines(path, expected):
        yield number, json_object(line, path, number, strict)


def json_object(line: str, path: Path, number: int, strict: bool = False) -> dict[str, Any]:
    if strict:
        value = reading.json_line(path, line, number, None)
    else:
        try:
            value = orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise GenError(f"not valid JSON: {exc.msg}", file=path, record=f"line {number}") from None
    if not isinstance(value, dict):
        raise GenError("the line is not a JSON object", file=path, record=f"line {number}", expected="{...}")
    return value


def parquet_records(path: Path) -> Iterator[Located]:
    """The rows of an exported parquet file, as the JSONL holds them: dates and date-times back to ISO text."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
        rows = table.to_pylist()
    except (OSError, ValueError) as exc:
        raise GenError(f"not a readable parquet file ({exc})", file=path) from None
    temporal = [field.name for field in table.schema if is_temporal(field.type)]
    for number, row in enumerate(rows, start=1):
        for name in temporal:
            row[name] = iso_text(row[name])
        yield Located(row, path, f"row {number}")


def is_temporal(arrow_type: Any) -> bool:
    """Whether a column holds a date or date-time anywhere inside (lists and structs included)."""
    import pyarrow as pa

    if pa.types.is_timestamp(arrow_type) or pa.types.is_date(arrow_type):
        return True
    if pa.types.is_struct(arrow_type):
        return any(is_temporal(arrow_type.field(i).type) for i in range(arrow_type.num_fields))
    if pa.types.is_list(arrow_type) or pa.types.is_large_list(arrow_type):
        return is_temporal(arrow_type.value_type)
    return False


def iso_text(value: Any) -> Any:
    """datetime → "2023-05-08T13:56:04", date → "2023-05-08", inside lists and dicts too; the rest unchanged."""
    if isinstance(value, datetime):
        return value.isoformat(timespec="seconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, list):
        return [iso_text(item) for item in value]
    if isinstance(value, dict):
        return {key: iso_text(item) for key, item in value.items()}
    return value


def require(item: Located, name: str, kind: type) -> Any:
    """A field that must be there with the given type (bool is no int), or an error naming where."""
    value = item.record.get(name)
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise GenError(
            f"field {name} is {json.dumps(value)[:40]}",
            file=item.file,
            record=item.place,
            field=name,
            expected=f"a {kind.__name__}",
        )
    return value


def read_question(item: Located, group_field: str) -> Question:
    """A question record. Its window may be empty: that is the question an abstention answers (gold_answers gives
    an empty window the abstention, and an abstaining question has nothing to retrieve); the exports refuse an
    empty window whose answer does not abstain (gen/export/harness/questions.py), and retrieval scoring leaves
    such a question out (score.py)."""
    relevant = require(item, "relevant_response_indices", list)
    if any(type(index) is not int for index in relevant):  # type(), not isinstance: true is no index
        raise GenError(
            "relevant_response_indices must list response indices",
            file=item.file,
            record=item.place,
            field="relevant_response_indices",
            expected="a list of integers",
        )
    return Question(
        require(item, "question_id", str),
        require(item, "conversation_id", str),
        str(require(item, group_field, str)),
        relevant,
        item,
    )


class GoldAnswers:
    """The gold answers of one config of questions: the one place `gen eval --answers` and the harness exports read
    them from, so the two cannot disagree. A config declares either a field of its own records (`answer_field`, as
    temporal_reasoning's `answer`) or a config of answers keyed by base question (`answers_from`, as the time
    queries' `gold_answers`, whose records hold `group_id` and `answer`); a config of answers the dataset does not
    hold gives no answers, as a config that declares neither.

    Whether an answer was computed or written by a model (`written`), and whether it is an abstention (`abstains`:
    the record holding it says `abstained: true`, as gold_answers does for an empty window, or the question record
    is marked as one by the field its config declares as `abstention_field`), is read here too: it decides whether
    `gen eval --answers` may have an LLM judge answers to it, and with which rule."""

    def __init__(self, dataset: Dataset, config: str) -> None:
        declared = dataset.declared[config]
        self.field: str | None = declared.get("answer_field")
        source = declared.get("answers_from")
        self.source = source if isinstance(source, str) else None
        self.by_group: dict[str, str] | None = None
        self.abstaining_groups: set[str] = set()
        marked = declared.get("abstention_field")  # time_queries with abstentions: the question says it itself
        self.abstention_field = marked if isinstance(marked, str) else None
        if self.field is None and isinstance(source, str) and source in dataset.files:
            self.by_group = {}
            for item in dataset.records(source):
                group = require(item, "group_id", str)
                self.by_group[group] = require(item, "answer", str)
                if item.record.get("abstained") is True:
                    self.abstaining_groups.add(group)
        computed = declared.get("answer_computed")
        # a run.json from before the declaration: only temporal_reasoning had an answer field, and it is computed
        self.written = not computed if isinstance(computed, bool) else self.field is None

    @property
    def declared(self) -> bool:
        """Whether this config's questions can have gold answers in this dataset."""
        return self.field is not None or self.by_group is not None

    def where(self) -> str:
        """Where the answers are read, for an export's manifest."""
        if self.field is not None:
            return self.field
        if self.by_group is not None:
            return f"{self.source}.answer (by group_id)"
        return "none: score retrieval only"

    def of(self, item: Located, question_id: str) -> str | None:
        """A question's gold answer, or None (no answers, or its base question's answer was rejected)."""
        if self.field is not None:
            return require(item, self.field, str)
        if self.by_group is not None:
            return self.by_group.get(group_of(item, question_id))
        return None

    def abstains(self, item: Located, question_id: str) -> bool:
        """Whether the question's gold answer says the conversations do not hold what is asked: the question is
        marked as an abstention, or its answer is one."""
        if self.abstention_field is not None and item.record.get(self.abstention_field) is True:
            return True
        if self.field is not None:
            return item.record.get("abstained") is True
        return group_of(item, question_id) in self.abstaining_groups


def group_of(item: Located, question_id: str) -> str:
    """A question's base question: its group_id, or the question itself in a config without groups."""
    return str(item.record.get("group_id") or question_id)
