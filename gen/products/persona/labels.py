"""Storage and retrieval labels: the model's SQL, parsed with sqlglot, run in the sandbox and checked.

`store` turns a reply into a :class:`Stored` label or raises :class:`LabelError` with a message written for the
model (the engine shows it in the one correction round): every statement parses; each is an INSERT or UPDATE
of the persona table; each runs on the pair's table without being refused or failing; afterwards the other
speaker's rows (and any row of no speaker) are as they were, and the target speaker's rows have changed.
`retrieve` does the same for a retrieval label: one SELECT over the final table, run read-only.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from gen.errors import GenError
from gen.products.persona.sandbox import Row, Sandbox, SandboxError, TableSchema

FENCE = re.compile(r"```[A-Za-z]*\s*\n?(.*?)```", re.S)
MAX_SHOWN = 160  # characters of a statement quoted back in an error


class LabelError(ValueError):
    """Why a label cannot be used: a short `code` (what the reject counts group by) and the detail; the message
    goes to the model in the correction round."""

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(f"{code}: {detail}")
        self.code, self.detail = code, detail


@dataclass(frozen=True)
class Stored:
    statements: list[str]  # as executed, one statement each
    rows_after: list[Row]


@dataclass(frozen=True)
class Retrieved:
    statement: str
    columns: list[str]
    rows: list[list[Any]]

    @property
    def fields(self) -> int:
        """Non-null values returned: the fields a retrieval would hand to the answering model."""
        return sum(value is not None for row in self.rows for value in row)


# --- the schema ----------------------------------------------------------------------------------------------


def load_schema(ddl: str, speaker_column: str, where: str) -> TableSchema:
    """The persona table of a DDL text: exactly one CREATE TABLE, with the speaker column among its columns."""
    try:
        parsed = parse_sql(ddl)
    except SqlglotError as exc:
        raise GenError(f"the schema does not parse: {parse_message(exc)}", file=where, field="schema") from None
    tables = [e for e in parsed if isinstance(e, exp.Create) and e.kind == "TABLE"]
    others = [e for e in parsed if not (isinstance(e, exp.Create) and e.kind == "TABLE")]
    if len(tables) != 1 or others:
        raise GenError(
            f"found {len(tables)} CREATE TABLE and {len(others)} other statements",
            file=where,
            field="schema",
            expected="exactly one CREATE TABLE statement (the persona table)",
        )
    create = tables[0]
    table = create.find(exp.Table)
    columns = tuple(c.name for c in create.find_all(exp.ColumnDef))
    if table is None or not columns:
        raise GenError("the CREATE TABLE names no table or no columns", file=where, field="schema")
    if speaker_column not in columns:
        raise GenError(
            f"the table {table.name} has no column {speaker_column!r}",
            file=where,
            field="speaker_column",
            expected=f"one of {', '.join(columns)}",
        )
    return TableSchema(ddl=ddl, table=table.name, columns=columns, speaker_column=speaker_column)


# --- storage labels -----------------------------------------------------------------------------------------


def sql_text(reply: str) -> str:
    """The SQL of a reply: the first fenced block if there is one, else the whole reply."""
    block = FENCE.search(reply)
    return (block.group(1) if block else reply).strip()


MAX_SQL_CHARS = 100_000  # as SQLite's own limit on a statement in the sandbox
MAX_NESTING = 64


def parse_message(exc: SqlglotError) -> str:
    errors = getattr(exc, "errors", None) or []
    if errors:
        first = errors[0]
        return f"{first.get('description')} (line {first.get('line')}, column {first.get('col')})"
    return re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).splitlines()[0]


def parse_sql(text: str) -> list[exp.Expression]:
    """The statements of a text (empty ones between semicolons dropped); a SqlglotError (ParseError,
    TokenError...) when it does not parse."""
    return [e for e in sqlglot.parse(text, read="sqlite") if isinstance(e, exp.Expression)]


def statements_of(reply: str, max_statements: int) -> list[exp.Expression]:
    text = sql_text(reply)
    if not text:
        raise LabelError("no SQL", "the reply holds no SQL")
    refuse_unbounded(text)
    try:
        parsed = parse_sql(text)
    except SqlglotError as exc:
        raise LabelError("syntax error", parse_message(exc)) from None
    except RecursionError:  # past the nesting check (sqlglot recurses on more than parentheses)
        raise LabelError("too deeply nested", "the SQL nests too deeply to read") from None
    if not parsed:
        raise LabelError("no SQL", "the reply holds no SQL statement")
    if len(parsed) > max_statements:
        raise LabelError("too many statements", f"{len(parsed)}; write at most {max_statements}")
    return parsed


def refuse_unbounded(text: str) -> None:
    """Before sqlglot reads the SQL (it recurses once per nesting level): at most MAX_SQL_CHARS characters and
    MAX_NESTING levels of parentheses."""
    if len(text) > MAX_SQL_CHARS:
        raise LabelError("too long", f"the SQL is {len(text):,} characters; write at most {MAX_SQL_CHARS:,}")
    level = deepest = 0
    for char in text:
        if char == "(":
            level += 1
            deepest = max(deepest, level)
        elif char == ")":
            level -= 1
    if deepest > MAX_NESTING:
        raise LabelError("too deeply nested", f"parentheses nest {deepest} deep; at most {MAX_NESTING}")


def shown(statement: str) -> str:
    return statement if len(statement) <= MAX_SHOWN else statement[: MAX_SHOWN - 1] + "…"


def write_target(statement: exp.Expression) -> str | None:
    """The table an INSERT or UPDATE writes; None for any other kind of statement."""
    if not isinstance(statement, exp.Insert | exp.Update):
        return None
    table = statement.this if isinstance(statement.this, exp.Table) else statement.this.find(exp.Table)
    return table.name if table is not None else None


def kind_of(statement: exp.Expression) -> str:
    return statement.key.upper()


def store(
    reply: str, schema: TableSchema, rows: Sequence[Row], speaker: str, time_limit_s: float, max_statements: int
) -> Stored:
    """The reply as a storage label for `speaker`, run on `rows`; LabelError says what is wrong with it."""
    parsed = statements_of(reply, max_statements)
    for number, statement in enumerate(parsed, start=1):
        target = write_target(statement)
        if target is None:
            raise LabelError(
                "not allowed",
                f"statement {number} is {kind_of(statement)}; use only INSERT or UPDATE on {schema.table}",
            )
        if target.lower() != schema.table.lower():
            raise LabelError("not allowed", f"statement {number} writes the table {target}; write only {schema.table}")
    try:
        executed = [statement.sql(dialect="sqlite") for statement in parsed]
    except SqlglotError as exc:  # parsed, but not something SQLite can say
        raise LabelError("syntax error", parse_message(exc)) from None
    except RecursionError:
        raise LabelError("too deeply nested", "the SQL nests too deeply to write back") from None
    with Sandbox(schema, rows, time_limit_s) as sandbox:
        for number, sql in enumerate(executed, start=1):
            try:
                sandbox.execute(sql)
            except SandboxError as exc:
                raise LabelError(exc.code, f"statement {number} ({shown(sql)}): {exc.detail}") from None
        after = sandbox.rows()
    check_rows(schema, rows, after, speaker)
    return Stored(executed, after)


def rows_of(
    schema: TableSchema, rows: Sequence[Row], speaker: str | None, *, others_of: tuple[str, ...] = ()
) -> Counter:
    """The rows of `speaker` (or, with `others_of`, of every speaker not in it), as a multiset."""
    column = schema.speaker_column
    chosen = [r for r in rows if (r.get(column) == speaker if speaker is not None else r.get(column) not in others_of)]
    return Counter(tuple(sorted(r.items())) for r in chosen)


def check_rows(schema: TableSchema, before: Sequence[Row], after: Sequence[Row], speaker: str) -> None:
    column = schema.speaker_column
    for row in after:
        bad = [name for name, value in row.items() if isinstance(value, bytes | bytearray)]
        if bad:
            raise LabelError("blob", f"the column {bad[0]} was given a blob; store text or numbers")
    speakers = {r.get(column) for r in (*before, *after)} - {speaker}
    for other in sorted(speakers, key=str):
        if rows_of(schema, before, other) != rows_of(schema, after, other):
            whose = f"{other}'s row" if other is not None else f"a row without a {column}"
            raise LabelError(
                "wrong speaker",
                f"{whose} changed; store facts only in the row of {speaker} ({column} = {sql_string(speaker)})",
            )
    if rows_of(schema, before, speaker) == rows_of(schema, after, speaker):
        raise LabelError(
            "nothing stored",
            f"the row of {speaker} did not change; the statements must store what the line says about {speaker}",
        )


def sql_string(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


# --- retrieval labels ---------------------------------------------------------------------------------------


def retrieve(reply: str, schema: TableSchema, rows: Sequence[Row], time_limit_s: float) -> Retrieved:
    """The reply as one SELECT over the final table, run read-only; LabelError says what is wrong with it."""
    parsed = statements_of(reply, 1)
    statement = parsed[0]
    if not isinstance(statement, exp.Select):
        raise LabelError("not allowed", f"the statement is {kind_of(statement)}; write one SELECT on {schema.table}")
    try:
        sql = statement.sql(dialect="sqlite")
    except SqlglotError as exc:
        raise LabelError("syntax error", parse_message(exc)) from None
    except RecursionError:
        raise LabelError("too deeply nested", "the SQL nests too deeply to write back") from None
    with Sandbox(schema, rows, time_limit_s, read_only=True) as sandbox:
        try:
            columns, result = sandbox.execute(sql)
        except SandboxError as exc:
            raise LabelError(exc.code, f"the SELECT ({shown(sql)}): {exc.detail}") from None
    values = [list(row) for row in result]
    if any(isinstance(v, bytes | bytearray) for row in values for v in row):
        raise LabelError("blob", "the SELECT returns a blob; select text or numbers")
    return Retrieved(sql, columns, values)
