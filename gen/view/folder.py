"""What `gen view` is asked to open: a run folder (finished, stopped, failed, or still being written) or a
parquet export folder. Reads only; finds each config's files, its declared features and the run's report, and
refuses, with one message, a folder that is none of these or a config whose last record is cut off."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gen import reading
from gen.errors import GenError
from gen.folders import MARKER, SIBLING

NOT_A_RUN = "a folder written by gen run (outputs/NAME, .NAME.stopped, .NAME.failed) or by gen push --export-dir"
TAIL_BYTES = 1 << 16  # the last record of a config is checked within the file's last 64 KiB
CONFIG_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


@dataclass
class ConfigFiles:
    """One config: its data files (JSON lines, or parquet shards), declared features and question spec."""

    name: str
    files: list[Path]
    format: str  # "jsonl" or "parquet"
    features: list[dict[str, Any]] | None  # the card's (or the installed product's) declared fields
    questions: dict[str, Any] | None  # run.json's `questions` entry: set on a config of questions
    records: int | None  # what run.json says was written
    description: str = ""
    still_writing: bool = False  # a run gen is writing: its last line may be cut off (read whole lines only)

    @property
    def size(self) -> int:
        return sum(path.stat().st_size for path in self.files)


@dataclass
class RunFolder:
    path: Path
    kind: str  # "run", "stopped", "failed", "writing" or "export"
    report: dict[str, Any]  # run.json ({} while a run is still being written)
    configs: dict[str, ConfigFiles]
    rejects: Path | None
    notes: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        recipe = self.report.get("recipe") if isinstance(self.report.get("recipe"), dict) else None
        return str(recipe.get("name")) if recipe and recipe.get("name") else self.path.name


def open_folder(path: Path) -> RunFolder:
    """The run or export folder at `path`, checked enough that every page can be served from it."""
    if not path.is_dir():
        raise GenError("there is no folder here", file=path, expected=NOT_A_RUN)
    report = read_report(path)
    if (path / "data").is_dir() and report is not None and any((path / "data").glob("*/*.parquet")):
        folder = export_folder(path, report)
    elif report is not None:
        folder = finished_folder(path, report)
    elif gen_marker(path) is not None:
        folder = writing_folder(path)
    else:
        raise GenError(
            "this is not a run folder: it holds neither run.json nor gen's marker", file=path, expected=NOT_A_RUN
        )
    for config in folder.configs.values():
        if config.format == "jsonl" and config.files and not config.still_writing:
            check_last_record(config)
    return folder


def read_report(path: Path) -> dict[str, Any] | None:
    report_path = path / "run.json"
    if not report_path.is_file():
        return None
    try:
        report = reading.read_json(report_path, "the report gen run writes")
    except OSError as exc:
        raise GenError(
            f"run.json cannot be read: {exc}", file=report_path, expected="the report gen run writes"
        ) from None
    if not isinstance(report, dict) or not isinstance(report.get("configs"), dict):
        raise GenError("run.json has no `configs` object", file=report_path, expected="the report gen run writes")
    return report


def gen_marker(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((path / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("written_by") == "gen" else None


def card_features(path: Path) -> dict[str, list[dict[str, Any]]]:
    """config name → features, from the dataset card's YAML header (absent or unreadable: nothing)."""
    try:
        text = reading.read_text(path / "README.md", "a dataset card", reading.max_record_bytes())
    except GenError:
        return {}
    if not text.startswith("---\n") or "\n---" not in text[4:]:
        return {}
    try:
        header = reading.load_yaml(text[4 : text.index("\n---", 4)], path / "README.md")
    except GenError:
        return {}
    infos = header.get("dataset_info") if isinstance(header, dict) else None
    found = {}
    for info in infos if isinstance(infos, list) else []:
        if isinstance(info, dict) and isinstance(info.get("features"), list):
            found[str(info.get("config_name"))] = info["features"]
    return found


def installed_features(config: str) -> list[dict[str, Any]] | None:
    """The features the installed product declares for `config` (a folder without a card yet)."""
    from gen.products.registry import config_spec

    found = config_spec(config)
    return list(found[1].features) if found else None


def finished_folder(path: Path, report: dict[str, Any]) -> RunFolder:
    features = card_features(path)
    configs = {}
    for name, info in report["configs"].items():
        info = info if isinstance(info, dict) else {}
        data = path / str(info.get("path", f"{name}/{report.get('split', 'test')}.jsonl"))
        present = data.is_file()
        if not present and info.get("records") != 0:
            raise GenError(
                f"config {name!r} is listed in run.json but its file is missing",
                file=data,
                expected="the files run.json names",
            )
        configs[name] = ConfigFiles(
            name=name,
            files=[data] if present else [],  # a stopped run lists a config it never wrote a record of
            format="jsonl",
            features=features.get(name) or installed_features(name),
            questions=info.get("questions") if isinstance(info.get("questions"), dict) else None,
            records=info.get("records") if isinstance(info.get("records"), int) else None,
            description=str(info.get("description", "")),
        )
    stopped = report.get("stopped")
    kind = "stopped" if stopped else "failed" if path.name.endswith(".failed") else "run"
    folder = RunFolder(path, kind, report, configs, rejects_file(path))
    if stopped:
        reason = stopped.get("reason", "?") if isinstance(stopped, dict) else stopped
        folder.notes.append(f"stopped: {reason}")
    return folder


def export_folder(path: Path, report: dict[str, Any]) -> RunFolder:
    import pyarrow.parquet as pq

    features = card_features(path)
    configs = {}
    for folder in sorted(p for p in (path / "data").iterdir() if p.is_dir()):
        shards = sorted(folder.glob("*.parquet"))
        for shard in shards:
            try:
                pq.read_metadata(shard)
            except Exception as exc:  # pyarrow raises its own errors for a cut-off or foreign file
                raise GenError(
                    f"this parquet file cannot be read ({exc})",
                    file=shard,
                    expected="the parquet shards gen push --export-dir writes",
                ) from None
        if not shards:
            continue
        info = report["configs"].get(folder.name, {})
        configs[folder.name] = ConfigFiles(
            name=folder.name,
            files=shards,
            format="parquet",
            features=features.get(folder.name) or installed_features(folder.name),
            questions=info.get("questions") if isinstance(info, dict) else None,
            records=info.get("records") if isinstance(info, dict) else None,
            description=str(info.get("description", "")) if isinstance(info, dict) else "",
        )
    return RunFolder(path, "export", report, configs, rejects_file(path))


def writing_folder(path: Path) -> RunFolder:
    """A folder gen is still writing (`.NAME.tmp-PID`): its configs are the JSON lines files present now."""
    configs = {}
    for data in sorted(path.glob("*/*.jsonl")):
        name = data.parent.name
        if name.startswith(".") or not CONFIG_NAME.match(name):
            continue
        configs[name] = ConfigFiles(name, [data], "jsonl", installed_features(name), None, None, still_writing=True)
    folder = RunFolder(path, "writing", {}, configs, rejects_file(path))
    match = SIBLING.match(path.name)
    folder.notes.append(
        "this run is still being written"
        + (f" (by process {match['pid']})" if match else "")
        + ": each config shows the whole records it held when the viewer indexed it"
    )
    return folder


def rejects_file(path: Path) -> Path | None:
    found = path / "rejects.jsonl"
    return found if found.is_file() else None


def check_last_record(config: ConfigFiles) -> None:
    """A config of a finished or stopped run ends with a whole record (a stop keeps whole lines only)."""
    data = config.files[0]
    size = data.stat().st_size
    if size == 0:
        return
    with data.open("rb") as handle:
        handle.seek(max(0, size - TAIL_BYTES))
        tail = handle.read()
    body = tail.rstrip(b"\n")
    complete = tail.endswith(b"\n")
    if complete and (b"\n" in body or size <= TAIL_BYTES):  # the last line lies whole within the tail
        try:
            complete = isinstance(json.loads(body.rsplit(b"\n", 1)[-1]), dict)
        except ValueError:
            complete = False
    if not complete:
        raise GenError(
            "the config's last record is cut off: the file was not written to its end",
            file=data,
            record=f"config {config.name}",
            expected="a run folder gen finished or stopped, whose files end with whole records",
        )


def whole_lines_snapshot(config: ConfigFiles, workdir: Path) -> ConfigFiles:
    """A config gen is still writing, as a copy (in the index's own folder) of its whole lines at this moment:
    the writer may be in the middle of the last one."""
    source = config.files[0]
    copy = workdir / f"writing-{len(list(workdir.glob('writing-*')))}.jsonl"
    with source.open("rb") as reader, copy.open("wb") as writer:
        tail = b""
        while chunk := reader.read(1 << 20):
            data = tail + chunk
            end = data.rfind(b"\n") + 1
            writer.write(data[:end])
            tail = data[end:]
    return replace(config, files=[copy], still_writing=False)


def lines(path: Path) -> Iterator[bytes]:
    with path.open("rb") as handle:
        yield from handle
