"""The viewer's index: every config imported once into a DuckDB database kept in gen's cache folder (never in the
run folder; gen/view/store.py decides where and when it can be used again), so that a page is one query over
columns, not a pass over the JSON lines, and no config is ever held in Python lists. The import runs in a
background thread, smallest configs first; until a config is ready, its first pages are read straight from the
file in file order. After the imports, the same thread builds each config's text search index
(gen/view/search.py).

Every page of every order costs about the same: a page in file order is a range of rowids; a sorted page is a
range of positions in that sort's own index (the rowids in sorted order, built in the background the first time
the sort is asked for, and kept), so the last page of a sort is no dearer than the first and no sort runs out of
DuckDB's memory cap; until that index is built, a sorted page is a small top-N near either end and is found by
counting deeper (gen/view/seek.py), never by waiting; a filtered page streams in file order. A search goes
through the word index, or the part of it built so far (finder). A page number past the last page is refused,
not computed."""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import sqlite3
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from gen import progress
from gen.view import search, seek, sortkeys
from gen.view.folder import ConfigFiles, RunFolder, lines, whole_lines_snapshot
from gen.view.store import Store, open_store
from gen.view.tables import (
    NONE_VALUE,
    REJECTS,
    Column,
    Page,
    QueryError,
    RecordsQuery,
    first_row,
    import_sql,
    literal,
    order_by,
    quoted,
    table_name,
)

FACET_LIMIT = 40  # a scalar field with at most this many distinct values gets a pick-list with counts
HEAD_PAGES_MAX_LINES = 200_000  # before the index is ready, pages are read from the file up to this line
DIRECT_SORT_ROWS = 5_000  # a sorted page this near either end is a top-N query while the sort's index is built
# (deeper, gen/view/seek.py finds it)
SEARCH_BUILD_MEMORY_MB = 64  # DuckDB's cap while the word indexes are built (pages have the full one after)
CLOSE_TIMEOUT_S = 30  # close() waits this long for the builders to stop before it closes the database
SORT_BUILD_QUIET_S = 1.0  # a sort's index is built once no records page has been asked for this long
MAX_SEARCH_MATCHES_COMBINED = 2_000_000  # a search filtered or sorted too hands DuckDB this many record numbers
DONE = '"gen view done"'  # what the builder finished: part name → details (a config's facets)


@dataclass
class TableState:
    state: str = "waiting"  # waiting, indexing, ready or failed
    error: str | None = None
    rows: int | None = None
    seconds: float | None = None
    columns: list[Column] = field(default_factory=list)
    facets: dict[str, list[tuple[Any, int]]] = field(default_factory=dict)
    sort_keys: dict[str, str] = field(default_factory=dict)  # text field → its key's kind (gen/view/sortkeys.py)


class Index:
    def __init__(self, folder: RunFolder, memory_limit_mb: int = 128, threads: int = 2) -> None:
        self.folder = folder
        self.store: Store = open_store(folder)
        self.memory_limit_mb = memory_limit_mb
        self.db = self.connect(memory_limit_mb, threads)
        self.states = {name: TableState() for name in folder.configs}
        self.states[REJECTS] = TableState()
        self.searches: dict[str, search.Search] = {}  # word indexes built whole
        self.search_below: dict[str, int] = {}  # word indexes being built: records numbered below this are in
        self.search_failures: dict[str, str] = {}  # word indexes SQLite could not build: why
        self.lock = threading.Lock()
        self.part_locks: dict[str, threading.Lock] = {}  # one per part built on demand (part_lock)
        self.stopping = threading.Event()
        self.open_cursors: set[duckdb.DuckDBPyConnection] = set()  # made by cursor(), not yet closed
        self.thread = threading.Thread(target=self.build_all, name="gen-view-index", daemon=True)
        self.helpers: list[threading.Thread] = []  # sort indexes being built for a page: close() waits for them
        self.sorts_queued: list[tuple[str, str, bool]] = []  # sort indexes to build, the one being built first
        self.sort_builder: threading.Thread | None = None  # the thread building them, while there are any
        self.last_page_at = 0.0  # time.monotonic() of the last page asked for (the sort builder waits for quiet)

    def connect(self, memory_limit_mb: int, threads: int) -> duckdb.DuckDBPyConnection:
        path = self.store.path / "index.duckdb"
        try:
            db = duckdb.connect(str(path))
        except duckdb.Error:  # a cache entry DuckDB cannot open (another DuckDB's file, a broken one): start again
            for stale in self.store.path.glob("index.duckdb*"):
                stale.unlink(missing_ok=True)
            db = duckdb.connect(str(path))
        db.execute(f"SET memory_limit='{int(memory_limit_mb)}MB'")
        db.execute(f"SET threads={int(threads)}")
        db.execute(f"SET temp_directory={literal(str(self.store.spill))}")
        db.execute("SET preserve_insertion_order=true")
        db.execute(f"CREATE TABLE IF NOT EXISTS {DONE} (part VARCHAR PRIMARY KEY, details JSON)")
        return db

    # -- building ----------------------------------------------------------------------------------------
    def start(self) -> None:
        self.thread.start()

    def build_all(self) -> None:
        """Import every config, then build each one's word index under a smaller memory cap: a word index reads
        its table once, in order, so DuckDB's cache of the table's blocks (full after the imports) only costs
        memory (at 100 copies of locomo10 it took the viewer from 280 to 360 MB). The cap is lowered only then:
        an import needs the full one."""
        order = sorted(self.folder.configs.values(), key=lambda config: config.size)
        try:
            with progress.task("indexing the run for gen view", 1 + 2 * len(order), "tables") as bar:
                self.build_rejects()
                bar.advance()
                for config in order:
                    if not self.stopping.is_set():
                        self.build(config)
                    bar.advance()
                self.set_memory_limit(min(SEARCH_BUILD_MEMORY_MB, self.memory_limit_mb))
                try:
                    for config in order:
                        if not self.stopping.is_set() and self.ready(config.name):
                            self.build_search_or_say_why(config.name)
                        bar.advance()
                finally:
                    with contextlib.suppress(duckdb.Error):  # none once stopping: nothing is served any more
                        self.set_memory_limit(self.memory_limit_mb)
        except duckdb.Error:
            if not self.stopping.is_set():
                raise
            # interrupted by close(): what was finished is kept, the rest is built at the next start

    def set_memory_limit(self, megabytes: int) -> None:
        """DuckDB's cap for the whole database (beyond it, work spills to the store's spill folder)."""
        with self.cursor() as cur:
            cur.execute(f"SET memory_limit='{int(megabytes)}MB'")

    def done(self, cur: duckdb.DuckDBPyConnection, part: str) -> Any:
        """The details recorded when `part` was finished, or None if it was not."""
        row = cur.execute(f"SELECT details FROM {DONE} WHERE part = ?", [part]).fetchone()
        return json.loads(row[0]) if row else None

    def mark_done(self, cur: duckdb.DuckDBPyConnection, part: str, details: Any) -> None:
        cur.execute(f"INSERT OR REPLACE INTO {DONE} VALUES (?, ?)", [part, json.dumps(details, default=str)])

    def build(self, config: ConfigFiles) -> None:
        state = self.states[config.name]
        state.state = "indexing"
        started = time.perf_counter()
        table, part = table_name(config.name), f"table {config.name}"
        try:
            with self.cursor() as cur:
                facets = self.done(cur, part)
                if facets is None:
                    if config.still_writing:
                        config = whole_lines_snapshot(config, self.store.path)
                    cur.execute(f"DROP TABLE IF EXISTS {table}")  # a build stopped half way
                    cur.execute(import_sql(config))
                    columns = self.describe(cur, table)
                    facets = self.compute_facets(cur, table, columns)
                    self.mark_done(cur, part, [[name, values] for name, values in facets.items()])
                else:
                    facets = {name: [(value, count) for value, count in values] for name, values in facets}
                state.columns = self.describe(cur, table)
                state.rows = self.scalar(cur, f"SELECT count(*) FROM {table}")
                state.facets = facets
                state.sort_keys = self.sort_keys(cur, config.name, table, state.columns)
        except duckdb.Error as exc:
            state.error = first_line(str(exc))
            state.state = "failed"
            return
        state.seconds = time.perf_counter() - started
        state.state = "ready"

    def sort_keys(
        self, cur: duckdb.DuckDBPyConnection, config: str, table: str, columns: list[Column]
    ) -> dict[str, str]:
        """The integer keys of the config's text fields (gen/view/sortkeys.py), written once per cache entry."""
        part = f"text keys {config}"
        kinds = self.done(cur, part)
        if kinds is None:
            kinds = sortkeys.build(cur, config, table, columns)
            self.mark_done(cur, part, kinds)
        return {str(name): str(kind) for name, kind in kinds.items()}

    def build_rejects(self) -> None:
        state = self.states[REJECTS]
        state.state = "indexing"
        source = self.folder.rejects
        table = table_name(REJECTS)
        try:
            with self.cursor() as cur:
                if self.done(cur, "rejects") is None:
                    cur.execute(f"DROP TABLE IF EXISTS {table}")
                    if source is None or source.stat().st_size == 0:
                        cur.execute(f"CREATE TABLE {table} (raw JSON)")
                    else:
                        cur.execute(
                            f"CREATE TABLE {table} AS SELECT json AS raw FROM "
                            f"read_json_objects({literal(str(source))}, format='newline_delimited')"
                        )
                    self.mark_done(cur, "rejects", True)
                state.rows = self.scalar(cur, f"SELECT count(*) FROM {table}")
        except duckdb.Error as exc:
            state.error = first_line(str(exc))
            state.state = "failed"
            return
        state.state = "ready"

    def build_search_or_say_why(self, config: str) -> None:
        """build_search, and if SQLite fails it, the reason kept for the search pages (they say the index is
        partial for good, not still being built) and one line in the terminal; the other configs go on."""
        try:
            self.build_search(config)
        except (sqlite3.Error, OSError) as exc:
            self.search_failures[config] = first_line(str(exc))
            print(f"gen view: the word index of {config} could not be built: {exc}", file=sys.stderr, flush=True)

    def build_search(self, config: str) -> None:
        """The config's word index (gen/view/search.py) over its text and JSON fields, once per cache entry. It
        is searched while it is built (finder() says how far it goes), and whole once marked done here: a build
        cut short is started again at the next start."""
        path = self.search_path(config)
        texts = [f"CAST({quoted(c.name)} AS VARCHAR)" for c in self.columns(config) if c.searchable]
        if not texts:
            return
        part = f"search {config}"
        with self.cursor() as cur:
            whole = self.done(cur, part) is not None
        if not whole:
            with self.cursor() as cur:
                cur.execute(f"SELECT rowid, concat_ws(chr(10), {', '.join(texts)}) FROM {table_name(config)}")

                def batches() -> Iterator[list[tuple[int, str]]]:
                    while (batch := cur.fetchmany(search.BATCH)) and not self.stopping.is_set():
                        yield batch
                        self.search_below[config] = int(batch[-1][0]) + 1  # resumed: that batch is committed

                search.build(path, batches())
                if self.stopping.is_set():
                    return
                self.mark_done(cur, part, True)
        self.searches[config] = search.Search(path)
        self.search_below.pop(config, None)

    def finder(self, config: str) -> tuple[search.Search | None, int | None]:
        """The config's word index and how many records it covers: None when it covers all of them; while it is
        built, the records numbered below what it committed (a Search limited to them), or no Search and 0
        before it committed any. A config without text fields has no index and nothing to find: (None, None).
        Every search goes through here, so a page always knows whether its answer is partial."""
        below = self.search_below.get(config, 0)
        whole = self.searches.get(config)  # looked at after `below`: the builder sets it before it drops `below`
        if whole is not None:
            return whole, None
        if not any(column.searchable for column in self.columns(config)):
            return None, None
        if below == 0:
            return None, 0
        return search.Search(self.search_path(config), below), below

    def search_path(self, config: str) -> Path:
        return self.store.path / f"search-{hashlib.md5(config.encode(), usedforsecurity=False).hexdigest()}.sqlite"

    def sort_index(self, config: str, column: str, desc: bool) -> tuple[str, list[str]]:
        """The table of `config`'s rowids in the order of `column` (ties and missing values as the direct
        query puts them), built the first time it is asked for and kept with the index; and the fields it
        carries beside each rowid: the config's facets (a few values each, so they cost little room), so that a
        page filtered on them and sorted is a scan of this table in its order, as cheap as a filtered page in
        file order, at any depth."""
        direction = "desc" if desc else "asc"
        table = quoted(f"sort {config} {column} {direction}")
        part = f"sort {config} {column} {direction}"
        with self.part_lock(part), self.cursor() as cur:
            carried = self.done(cur, part)
            if carried is None:
                carried = list(self.states[config].facets)
                cur.execute(f"DROP TABLE IF EXISTS {table}")
                cur.execute(
                    f"CREATE TABLE {table} AS SELECT rowid AS r{''.join(', ' + quoted(c) for c in carried)} "
                    f"FROM {table_name(config)} ORDER BY {order_by(column, desc)}"
                )
                self.mark_done(cur, part, carried)
        return table, [str(name) for name in carried] if isinstance(carried, list) else []

    def kept(self, part: str, compute: Callable[[], Any]) -> Any:
        """What `compute` returns (JSON), computed once per cache entry and kept with the index: for a figure
        over a whole config (the overview's plots), which cannot change while the run does not, and which at
        100 copies of locomo10 took 0.2-2.5 s and filled DuckDB's cache each time the overview was opened."""
        with self.part_lock(part):
            with self.cursor() as cur:
                found = self.done(cur, part)
            if found is None:
                found = json.loads(json.dumps(compute(), default=str))
                with self.cursor() as cur:
                    self.mark_done(cur, part, found)
        return found

    def part_lock(self, part: str) -> threading.Lock:
        """The lock of a part built when a page first needs it (a sort's index, a kept figure): pages are served
        from many threads, and two building one part at once both wrote its record in the index, one of them
        failing ("duplicate key", seen on the overview opened by several requests at once)."""
        with self.lock:
            return self.part_locks.setdefault(part, threading.Lock())

    def build_sort_index_soon(self, config: str, column: str, desc: bool) -> None:
        """Queue a sort's index to be built in the background (the next pages of that sort will need it). One
        thread builds the queued indexes one after another: each sorts a whole config under DuckDB's memory cap,
        and several at once (a few orders clicked in turn at 100 copies of locomo10) took every page seconds."""
        wanted = (config, column, desc)
        with self.lock:
            if self.stopping.is_set() or wanted in self.sorts_queued:
                return
            self.sorts_queued.append(wanted)
            if self.sort_builder is None:
                self.sort_builder = threading.Thread(target=self.build_queued_sorts, name="gen-view-sort", daemon=True)
                self.helpers = [thread for thread in self.helpers if thread.is_alive()] + [self.sort_builder]
                self.sort_builder.start()

    def build_queued_sorts(self) -> None:
        """Build the queued sort indexes in turn, each once the pages have been quiet for a moment: a sort of a
        whole config takes both cores for seconds at 100 copies of locomo10, and the pages a person clicks
        through meanwhile (answered without the index) should not share them with it."""
        while True:
            while time.monotonic() - self.last_page_at < SORT_BUILD_QUIET_S and not self.stopping.is_set():
                time.sleep(0.05)
            with self.lock:
                if not self.sorts_queued or self.stopping.is_set():
                    self.sort_builder = None
                    return
                config, column, desc = self.sorts_queued[0]
            with contextlib.suppress(duckdb.Error):  # interrupted by a stop; the next request asks for it again
                self.sort_index(config, column, desc)
            with self.lock:
                self.sorts_queued.pop(0)

    def sort_index_ready(self, config: str, column: str, desc: bool) -> bool:
        part = f"sort {config} {column} {'desc' if desc else 'asc'}"
        with self.cursor() as cur:
            return self.done(cur, part) is not None

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
    def cursor(self) -> AbstractContextManager[duckdb.DuckDBPyConnection]:
        """A connection of its own for one thread's statements, closed when its `with` ends; none once the index
        is closing (a statement begun then would hold the database open past close()).

        Every connection of the index is made and closed here, under the index's lock, and close() closes the
        database under the same lock: DuckDB refuses to close a database while another thread is inside a call
        on it ("connection is busy"), and making or closing a connection is such a call. Two threads never share
        a connection: each `with self.cursor()` is one thread's."""
        with self.lock:
            if self.stopping.is_set():
                raise duckdb.InterruptException("gen view is stopping")
            cur = self.db.cursor()
            self.open_cursors.add(cur)
        return self.closing(cur)

    @contextlib.contextmanager
    def closing(self, cur: duckdb.DuckDBPyConnection) -> Iterator[duckdb.DuckDBPyConnection]:
        try:
            yield cur
        finally:
            with self.lock:
                self.open_cursors.discard(cur)
                with contextlib.suppress(duckdb.Error):  # the database was closed under it (close() gave up waiting)
                    cur.close()

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
        self.last_page_at = time.monotonic()
        if not self.ready(config):
            return self.file_page(config, query)
        table = table_name(config)
        finder, searched = self.finder(config) if query.text else (None, None)
        text_only = finder is not None and not (query.sort or query.filters)
        where, params = self.where(config, query, finder, with_text=not text_only)
        with self.cursor() as cur:
            if query.plain:
                total = self.states[config].rows or 0
            elif text_only:
                assert finder is not None
                total = finder.count(query.text)
            else:
                total = int(self.scalar(cur, f"SELECT count(*) FROM {table}{where}", params))
        start = first_row(query, total)
        if query.plain:
            rows = self.query(
                f"SELECT rowid AS _row, * FROM {table} WHERE rowid >= ? AND rowid < ? ORDER BY rowid",
                [start, start + query.size],
            )
        elif text_only:
            assert finder is not None
            rows = self.rows_by_number(config, finder.numbers(query.text, start, query.size))
        elif query.sort:
            rows = self.sorted_page(config, query, where, params, start, total)
        else:  # filtered, in file order: DuckDB streams the matches in insertion order, no sort, no heap
            rows = self.query(
                f"SELECT rowid AS _row, * FROM {table}{where} LIMIT ? OFFSET ?", [*params, query.size, start]
            )
        return Page(rows, total, True, searched)

    def sorted_page(
        self, config: str, query: RecordsQuery, where: str, params: list[Any], start: int, total: int
    ) -> list[dict[str, Any]]:
        assert query.sort is not None
        end = min(start + query.size, total)
        if not self.sort_index_ready(config, query.sort, query.desc):
            rows = self.unindexed_sorted_page(config, query, where, params, start, total)
            self.build_sort_index_soon(config, query.sort, query.desc)  # after: the page need not share the CPU
            if rows is not None:
                return rows
        positions, carried = self.sort_index(config, query.sort, query.desc)
        if not where:
            ranged = self.query(f"SELECT r FROM {positions} WHERE rowid >= ? AND rowid < ?", [start, end])
            return self.rows_by_number(config, [row["r"] for row in ranged])
        if not query.text and set(query.filters) <= set(carried):  # the matches, streamed in the sort's order
            ranged = self.query(f"SELECT r FROM {positions}{where} LIMIT ? OFFSET ?", [*params, end - start, start])
            return self.rows_by_number(config, [row["r"] for row in ranged])
        # filtered too: the matches' positions in the sort, a top-N over the nearer end (at most half of them)
        from_end = start > total - end
        offset = total - end if from_end else start
        found = self.query(
            f"SELECT s.rowid AS pos, s.r FROM {positions} s SEMI JOIN (SELECT rowid AS id FROM "
            f"{table_name(config)}{where}) f ON s.r = f.id ORDER BY pos {'DESC' if from_end else 'ASC'} "
            "LIMIT ? OFFSET ?",
            [*params, end - start, offset],
        )
        numbers = [row["r"] for row in sorted(found, key=lambda row: row["pos"])]
        return self.rows_by_number(config, numbers)

    def unindexed_sorted_page(
        self, config: str, query: RecordsQuery, where: str, params: list[Any], start: int, total: int
    ) -> list[dict[str, Any]] | None:
        """A sorted page while the sort's index is missing, without waiting for it: near either end a small
        top-N, deeper a seek by counting (gen/view/seek.py), over the field's integer key when it has one and
        nothing else narrows the page (gen/view/sortkeys.py); None if the seek's samples missed the page."""
        assert query.sort is not None
        end = min(start + query.size, total)
        kind = self.states[config].sort_keys.get(query.sort)
        if kind is not None and not where:
            keyed = sortkeys.Keyed(config, table_name(config), query.sort, kind, query.desc, start, end)
            with self.cursor() as cur:
                numbers = sortkeys.page_numbers(cur, keyed, DIRECT_SORT_ROWS)
            return None if numbers is None else self.rows_by_number(config, numbers)
        if start < DIRECT_SORT_ROWS or total - end < DIRECT_SORT_ROWS:
            return self.direct_sorted_page(config, query, where, params, start, total)
        column_type = next(column.type for column in self.columns(config) if column.name == query.sort)
        asked = seek.Request(table_name(config), query.sort, column_type, query.desc, where, params, start, end)
        with self.cursor() as cur:
            numbers = seek.page_numbers(cur, asked)
        return None if numbers is None else self.rows_by_number(config, numbers)

    def direct_sorted_page(
        self, config: str, query: RecordsQuery, where: str, params: list[Any], start: int, total: int
    ) -> list[dict[str, Any]]:
        """A page near the start or the end of a sort, as a small top-N (the far end in the reverse order)."""
        assert query.sort is not None
        end = min(start + query.size, total)
        from_end = start >= DIRECT_SORT_ROWS
        order = order_by(query.sort, query.desc, reverse=from_end)
        rows = self.query(
            f"SELECT rowid AS _row, * FROM {table_name(config)}{where} ORDER BY {order} LIMIT ? OFFSET ?",
            [*params, end - start, total - end if from_end else start],
        )
        return rows[::-1] if from_end else rows

    def rows_by_number(self, config: str, numbers: list[int]) -> list[dict[str, Any]]:
        """The records with these rowids, in the order given."""
        if not numbers:
            return []
        found = self.query(
            f"SELECT t.rowid AS _row, t.* FROM {table_name(config)} t SEMI JOIN "
            "(SELECT unnest(?::BIGINT[]) AS id) n ON t.rowid = n.id",
            [numbers],
        )
        by_number = {row["_row"]: row for row in found}
        return [by_number[number] for number in numbers if number in by_number]

    def where(
        self, config: str, query: RecordsQuery, finder: search.Search | None, with_text: bool = True
    ) -> tuple[str, list[Any]]:
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
                params.append(self.filter_value(column, raw))
        if query.sort is not None and (query.sort not in columns or not columns[query.sort].scalar):
            raise QueryError(f"{config} has no field {query.sort!r} to sort by")
        if query.text:
            try:
                search.match_expression(query.text)
            except search.SearchError as exc:
                raise QueryError(str(exc)) from None
        if query.text and with_text:
            clause, values = self.text_clause(finder, query.text)
            clauses.append(clause)
            params += values
        return (" WHERE " + " AND ".join(clauses) if clauses else ""), params

    def text_clause(self, finder: search.Search | None, text: str) -> tuple[str, list[Any]]:
        """The search as a condition: the records the word index (whole, or as far as it is built) finds."""
        if finder is None:  # no text field, or a word index not begun: nothing found (the page says which)
            return "false", []
        total = finder.count(text)
        if total > MAX_SEARCH_MATCHES_COMBINED:
            raise QueryError(
                f"{total:,} records hold these words, too many to filter or sort them too; add a word to the search"
            )
        return "rowid IN (SELECT unnest(?::BIGINT[]))", [finder.numbers(text)]

    def filter_value(self, column: Column, raw: str) -> Any:
        """`raw` as a value of the column's type, or a QueryError saying what the field holds."""
        if column.type == "VARCHAR":
            return raw
        if column.type == "BOOLEAN":
            if raw not in ("true", "false"):
                raise QueryError(f"{column.name} is true or false, not {raw[:40]!r}")
            return raw == "true"
        with self.cursor() as cur:
            value = self.scalar(cur, f"SELECT TRY_CAST(? AS {column.type})", [raw])
        if value is None:
            raise QueryError(f"{column.name} holds values of type {column.type.lower()}, not {raw[:40]!r}")
        return value

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
        """Stop the builders and the pages being served (each DuckDB statement is interrupted, again until every
        builder has ended and every page has given its connection back: one may be between two statements),
        then close the database and let the store remove what must not outlive the viewer. Runs on Ctrl-C and on
        every other end of `gen view`."""
        self.stopping.set()
        try:
            deadline = time.monotonic() + CLOSE_TIMEOUT_S
            while time.monotonic() < deadline:
                with self.lock:
                    threads = [thread for thread in (self.thread, *self.helpers) if thread.is_alive()]
                    cursors = list(self.open_cursors)
                if not threads and not cursors:
                    break
                for cur in cursors:  # each cursor is a connection of its own: interrupt each
                    with contextlib.suppress(duckdb.Error):
                        cur.interrupt()
                if threads:
                    threads[0].join(timeout=0.1)
                else:
                    time.sleep(0.01)
            with self.lock:
                self.db.close()
        finally:
            self.store.close()


def first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "unknown error"
