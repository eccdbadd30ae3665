"""A page deep in a sort whose index is not built yet, found by counting rather than sorting.

A sort's own index (Index.sort_index) takes a second or more to build at 100 copies of locomo10, and a top-N
query for a page in the middle keeps a heap of half the table (seconds, and past DuckDB's memory cap). Here the
page is found in a bounded number of passes over the sorted field instead:

1. a sample of the table's blocks (DuckDB's system sampling: a few milliseconds) gives two values of the field
   that lie, in the sort's order, a little before and a little after the page asked for;
2. one pass counts the matching records before the first value and, for the records strictly between the two,
   lists their numbers in the sort's order (a band of a few percent of the matches, sorted by DuckDB);
3. the page is then a slice of that band, plus, where the page reaches them, the records holding exactly one of
   the two values (in file order: ties are broken by record number) and those without a value (always last).

The counts are exact, so a sample that missed (the page is not between the two values) is noticed and a wider
one tried; if that misses too, None says so and the caller waits for the sort's index. Values go back to DuckDB
as parameters of the field's own type and are never compared in Python, so the order is DuckDB's, the one every
sorted page follows (gen/view/tables.py: order_by and ahead_of)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import duckdb

from gen.view.tables import ahead_of, order_by, quoted

SAMPLE_ROWS = 50_000  # about this many matches in a sample: its quantiles are within 0.5% of the true ones
MARGINS = (0.005, 0.04)  # how far past the page, as a share of the matches, each try sets its two values


@dataclass
class Request:
    """What a sorted page asks of one config's table (where: "" or " WHERE ..." with its params)."""

    table: str
    column: str
    type: str  # the column's DuckDB type: values are bound back as this type
    desc: bool
    where: str
    params: list[Any]
    start: int
    end: int


def page_numbers(cur: duckdb.DuckDBPyConnection, asked: Request) -> list[int] | None:
    """The record numbers of the page (ranks start to end of the sort), or None if the samples missed it."""
    valued = scalar(cur, f"SELECT count({quoted(asked.column)}) FROM {asked.table}{asked.where}", asked.params)
    numbers: list[int] = []
    if asked.start < valued:
        found = None
        for margin in MARGINS:
            found = valued_page(cur, asked, valued, margin)
            if found is not None:
                break
        if found is None:
            return None
        numbers = found
    if asked.end > valued:  # the page reaches the records without a value: last, in file order
        numbers += in_file_order(
            cur, asked, f"{quoted(asked.column)} IS NULL", [], max(0, asked.start - valued), asked.end - valued
        )
    return numbers


def valued_page(cur: duckdb.DuckDBPyConnection, asked: Request, valued: int, margin: float) -> list[int] | None:
    """The part of the page among the records that have a value (ranks < valued), or None if the two values
    drawn from the sample do not enclose it."""
    start, end = asked.start, min(asked.end, valued)
    bounds = sample_bounds(cur, asked, valued, start / valued - margin, end / valued + margin)
    if bounds is None:
        return None
    low, high, same = bounds  # low or high None: that side is open (the page is near that end of the sort)
    before, at_low, at_high, between, band = count_and_band(cur, asked, low, high)
    if same:  # both values are one: the page lies among the records holding it, or the sample missed
        at_high = 0
    band_from = before + at_low  # ranks: low's records from `before`, then the band, then high's records
    high_from = band_from + between
    if before > start or (high_from + at_high if high is not None else valued) < end:
        return None  # the page starts before low's records or ends after high's
    column, value = quoted(asked.column), f"CAST(? AS {asked.type})"
    numbers: list[int] = []
    if start < band_from:  # the page begins among the records holding `low` (ties: in file order)
        numbers += in_file_order(cur, asked, f"{column} = {value}", [low], start - before, min(end, band_from) - before)
    numbers += band[max(0, start - band_from) : max(0, end - band_from)]
    if high is not None and end > high_from:  # the page ends among the records holding `high`
        numbers += in_file_order(cur, asked, f"{column} = {value}", [high], max(0, start - high_from), end - high_from)
    return numbers


def count_and_band(
    cur: duckdb.DuckDBPyConnection, asked: Request, low: Any, high: Any
) -> tuple[int, int, int, int, list[int]]:
    """In one pass over the matches: how many come before `low` in the sort, how many hold `low`, how many
    hold `high`, how many lie strictly between the two, and those (the band) in the sort's order. An open side
    (None) counts nothing and bounds nothing."""
    column, value = quoted(asked.column), f"CAST(? AS {asked.type})"
    inside = [f"{column} IS NOT NULL"]
    inside_params: list[Any] = []
    if low is not None:
        inside.append(f"NOT ({ahead_of(asked.column, asked.desc, value)}) AND {column} <> {value}")
        inside_params += [low, low]
    if high is not None:
        inside.append(ahead_of(asked.column, asked.desc, value))
        inside_params += [high]
    between = " AND ".join(inside)
    row = cur.execute(
        f"SELECT count(*) FILTER ({ahead_of(asked.column, asked.desc, value)}), count(*) FILTER ({column} = {value}), "
        f"count(*) FILTER ({column} = {value}), count(*) FILTER ({between}), "
        f"list(rowid ORDER BY {order_by(asked.column, asked.desc)}) FILTER ({between}) "
        f"FROM {asked.table}{asked.where}",
        [low, low, high, *inside_params, *inside_params, *asked.params],
    ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1]), int(row[2]), int(row[3]), list(row[4] or [])


def sample_bounds(
    cur: duckdb.DuckDBPyConnection, asked: Request, valued: int, first_q: float, last_q: float
) -> tuple[Any, Any, bool] | None:
    """Two values of the field, at shares first_q and last_q of the sort's order among a sample of the matches
    (None for a share outside 0-1: that side stays open), and whether DuckDB holds them equal; None if the
    sample holds no match with a value. The sample is every k-th record of the file, k a prime: spread over the
    whole file, where DuckDB's sampling of whole blocks of 2,048 neighbours missed by far on a field that follows
    the file's order (the time a question is asked); cheap, as DuckDB reads the field of those records only (a
    hash of the record number instead took 2-3 times as long over text); and k prime, so that data repeating
    every few records cannot line up with it. A sample that found no match is followed by a look at them all."""
    wanted = [min(max(q, 0.0), 1.0) for q in (first_q, last_q)]
    if asked.desc:  # quantiles count from the smallest value
        wanted = [1.0 - q for q in wanted]
    column, sampled = quoted(asked.column), also(asked.where, "rowid % CAST(? AS BIGINT) = 0")
    row = None
    for every in dict.fromkeys((prime_at_least(valued // SAMPLE_ROWS), 1)):  # all, after a sample that found none
        row = cur.execute(
            f"SELECT q[1], q[2], q[1] IS NOT DISTINCT FROM q[2], n FROM (SELECT quantile_disc({column}, "
            f"?::DOUBLE[]) AS q, count({column}) AS n FROM {asked.table}{sampled})",
            [wanted, *asked.params, every],
        ).fetchone()
        if row is not None and row[3]:
            break
    if row is None or not row[3]:
        return None
    low, high = (row[0] if first_q > 0 else None), (row[1] if last_q < 1 else None)
    return low, high, bool(row[2]) and low is not None and high is not None


def prime_at_least(number: int) -> int:
    """The smallest prime >= number (1 for number <= 1: the whole table)."""
    if number <= 1:
        return 1
    found = number
    while any(found % divisor == 0 for divisor in range(2, int(found**0.5) + 1)):
        found += 1
    return found


def in_file_order(
    cur: duckdb.DuckDBPyConnection, asked: Request, condition: str, values: list[Any], start: int, end: int
) -> list[int]:
    """Numbers of the matches that also meet `condition`, ranks start to end among them in file order (DuckDB
    streams a filter in insertion order: no sort)."""
    if end <= start:
        return []
    found = cur.execute(
        f"SELECT rowid FROM {asked.table}{also(asked.where, condition)} LIMIT ? OFFSET ?",
        [*asked.params, *values, end - start, start],
    ).fetchall()
    return [int(number) for (number,) in found]


def also(where: str, condition: str) -> str:
    """`where` (its parameters first) with `condition` (its parameters after) required too."""
    return f"{where} AND ({condition})" if where else f" WHERE {condition}"


def scalar(cur: duckdb.DuckDBPyConnection, sql: str, params: list[Any]) -> int:
    row = cur.execute(sql, params).fetchone()
    return int(row[0]) if row and row[0] is not None else 0
