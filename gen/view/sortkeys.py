"""Integer keys of a config's text fields, so that a text order's pages are found without reading its text.

Before its sort's index is built, a page of a text order was a top-N (near either end) or a seek
(gen/view/seek.py) over the text itself: at 100 copies of locomo10, decompressing and comparing 5 million texts
cost 180-530 ms a page. When a config is imported, one pass also writes, for each text field, an integer that
sorts as the text does, in a table of its own beside the config (row i is record i):

- "rank": the value's place among the field's distinct values, sorted by DuckDB itself (an ENUM made from
  them, dropped once the keys are written), for a field of at most RANK_MAX_VALUES distinct values. Equal keys
  are equal texts, so a page of the order is a page of the key's order, ties and all: the seek and the top-N
  run on the key unchanged.
- "prefix": the first 8 bytes of the value's UTF-8 text as a big-endian unsigned integer (zero-padded), for a
  field of more values (an ENUM of millions of values took a GB). DuckDB orders text by its UTF-8 bytes (no
  collation is set: Index.connect), so a text before another never has a larger key; records sharing a key
  are put in order by their text, and they are few where there are that many values.

Missing values have no key (NULL) and stay last. Every sorted page that has no filter or search and whose
sort has no index yet goes through page_numbers here, so each page is the one the sort's index gives."""

from __future__ import annotations

from dataclasses import dataclass

import duckdb

from gen.view import seek
from gen.view.tables import Column, order_by, quoted

RANK_MAX_VALUES = 300_000  # a text field with at most this many distinct values is keyed by rank, else by prefix
KEY_TYPES = {"rank": "BIGINT", "prefix": "UBIGINT"}


def keys_table(config: str) -> str:
    return quoted(f"text keys {config}")


def build(cur: duckdb.DuckDBPyConnection, config: str, table: str, columns: list[Column]) -> dict[str, str]:
    """Write the keys table of `config` (its `table`), one key per text field; field → "rank" or "prefix"."""
    texts = [column.name for column in columns if column.scalar and column.type == "VARCHAR"]
    if not texts:
        return {}
    counts = cur.execute(
        "SELECT " + ", ".join(f"approx_count_distinct({quoted(name)})" for name in texts) + f" FROM {table}"
    ).fetchone()
    kinds = {name: "rank" if (count or 0) <= RANK_MAX_VALUES else "prefix" for name, count in zip(texts, counts or ())}
    enums = {name: quoted(f"sort key {config} {name}") for name, kind in kinds.items() if kind == "rank"}
    try:
        for name, enum in enums.items():
            cur.execute(f"DROP TYPE IF EXISTS {enum}")
            cur.execute(
                f"CREATE TYPE {enum} AS ENUM (SELECT DISTINCT {quoted(name)} FROM {table} "
                f"WHERE {quoted(name)} IS NOT NULL ORDER BY 1)"
            )
        keys = ", ".join(f"{key_expression(name, kinds[name], enums.get(name))} AS {quoted(name)}" for name in texts)
        cur.execute(f"CREATE OR REPLACE TABLE {keys_table(config)} AS SELECT {keys} FROM {table}")
    finally:
        for enum in enums.values():
            cur.execute(f"DROP TYPE IF EXISTS {enum}")
    return kinds


def key_expression(name: str, kind: str, enum: str | None) -> str:
    if kind == "rank":
        return f"CAST(enum_code(CAST({quoted(name)} AS {enum})) AS BIGINT)"
    hexed = f"left(hex(left({quoted(name)}, 8)), 16)"  # 8 characters hold at least 8 bytes (or the whole text)
    return f"CAST('0x' || rpad({hexed}, 16, '0') AS UBIGINT)"


@dataclass
class Keyed:
    """A sorted page asked of a config whose sort field has a key (ranks start to end of the sort)."""

    config: str
    table: str  # the config's table
    column: str
    kind: str  # "rank" or "prefix"
    desc: bool
    start: int
    end: int


def page_numbers(cur: duckdb.DuckDBPyConnection, asked: Keyed, direct_rows: int) -> list[int] | None:
    """The record numbers of the page: those at its ranks in the key's order (a top-N over the keys when the
    page is within `direct_rows` of either end, else a seek), then, for prefix keys, put in the text's order;
    None if the seek's samples missed the page."""
    numbers = in_key_order(cur, asked, direct_rows)
    if numbers is None or asked.kind == "rank" or not numbers:
        return numbers
    return in_text_order(cur, asked, numbers)


def in_key_order(cur: duckdb.DuckDBPyConnection, asked: Keyed, direct_rows: int) -> list[int] | None:
    table, column = keys_table(asked.config), asked.column
    row = cur.execute(f"SELECT count(*) FROM {table}").fetchone()
    total = int(row[0]) if row else 0
    start, end = asked.start, asked.end
    if start < direct_rows or total - end < direct_rows:
        from_end = start >= direct_rows  # the far end: a top-N in the reverse order
        found = cur.execute(
            f"SELECT rowid FROM {table} ORDER BY {order_by(column, asked.desc, reverse=from_end)} LIMIT ? OFFSET ?",
            [end - start, total - end if from_end else start],
        ).fetchall()
        ranked = [int(number) for (number,) in found]
        return ranked[::-1] if from_end else ranked
    return seek.page_numbers(cur, seek.Request(table, column, KEY_TYPES[asked.kind], asked.desc, "", [], start, end))


def in_text_order(cur: duckdb.DuckDBPyConnection, asked: Keyed, numbers: list[int]) -> list[int]:
    """`numbers` (ranks start to end in the order of prefix keys, then record number) as the text orders them:
    the records whose key lies between the page's first and last keys are exactly those ranked from `before`
    (the records with a key ahead of the first) in both orders, so the page is a slice of them sorted by text."""
    keys, column = keys_table(asked.config), quoted(asked.column)
    found = dict(
        cur.execute(
            f"SELECT rowid, {column} FROM {keys} WHERE rowid IN (SELECT unnest(?::BIGINT[]))", [numbers]
        ).fetchall()
    )
    valued = [number for number in numbers if found.get(number) is not None]  # missing values come after, as given
    if not valued:
        return numbers
    first, last = found[valued[0]], found[valued[-1]]
    low, high = (last, first) if asked.desc else (first, last)
    row = cur.execute(  # one pass over the keys: how many come before the page's first key, and the group
        f"SELECT count(*) FILTER ({column} {'>' if asked.desc else '<'} ?), "
        f"list(rowid) FILTER ({column} BETWEEN ? AND ?) FROM {keys}",
        [first, low, high],
    ).fetchone()
    assert row is not None
    before, in_range = int(row[0]), [int(number) for number in row[1] or []]
    group = [  # their texts are read for these records only (DuckDB reads the records a list of numbers names)
        int(number)
        for (number,) in cur.execute(
            f"SELECT t.rowid FROM {asked.table} t SEMI JOIN (SELECT unnest(?::BIGINT[]) AS id) n ON t.rowid = n.id "
            f"ORDER BY {order_by(asked.column, asked.desc)}",
            [in_range],
        ).fetchall()
    ]
    return group[asked.start - before : asked.start - before + len(valued)] + numbers[len(valued) :]
