"""The records' tables as the viewer's index holds them, and what a page asks of them: each config's table name
and column types, the SQL that imports a config, the query a page is (its page, sort, filters and search), the
page that answers it, and the few rules every query follows (quoting, the first row of a page, the order of a
sort)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gen.view.folder import ConfigFiles

REJECTS = "(rejects)"  # the rejects' table, beside the configs
NONE_VALUE = "(none)"  # a filter value that matches a missing (null) field
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
    searched: int | None = None  # a search while the word index is built: the records it looked at (else all)


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


def first_row(query: RecordsQuery, total: int) -> int:
    """The first row of the page asked for; a page past the last one is refused (a big number costs nothing)."""
    pages = max(1, -(-total // query.size))
    if query.page > pages:
        raise QueryError(
            f"these records fill {pages:,} page{'s' if pages > 1 else ''}; there is no page {query.page:,}"
        )
    return (query.page - 1) * query.size


def order_by(column: str, desc: bool, reverse: bool = False) -> str:
    """A sort by `column` with missing values last and ties in file order; `reverse` is that order backwards.
    ahead_of below must say the same: a change here is a change there."""
    if reverse:
        return f"{quoted(column)} {'ASC' if desc else 'DESC'} NULLS FIRST, rowid DESC"
    return f"{quoted(column)} {'DESC' if desc else 'ASC'} NULLS LAST, rowid"


def ahead_of(column: str, desc: bool, value_sql: str) -> str:
    """The condition "a record's `column` comes before `value_sql` in order_by's order" (a record without a value
    never does: missing values are last); gen/view/seek.py finds unindexed pages with it."""
    return f"{quoted(column)} {'>' if desc else '<'} {value_sql}"
