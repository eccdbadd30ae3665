"""The viewer's index: every config imported once into a DuckDB database in a temporary folder (never in the run
folder), so that a page is one query over columns, not a pass over the JSON lines, and no config is ever held
in Python lists. The import runs in a background thread, smallest configs first; until a config is ready, its
first pages are read straight from the file in file order.

Why DuckDB: it reads JSON lines and parquet itself, with the column types we declare; a filtered page keeps
file order without sorting (preserve_insertion_order), a sorted page is a top-N heap, and its memory is capped
(the rest spills to the same temporary folder)."""

from __future__ import annotations

import itertools
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb

from gen.view.folder import ConfigFiles, RunFolder

REJECTS = "(rejects)"  # the rejects' table, beside the configs
FACET_LIMIT = 40  # a scalar field with at most this many distinct values gets a pick-list with counts
NONE_VALUE = "(none)"  # a filter value that matches a missing (null) field
HEAD_PAGES_MAX_LINES = 200_000  # before the index is ready, pages are read from the file up to this line
DTYPES = {
    "string": "VARCHAR",
    "large_string": "VARCHAR",
    "int64": "BIGINT",
    "int32": "BIGINT",
    "int16": "BIGINT",
    "int8": "BIGINT",
    "float64": "DOUBLE",
    "float32": "DOUBLE",
    "bool": "BOOLEAN",
}  # any other value (timestamp[s], date32) stays the ISO text the file holds; lists and structs stay JSON
SCALAR = ("VARCHAR", "BIGINT", "INTEGER", "SMALLINT", "TINYINT", "DOUBLE", "FLOAT", "BOOLEAN", "DATE", "TIMESTAMP")
NUMBERS = ("BIGINT", "INTEGER", "SMALLINT", "TINYINT")


class QueryError(Exception):
    """A page asked for something the config does not have (a field, a value of the wrong type)."""


@dataclass
class Column:
    name: str
    type: str

    @property
    def scalar(self) -> bool:
        return self.type in SCALAR or self.type.startswith("TIMESTAMP")

    @property
    def searchable(self) -> bool:
        return not self.scalar or self.type == "VARCHAR"


@dataclass
class TableState:
    state: str = "waiting"  # waiting, indexing, ready or failed
    error: str | None = None
    rows: int | None = None
    seconds: float | None = None
    columns: list[Column] = field(default_factory=list)
    facets: dict[str, list[tuple[Any, int]]] = field(default_factory=dict)


@dataclass
class RecordsQuery:
    page: int = 1
    size: int = 50
    sort: str | None = None
    desc: bool = False
    text: str = ""
    filters: dict[str, str] = field(default_factory=dict)

    @property
    def plain(self) -> bool:
        """File order, everything: a page any reader of the file can serve."""
        return not (self.sort or self.text or self.filters)


@dataclass
class Page:
    rows: list[dict[str, Any]]
    total: int  # records that match
    from_index: bool  # False: read from the file while the index is built


def quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def table_name(config: str) -> str:
    return quoted(f"config {config}")


def column_types(features: list[dict[str, Any]]) -> dict[str, str]:
    return {
        str(entry["name"]): DTYPES.get(str(entry.get("dtype")), "VARCHAR") if "dtype" in entry else "JSON"
        for entry in features
        if isinstance(entry, dict) and "name" in entry
    }


def import_sql(config: ConfigFiles) -> str:
    if not config.files:  # a config without records: its declared columns, no rows
        declared = column_types(config.features or []) or {"record": "JSON"}
        columns = ", ".join(f"{quoted(name)} {kind}" for name, kind in declared.items())
        return f"CREATE TABLE {table_name(config.name)} ({columns})"
    files = "[" + ", ".join(literal(str(path)) for path in config.files) + "]"
    if config.format == "parquet":
        return f"CREATE TABLE {table_name(config.name)} AS SELECT * FROM read_parquet({files})"
    options = ["format='newline_delimited'"]
    if config.features:
        types = ", ".join(f"{literal(name)}: {literal(kind)}" for name, kind in column_types(config.features).items())
        options.append(f"columns={{{types}}}")
    else:
        options.append("sample_size=-1")
    return f"CREATE TABLE {table_name(config.name)} AS SELECT * FROM read_json({files}, {', '.join(options)})"


class Index:
    def __init__(self, folder: RunFolder, memory_limit_mb: int = 128, threads: int = 2) -> None:
        self.folder = folder
        self.workdir = Path(tempfile.mkdtemp(prefix="gen-view-"))
        self.db = duckdb.connect(str(self.workdir / "index.duckdb"))
        self.db.execute(f"SET memory_limit='{int(memory_limit_mb)}MB'")
        self.db.execute(f"SET threads={int(threads)}")
        self.db.execute(f"SET temp_directory={literal(str(self.workdir / 'spill'))}")
        self.db.execute("SET preserve_insertion_order=true")
        self.states = {name: TableState() for name in folder.configs}
        self.states[REJECTS] = TableState()
        self.lock = threading.Lock()
        self.thread = threading.Thread(target=self.build_all, name="gen-view-index", daemon=True)

    # -- building ----------------------------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def build_all(self) -> None:
        order = sorted(self.folder.configs.values(), key=lambda config: config.size)
        self.build_rejects()
        for config in order:
            self.build(config)

    def build(self, config: ConfigFiles) -> None:
        state = self.states[config.name]
        state.state = "indexing"
        started = time.perf_counter()
        try:
            if config.still_writing:
                config = whole_lines_snapshot(config, self.workdir)
            with self.cursor() as cur:
                cur.execute(import_sql(config))
                state.columns = self.describe(cur, table_name(config.name))
                state.rows = self.scalar(cur, f"SELECT count(*) FROM {table_name(config.name)}")
                state.facets = self.compute_facets(cur, table_name(config.name), state.columns)
        except duckdb.Error as exc:
            state.error = first_line(str(exc))
            state.state = "failed"
            return
        state.seconds = time.perf_counter() - started
        state.state = "ready"

    def build_rejects(self) -> None:
        state = self.states[REJECTS]
        state.state = "indexing"
        source = self.folder.rejects
        try:
            with self.cursor() as cur:
                if source is None or source.stat().st_size == 0:
                    cur.execute(f"CREATE TABLE {table_name(REJECTS)} (raw JSON)")
                else:
                    cur.execute(
                        f"CREATE TABLE {table_name(REJECTS)} AS SELECT json AS raw FROM "
                        f"read_json_objects({literal(str(source))}, format='newline_delimited')"
                    )
                state.rows = self.scalar(cur, f"SELECT count(*) FROM {table_name(REJECTS)}")
        except duckdb.Error as exc:
            state.error = first_line(str(exc))
            state.state = "failed"
            return
        state.state = "ready"

    @staticmethod
    def describe(cur: duckdb.DuckDBPyConnection, table: str) -> list[Column]:
        return [Column(str(name), str(kind)) for name, kind, *_ in cur.execute(f"DESCRIBE {table}").fetchall()]

    @staticmethod
    def compute_facets(
        cur: duckdb.DuckDBPyConnection, table: str, columns: list[Column]
    ) -> dict[str, list[tuple[Any, int]]]:
        """value → count for each scalar field with few distinct values (one pass to find them, one per field)."""
        scalars = [column for column in columns if column.scalar]
        if not scalars:
            return {}
        distinct = cur.execute(
            "SELECT " + ", ".join(f"approx_count_distinct({quoted(c.name)})" for c in scalars) + f" FROM {table}"
        ).fetchone()
        facets = {}
        for column, count in zip(scalars, distinct or ()):
            if count is not None and count <= FACET_LIMIT:
                rows = cur.execute(
                    f"SELECT {quoted(column.name)}, count(*) FROM {table} GROUP BY 1 "
                    f"HAVING count(*) > 0 ORDER BY 2 DESC, 1 NULLS LAST LIMIT {FACET_LIMIT + 1}"
                ).fetchall()
                if len(rows) <= FACET_LIMIT:
                    facets[column.name] = [(value, int(n)) for value, n in rows]
        return facets

    # -- reading -----------------------------------------------------------------------------------------
    def cursor(self) -> duckdb.DuckDBPyConnection:
        with self.lock:
            return self.db.cursor()

    @staticmethod
    def scalar(cur: duckdb.DuckDBPyConnection, sql: str, params: list[Any] | None = None) -> Any:
        row = cur.execute(sql, params or []).fetchone()
        return row[0] if row else None

    def ready(self, config: str) -> bool:
        return self.states[config].state == "ready"

    def wait(self, config: str, seconds: float) -> bool:
        deadline = time.monotonic() + seconds
        while self.states[config].state in ("waiting", "indexing") and time.monotonic() < deadline:
            time.sleep(0.02)
        return self.ready(config)

    def query(self, sql: str, params: list[Any] | None = None) -> list[dict[str, Any]]:
        """Rows of `sql` as dicts (sql names tables through table_name())."""
        with self.cursor() as cur:
            result = cur.execute(sql, params or [])
            names = [column[0] for column in result.description or ()]
            return [dict(zip(names, row)) for row in result.fetchall()]

    def columns(self, config: str) -> list[Column]:
        return self.states[config].columns

    def page(self, config: str, query: RecordsQuery) -> Page:
        if not self.ready(config):
            return self.file_page(config, query)
        table = table_name(config)
        where, params = self.where(config, query)
        start = (query.page - 1) * query.size
        if query.plain:
            total = self.states[config].rows or 0
            rows = self.query(
                f"SELECT rowid AS _row, * FROM {table} WHERE rowid >= ? AND rowid < ? ORDER BY rowid",
                [start, start + query.size],
            )
            return Page(rows, total, True)
        with self.cursor() as cur:
            total = int(self.scalar(cur, f"SELECT count(*) FROM {table}{where}", params))
        order = ""
        if query.sort:
            order = f" ORDER BY {quoted(query.sort)} {'DESC' if query.desc else 'ASC'} NULLS LAST, rowid"
        rows = self.query(
            f"SELECT rowid AS _row, * FROM {table}{where}{order} LIMIT ? OFFSET ?", [*params, query.size, start]
        )
        return Page(rows, total, True)

    def where(self, config: str, query: RecordsQuery) -> tuple[str, list[Any]]:
        columns = {column.name: column for column in self.columns(config)}
        clauses, params = [], []
        for name, raw in query.filters.items():
            column = columns.get(name)
            if column is None or not column.scalar:
                raise QueryError(f"{config} has no field {name!r} to filter on")
            if raw == NONE_VALUE:
                clauses.append(f"{quoted(name)} IS NULL")
            else:
                clauses.append(f"{quoted(name)} = ?")
                params.append(filter_value(column, raw))
        if query.sort is not None and (query.sort not in columns or not columns[query.sort].scalar):
            raise QueryError(f"{config} has no field {query.sort!r} to sort by")
        if query.text:
            searched = [f"CAST({quoted(c.name)} AS VARCHAR)" for c in columns.values() if c.searchable]
            if searched:
                clauses.append(f"contains(lower(concat_ws(chr(10), {', '.join(searched)})), ?)")
                params.append(query.text.lower())
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), params

    def file_page(self, config: str, query: RecordsQuery) -> Page:
        """A page read from the file itself, in file order (before the index is ready)."""
        files = self.folder.configs[config]
        start = (query.page - 1) * query.size
        if not query.plain or not files.files or files.format != "jsonl" or start + query.size > HEAD_PAGES_MAX_LINES:
            return Page([], 0, False)
        rows = []
        for number, line in enumerate(itertools.islice(lines(files.files[0]), start, start + query.size), start):
            try:
                record = json.loads(line)
            except ValueError:  # a run still being written: its last line may be cut off
                break
            rows.append({"_row": number, **record})
        return Page(rows, files.records or 0, False)

    def close(self) -> None:
        try:
            self.db.close()
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)


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


def filter_value(column: Column, raw: str) -> Any:
    if column.type in NUMBERS:
        try:
            return int(raw)
        except ValueError:
            raise QueryError(f"{column.name} holds whole numbers, not {raw!r}") from None
    if column.type in ("DOUBLE", "FLOAT"):
        try:
            return float(raw)
        except ValueError:
            raise QueryError(f"{column.name} holds numbers, not {raw!r}") from None
    if column.type == "BOOLEAN":
        if raw not in ("true", "false"):
            raise QueryError(f"{column.name} is true or false, not {raw!r}")
        return raw == "true"
    return raw


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "unknown error"
