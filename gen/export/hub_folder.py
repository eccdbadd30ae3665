"""Run folder → export folder: what `gen push` commits.

    README.md                                         the card (gen/export/card.py), configs pointing at the parquet
    data/<config>/<split>-00000-of-0000N.parquet      the records, typed by the product's features()
    recipe.yaml  run.json  [rejects.jsonl]            how it was made (rejects only when there are some)

Every config gets an explicit schema: the product module's `features()`, written into the parquet files (with
the `huggingface` schema metadata datasets reads back) and into the card's `dataset_info`. Nothing is inferred
from the rows; a record that does not fit its schema is an error naming the file, line and field.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import orjson

from gen import progress, reading
from gen.callers import named
from gen.errors import GenError
from gen.export.files import ExportFile
from gen.export.spec import DEFAULT_MAX_SHARD_SIZE, parse_size
from gen.export.typed_records import to_table
from gen.folders import NewFolder
from gen.products.schema import Schema
from gen.provenance import public_llm_report, public_origin, public_recipe
from gen.templating import INSTALLED, Templates
from gen.write_guard import refuse_writing_into

BATCH_ROWS = 10_000  # records converted at a time: memory holds one batch (a multiple of ROW_GROUP_ROWS)
ROW_GROUP_ROWS = 1000  # small row groups let the Hub's viewer and streaming readers fetch a page cheaply
EXTRA_FILES = ("recipe.yaml", "run.json", "rejects.jsonl")


@dataclass
class Export:
    """An export folder on disk and what the card needs to be (re)written for a given target."""

    folder: Path
    run_dir: Path
    report: dict
    data_files: dict[str, str]
    dataset_info: list[dict]
    files: list[ExportFile] = field(default_factory=list)  # everything except README.md
    templates: Templates = INSTALLED
    card: str = ""
    personal_data_ok: bool = False  # the publisher's word for a run made from people's own logs (the card says it)

    def write_card(
        self, repo_id: str | None = None, existing: Iterable[dict] = (), overrides: dict | None = None
    ) -> str:
        """Render README.md for `repo_id`, merging `existing` card metadata (e.g. the card already on the Hub)."""
        from gen.export.card import Published, render_card

        self.card = render_card(
            self.report,
            self.templates,
            folder=self.run_dir,
            previous=self.run_dir / "README.md",
            published=Published(self.data_files, self.dataset_info, repo_id, self.files, self.personal_data_ok),
            existing=existing,
            overrides=overrides,
        )
        (self.folder / "README.md").write_text(self.card, encoding="utf-8")
        return self.card

    @property
    def all_files(self) -> list[ExportFile]:
        readme = self.folder / "README.md"
        return [ExportFile("README.md", readme.stat().st_size), *self.files] if readme.exists() else list(self.files)


# --- reading the run folder -----------------------------------------------------------------------


def read_run(run_dir: Path) -> dict:
    """run.json of a finished, validated run whose data files are all there."""
    run_dir = Path(run_dir)
    report_path = run_dir / "run.json"
    if not run_dir.is_dir():
        raise GenError("no such folder", file=run_dir, expected="a run folder written by `gen run` (outputs/<name>)")
    if not report_path.is_file():
        raise GenError(
            "not a run folder: run.json is missing",
            file=run_dir,
            expected="a folder written by `gen run` (outputs/<name>)",
        )
    try:
        report = reading.read_json(report_path, "run.json written by gen run")
        configs, split = report["configs"], report["split"]
    except (KeyError, TypeError) as exc:
        raise GenError(f"run.json is not a gen run report ({exc})", file=report_path) from None
    if report.get("stopped"):
        raise GenError(
            f"this run stopped before its end ({report['stopped'].get('reason', '?')}); only a finished run is "
            "published",
            file=report_path,
            field="stopped",
        )
    failed = [name for name, result in report.get("validation", {}).items() if not result.get("passed")]
    if failed:
        raise GenError(
            f"validation failed for {', '.join(failed)}; a failed run is never published",
            file=report_path,
            field="validation",
        )
    if not configs:
        raise GenError("the run has no configs", file=report_path, field="configs")
    for name, info in configs.items():
        if not (run_dir / info["path"]).is_file():
            raise GenError(f"the data file of config {name} is missing", file=run_dir / info["path"])
    for relative in [info["path"] for info in configs.values()] + ["README.md", *EXTRA_FILES]:
        refuse_outside(run_dir, run_dir / relative)
    if not isinstance(split, str) or not split:
        raise GenError("run.json has no split name", file=report_path, field="split")
    check_sources(report.get("sources"), report_path)
    return report


# what the card and the published run.json read of each of run.json's sources, as gen run writes them
SOURCE_FIELDS: dict[str, type] = {"format": str, "origin": str, "origin_name": str, "loaded": int, "selected": int}


def check_sources(sources: object, report_path: Path) -> None:
    """run.json's `sources` as publishing reads them (the card's source lines, the public run.json, the personal
    data check): a damaged or hand-edited entry is one message naming it here, before the card's template or the
    upload meet it."""
    if not isinstance(sources, list) or not sources:
        raise GenError(
            f"got {type(sources).__name__}", file=report_path, field="sources", expected="a list of the run's sources"
        )
    for index, entry in enumerate(sources):
        if not isinstance(entry, dict):
            raise GenError(
                f"got {type(entry).__name__}", file=report_path, field=f"sources[{index}]", expected="an object"
            )
        for name, kind in SOURCE_FIELDS.items():
            value = entry.get(name)
            negative = isinstance(value, int) and value < 0
            if not isinstance(value, kind) or isinstance(value, bool) or negative:
                raise GenError(
                    "missing" if value is None else f"got {value!r}",
                    file=report_path,
                    field=f"sources[{index}].{name}",
                    expected=f"{'a whole number' if kind is int else 'text'}, as gen run writes it",
                )


def refuse_outside(run_dir: Path, path: Path) -> None:
    """Publishing reads only the run folder's own files: a path leading out of it, or a symbolic link anywhere on
    the way (which could name any file of this machine), is refused, naming it."""
    if not (path.exists() or path.is_symlink()):
        return
    relative = path.relative_to(run_dir)
    for step in [run_dir / Path(*relative.parts[: i + 1]) for i in range(len(relative.parts))]:
        if step.is_symlink():
            raise GenError(
                f"this is a symbolic link (to {step.readlink()}); gen publishes only files inside the run folder",
                file=step,
                expected="the file itself in the run folder",
            )
    if not path.resolve().is_relative_to(run_dir):  # a path in run.json that climbs out with ".."
        raise GenError(
            "this file is outside the run folder; gen publishes only files inside it",
            file=path,
            expected="run.json's paths as gen run wrote them (<config>/<split>.jsonl)",
        )


def product_features(name: str, info: dict, where: Path) -> Schema:
    """The schema of `name` as the run wrote it (plain data, as the card's `dataset_info` holds it): the product's,
    with what its run.json entry `info` adds (registry.run_features)."""
    from gen.products.registry import REGISTRY, run_features

    found = run_features(name, info)
    if found is None:
        known = [spec.name for product in REGISTRY.values() for spec in product.configs]
        raise GenError(
            f"config {name!r} was made by a product this gen does not know",
            file=where,
            expected=f"one of {', '.join(known)}",
        )
    return found


def batches(path: Path, size: int = BATCH_ROWS) -> Iterator[tuple[int, list[dict]]]:
    """(line number of the first, records) in batches of `size`, read with orjson: gen wrote these lines."""
    batch: list[dict] = []
    first = 1
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise GenError(f"not valid JSON: {exc.msg}", file=path, record=f"line {number}") from None
            if not isinstance(row, dict):
                raise GenError("a record is not a JSON object", file=path, record=f"line {number}")
            if not batch:
                first = number
            batch.append(row)
            if len(batch) == size:
                yield first, batch
                batch = []
    if batch:
        yield first, batch


def fitting(table, room: int, whole_file: bool):
    """The longest head of `table` that fits in `room` bytes (in memory); at least one row in an empty file."""
    if table.nbytes <= room:
        return table
    count = int(table.num_rows * max(room, 0) / table.nbytes)
    while count and table.slice(0, count).nbytes > room:
        count -= max(1, count // 20)
    return table.slice(0, max(count, 1 if whole_file else 0))


@dataclass
class Written:
    files: list[ExportFile]
    rows: int
    nbytes: int  # in memory, as arrow holds the data (the card's dataset_size)


def write_config(
    source: Path, folder: Path, stem: str, declared: Schema, max_bytes: int, bar: progress.Bar | None = None
) -> Written:
    """The config's records streamed into parquet files `<stem>-NNNNN-of-MMMMM.parquet` under `folder`, a new
    file whenever the next batch would take the current one past `max_bytes` (in memory, as arrow counts it):
    memory holds one batch, whatever the config's size. Files are named once their count is known."""
    import pyarrow.parquet as pq

    folder.mkdir(parents=True, exist_ok=True)
    parts: list[tuple[Path, int]] = []  # (temporary path, rows)
    writer, in_file, rows, nbytes = None, 0, 0, 0
    try:
        for first, batch in batches(source):
            table = to_table(batch, declared, source, first)
            rows, nbytes = rows + table.num_rows, nbytes + table.nbytes
            if bar is not None:
                bar.advance(table.num_rows)
            while table.num_rows:
                if writer is None:
                    parts.append((folder / f".{stem}.part{len(parts):05d}", 0))
                    writer, in_file = pq.ParquetWriter(parts[-1][0], table.schema), 0
                piece = fitting(table, max_bytes - in_file, whole_file=in_file == 0)
                if not piece.num_rows:  # the current file is full
                    writer.close()
                    writer = None
                    continue
                writer.write_table(piece, row_group_size=ROW_GROUP_ROWS)
                parts[-1] = (parts[-1][0], parts[-1][1] + piece.num_rows)
                in_file += piece.nbytes
                table = table.slice(piece.num_rows)
        if writer is None:  # no record: one empty file, so the config still loads
            parts.append((folder / f".{stem}.part00000", 0))
            pq.write_table(to_table([], declared, source), parts[-1][0])
    finally:
        if writer is not None:
            writer.close()
    files = []
    for index, (part, count) in enumerate(parts):
        final = folder / f"{stem}-{index:05d}-of-{len(parts):05d}.parquet"
        part.rename(final)
        files.append(ExportFile(final.as_posix(), final.stat().st_size, count))
    return Written(files, rows, nbytes)


# --- the export -----------------------------------------------------------------------------------


EXPECTED = "a new or empty folder, or an earlier export gen wrote"


def build_export(
    run_dir: Path,
    dest: Path,
    max_shard_size: str | int = DEFAULT_MAX_SHARD_SIZE,
    templates: Templates = INSTALLED,
    repo_id: str | None = None,
    existing: Iterable[dict] = (),
    overrides: dict | None = None,
    personal_data_ok: bool = False,
) -> Export:
    """Write the export of `run_dir` at `dest` (new, empty, or an earlier export, which is replaced whole)."""
    with building_export(
        run_dir, dest, max_shard_size, templates, repo_id, existing, overrides, personal_data_ok
    ) as export:
        pass
    return export


@contextmanager
def building_export(
    run_dir: Path,
    dest: Path,
    max_shard_size: str | int = DEFAULT_MAX_SHARD_SIZE,
    templates: Templates = INSTALLED,
    repo_id: str | None = None,
    existing: Iterable[dict] = (),
    overrides: dict | None = None,
    personal_data_ok: bool = False,
) -> Iterator[Export]:
    """The export of `run_dir`, written in a sibling of `dest` and yielded; it replaces `dest` (and its `folder`
    becomes `dest`) only when the block ends without an exception, so `gen push` can finish the card with what
    the Hub holds first. Interrupted or failed at any point, it leaves `dest` as it was (gen/folders.py)."""
    run_dir = Path(run_dir).resolve()
    read = {named("OUTPUT_DIR", "run_folder") + " (the run folder)": run_dir, "templates_dir": templates.own}
    refuse_writing_into({named("--export-dir", "PushOptions.export_dir"): dest}, read)
    report = read_run(run_dir)
    try:
        max_bytes = parse_size(max_shard_size)
    except ValueError as exc:
        raise GenError(str(exc), field="max_shard_size") from None
    with NewFolder(Path(dest).absolute(), "the export", EXPECTED) as new:  # unresolved: a link there is refused
        export = Export(
            new.path,
            run_dir,
            report,
            data_files={},
            dataset_info=[],
            templates=templates,
            personal_data_ok=personal_data_ok,
        )
        write_configs(export, max_bytes)
        copy_extras(run_dir, new.path, export)
        export.write_card(repo_id, existing, overrides)
        yield export
    export.folder = Path(dest)


def write_configs(export: Export, max_bytes: int) -> None:
    """Each config's records as parquet under data/<config>/, counted against run.json."""
    with progress.task("writing parquet", export_records(export.report), "records") as bar:
        for name, info in export.report["configs"].items():
            write_parquet(export, name, info, max_bytes, bar)


def export_records(report: dict) -> int | None:
    """The records of every config, as run.json counts them (None if it does not say: the bar has no end)."""
    counts = [info.get("records") for info in report["configs"].values()]
    return sum(counts) if all(isinstance(n, int) for n in counts) else None


def write_parquet(export: Export, name: str, info: dict, max_bytes: int, bar: progress.Bar) -> None:
    """One config's parquet files, counted against run.json and entered in the card's metadata."""
    split = export.report["split"]
    source = export.run_dir / info["path"]
    declared = product_features(name, info, source)
    written = write_config(source, export.folder / "data" / name, split, declared, max_bytes, bar)
    if written.rows != info["records"]:
        raise GenError(
            f"run.json counts {info['records']} records for {name}, the file holds {written.rows}",
            file=source,
            expected="the run folder as `gen run` wrote it",
        )
    for file in written.files:
        file.path = Path(file.path).relative_to(export.folder).as_posix()
    export.files += written.files
    export.data_files[name] = f"data/{name}/{split}-*"
    export.dataset_info.append(
        {
            "config_name": name,
            "features": copy.deepcopy(declared),
            "splits": [{"name": split, "num_bytes": written.nbytes, "num_examples": written.rows}],
            "download_size": sum(file.size for file in written.files),
            "dataset_size": written.nbytes,
        }
    )


def copy_extras(run_dir: Path, dest: Path, export: Export) -> None:
    for name in EXTRA_FILES:
        source = run_dir / name
        if not source.is_file() or (name == "rejects.jsonl" and source.stat().st_size == 0):
            continue
        if name == "run.json":
            (dest / name).write_text(
                json.dumps(public_report(export.report), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            )
        elif name == "recipe.yaml":
            (dest / name).write_text(public_recipe(source.read_text(encoding="utf-8")), encoding="utf-8")
        else:
            shutil.copyfile(source, dest / name)
        export.files.append(ExportFile(name, (dest / name).stat().st_size))


def public_report(report: dict) -> dict:
    """run.json as published: local source paths (which name the user's folders) reduced to their file names,
    the LLM cache's location and local endpoints left out."""
    public = json.loads(json.dumps(report))
    for source in public.get("sources", []):
        source["origin"] = public_origin(str(source.get("origin", "")))
    if isinstance(public.get("llm"), dict):
        public["llm"] = public_llm_report(public["llm"])
    return public
