"""Where labels run: an in-memory SQLite database holding only the persona table, behind an authorizer.

Every statement a model writes runs here, never anywhere else. The database is built from the schema's DDL
and the rows a pair starts from (both with the authorizer off), then the statements run one at a time with it
on. The authorizer allows writing (INSERT or UPDATE) and reading only the persona table of the main database,
and only functions on an allow-list of pure ones: DROP, DELETE, ATTACH, PRAGMA, CREATE, transactions, other
tables and anything that could reach the file system or depend on the clock or chance are refused. A
progress handler stops any statement that runs past its time limit, and SQLite itself refuses to build any
string or blob longer than MAX_VALUE_BYTES or to read a statement longer than MAX_STATEMENT_BYTES: a single
function call on a huge string (printf, replace, instr...) is one step the progress handler cannot interrupt,
so the size limit is what bounds its time and memory. A read-only mode (retrieval labels) allows SELECT and
reading only.

A table is handled as its rows: a list of {column: value} dicts in rowid order, the form records store (as
JSON) and the prompt shows.
"""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Row = dict[str, Any]
# A persona field is a few words; these leave room for any honest label and none for a memory bomb.
MAX_VALUE_BYTES = 100_000
MAX_STATEMENT_BYTES = 100_000

# Deterministic, file-free scalar and aggregate functions. random(), the date and time functions (they read the
# clock), load_extension() and everything else are refused, so replaying a label always gives the same table.
ALLOWED_FUNCTIONS = frozenset(
    {
        "abs",
        "coalesce",
        "concat",
        "concat_ws",
        "count",
        "group_concat",
        "char",
        "hex",
        "ifnull",
        "iif",
        "instr",
        "length",
        "like",
        "lower",
        "ltrim",
        "max",
        "min",
        "nullif",
        "printf",
        "format",
        "quote",
        "replace",
        "round",
        "rtrim",
        "substr",
        "substring",
        "sum",
        "total",
        "trim",
        "typeof",
        "upper",
        "glob",
    }
)

# Authorizer action codes by name, for refusal messages ("DROP TABLE persona", "ATTACH /tmp/x.db").
ACTIONS = [
    "ALTER_TABLE",
    "ANALYZE",
    "ATTACH",
    "CREATE_INDEX",
    "CREATE_TABLE",
    "CREATE_TEMP_INDEX",
    "CREATE_TEMP_TABLE",
    "CREATE_TEMP_TRIGGER",
    "CREATE_TEMP_VIEW",
    "CREATE_TRIGGER",
    "CREATE_VIEW",
    "CREATE_VTABLE",
    "DELETE",
    "DETACH",
    "DROP_INDEX",
    "DROP_TABLE",
    "DROP_TEMP_INDEX",
    "DROP_TEMP_TABLE",
    "DROP_TEMP_TRIGGER",
    "DROP_TEMP_VIEW",
    "DROP_TRIGGER",
    "DROP_VIEW",
    "DROP_VTABLE",
    "INSERT",
    "PRAGMA",
    "READ",
    "REINDEX",
    "RECURSIVE",
    "SAVEPOINT",
    "SELECT",
    "TRANSACTION",
    "UPDATE",
]
ACTION_NAMES = {getattr(sqlite3, f"SQLITE_{name}"): name for name in ACTIONS if hasattr(sqlite3, f"SQLITE_{name}")}


class SandboxError(Exception):
    """A statement that was refused (`code` "not allowed") or failed ("failed"); the message is meant for the
    model's correction round."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code, self.detail = code, detail


@dataclass(frozen=True)
class TableSchema:
    """The persona table: its DDL, name, columns and the column that says whose row it is."""

    ddl: str
    table: str
    columns: tuple[str, ...]
    speaker_column: str


class Sandbox:
    """One in-memory database holding `rows` of the persona table."""

    def __init__(
        self, schema: TableSchema, rows: Sequence[Row], time_limit_s: float, *, read_only: bool = False
    ) -> None:
        self.schema = schema
        self.time_limit_s = time_limit_s
        self.read_only = read_only
        self.denied: list[str] = []
        self.conn = sqlite3.connect(":memory:", isolation_level=None)
        self.conn.executescript(schema.ddl)
        load_rows(self.conn, schema, rows)
        self.conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        self.conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_STATEMENT_BYTES)
        self.conn.set_authorizer(self._authorize)
        self.deadline = 0.0
        self.conn.set_progress_handler(self._progress, 1000)

    def close(self) -> None:
        self.conn.close()

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def execute(self, statement: str) -> tuple[list[str], list[tuple]]:
        """Run one statement; the column names and rows it returns (a SELECT's). Raises SandboxError saying
        what went wrong."""
        self.denied = []
        self.deadline = time.monotonic() + self.time_limit_s
        try:
            cursor = self.conn.execute(statement)
            return [d[0] for d in cursor.description or ()], cursor.fetchall()
        except (sqlite3.Error, OverflowError, ValueError) as exc:  # ValueError: e.g. a NUL character
            if self.denied:
                raise SandboxError("not allowed", self.refusal()) from None
            if "interrupted" in str(exc):
                raise SandboxError("failed", f"it ran past the time limit of {self.time_limit_s:g} s") from None
            if any(word in str(exc) for word in ("too big", "too long", "too large")):
                limit = f"{MAX_VALUE_BYTES:,} bytes for a value, {MAX_STATEMENT_BYTES:,} for a statement"
                raise SandboxError("failed", f"it builds a value or is longer than the limit ({limit})") from None
            raise SandboxError("failed", f"SQLite says {exc}") from None
        finally:
            self.deadline = 0.0

    def rows(self) -> list[Row]:
        self.conn.set_authorizer(None)
        try:
            return read_rows(self.conn, self.schema)
        finally:
            self.conn.set_authorizer(self._authorize)

    def refusal(self) -> str:
        """The first refusal, said plainly: SQLite stops at the first one, and for DROP, CREATE and ALTER that is
        the write to its own schema table, before the action itself is asked about."""
        first = self.denied[0]
        if first.startswith(("writing the table sqlite_", "DELETE sqlite_")):
            return f"changing the schema (DROP, CREATE, ALTER) (only INSERT or UPDATE on {self.schema.table})"
        return first

    def _progress(self) -> int:
        return 1 if self.deadline and time.monotonic() > self.deadline else 0

    def _authorize(self, action: int, arg1: str | None, arg2: str | None, database: str | None, trigger: Any) -> int:
        reason = self._refusal(action, arg1, arg2, database)
        if reason is None:
            return sqlite3.SQLITE_OK
        self.denied.append(reason)
        return sqlite3.SQLITE_DENY

    def _refusal(self, action: int, arg1: str | None, arg2: str | None, database: str | None) -> str | None:
        """Why an action is refused, or None to allow it."""
        table = self.schema.table.lower()
        if action == sqlite3.SQLITE_FUNCTION:
            name = (arg2 or "").lower()
            return None if name in ALLOWED_FUNCTIONS else f"the function {name}()"
        if action == sqlite3.SQLITE_SELECT:
            return None
        if action == sqlite3.SQLITE_READ:
            if (arg1 or "").lower() == table and database in (None, "main"):
                return None
            return f"reading the table {arg1}"
        if action in (sqlite3.SQLITE_INSERT, sqlite3.SQLITE_UPDATE) and not self.read_only:
            if (arg1 or "").lower() == table and database in (None, "main"):
                return None
            return f"writing the table {arg1}"
        what = ACTION_NAMES.get(action, f"action {action}").replace("_", " ")
        target = f" {arg1}" if arg1 else ""
        return f"{what}{target} (only {'SELECT' if self.read_only else 'INSERT or UPDATE'} on {self.schema.table})"


def load_rows(conn: sqlite3.Connection, schema: TableSchema, rows: Sequence[Row]) -> None:
    for row in rows:
        names = list(row)
        columns = ", ".join(quote_identifier(n) for n in names)
        marks = ", ".join("?" for _ in names)
        conn.execute(
            f"INSERT INTO {quote_identifier(schema.table)} ({columns}) VALUES ({marks})", [row[n] for n in names]
        )


def read_rows(conn: sqlite3.Connection, schema: TableSchema) -> list[Row]:
    cursor = conn.execute(f"SELECT * FROM {quote_identifier(schema.table)} ORDER BY rowid")
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, values)) for values in cursor.fetchall()]


def quote_identifier(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def seeded_rows(schema: TableSchema, speakers: Sequence[str], seed: bool) -> list[Row]:
    """The table an episode starts from: one row per speaker with only the speaker column set (or empty)."""
    conn = sqlite3.connect(":memory:")
    try:
        conn.executescript(schema.ddl)
        if seed:
            load_rows(conn, schema, [{schema.speaker_column: speaker} for speaker in speakers])
        return read_rows(conn, schema)
    finally:
        conn.close()


def dump(rows: Sequence[Row]) -> str:
    """A table as records store it: JSON, columns in table order, no spaces to spare."""
    return json.dumps(list(rows), ensure_ascii=False, separators=(",", ":"))


def undump(text: str) -> list[Row]:
    rows = json.loads(text)
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise ValueError("a table is a JSON list of row objects")
    return rows
