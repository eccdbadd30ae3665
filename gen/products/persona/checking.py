"""The validator of persona_sql: one episode's records re-derived from its personas and re-executed.

It does not trust what the build kept: the lines are checked against the personas by their properties (every
fact once, each persona in order, speakers alternating while both have facts left); every pair's table_before
must be the previous pair's table_after (the seeded table for the first); every stored label is parsed again
with sqlglot and replayed statement by statement in a fresh sandbox on table_before, which must give exactly
table_after, with the other speaker's rows untouched and the target's rows changed; a rejected pair must have no
statements and leave the table as it was; the episode record must agree with its pairs, and a retrieval label
is run again on the final table.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlglot import exp
from sqlglot.errors import SqlglotError

from gen.conversation import Conversation
from gen.products.checks import Checks
from gen.products.persona import dialogue
from gen.products.persona.labels import parse_sql
from gen.products.persona.options import PersonaSQLOptions as Options
from gen.products.persona.sandbox import Row, Sandbox, SandboxError, TableSchema, dump, seeded_rows, undump

Record = dict[str, Any]


@dataclass(frozen=True)
class Expected:
    """What every record of the run must agree with: the table's schema and its template id, the options, and
    the endpoint's model (None when the recipe no longer names it)."""

    schema: TableSchema
    options: Options
    schema_id: str
    model: str | None


def check_episode(
    conversation: Conversation, pairs: Sequence[Record], episodes: Sequence[Record], expected: Expected, checks: Checks
) -> None:
    where, options = conversation.conversation_id, expected.options
    if not pairs and not episodes:  # an episode past max_episodes is left out whole
        checks.check("an episode is left out only past max_episodes", options.max_episodes is not None, where)
        return
    if not checks.check("one episode record per episode", len(episodes) == 1, f"{where}: {len(episodes)}"):
        return
    facts = dialogue.personas(conversation, options.personas)
    lines = [(line["speaker"], line["text"]) for line in episodes[0]["lines"]]
    check_lines(lines, conversation.speakers, facts, checks, where)
    table = dump(seeded_rows(expected.schema, conversation.speakers, options.seed_rows))
    checks.check("one pair per consecutive pair of lines", len(pairs) == max(0, len(lines) - 1), where)
    for index, row in enumerate(pairs):
        table = check_pair(row, index, lines, table, expected, checks)
    check_episode_record(episodes[0], pairs, facts, conversation, table, expected, checks)


def check_lines(
    lines: list[tuple[str, str]], speakers: tuple[str, str], facts: dict[str, list[str]], checks: Checks, where: str
) -> None:
    for speaker in speakers:
        own = [text for who, text in lines if who == speaker]
        checks.check("each persona's facts appear once, in order", own == facts[speaker], f"{where}: {speaker}")
    both = 2 * min(len(facts[s]) for s in speakers)
    expected_speakers = [speakers[i % 2] for i in range(both)]
    checks.check(
        "lines alternate from the first speaker while both have facts",
        [who for who, _ in lines[:both]] == expected_speakers and len(lines) == sum(map(len, facts.values())),
        where,
    )


def check_pair(
    row: Record,
    index: int,
    lines: list[tuple[str, str]],
    table: str,
    expected: Expected,
    checks: Checks,
) -> str:
    """Check one pair record; returns the table the next pair must start from (this record's table_after)."""
    where = f"{row['episode_id']} pair {index}"
    schema_id, model = expected.schema_id, expected.model
    checks.check("pairs are in order", row["pair_index"] == index, where)
    if index + 1 < len(lines):
        turns = [(t["speaker"], t["text"]) for t in row["turns"]]
        checks.check("turns are lines k and k+1", turns == [lines[index], lines[index + 1]], where)
        checks.check("the target is the second line's speaker", row["target_speaker"] == lines[index + 1][0], where)
    checks.check("table_before is the previous table_after", same_table(row["table_before"], table), where)
    checks.check("schema_ddl_id is the schema's", row["schema_ddl_id"] == schema_id, where)
    checks.check("model is the endpoint's", model is None or row["model"] == model, where)
    if row["label_status"] == "rejected":
        checks.check(
            "a rejected pair stores nothing and says why",
            row["label_sql"] == []
            and same_table(row["table_after"], row["table_before"])
            and bool(row["reject_reason"]),
            where,
        )
    elif checks.check("label_status is stored or rejected", row["label_status"] == "stored", where):
        check_label(row, expected.schema, expected.options, checks, where)
    return row["table_after"]


def check_label(row: Record, schema: TableSchema, options: Options, checks: Checks, where: str) -> None:
    statements = row["label_sql"]
    checks.check("a stored label has statements", bool(statements), where)
    checks.check(
        "every statement parses as one INSERT or UPDATE of the persona table",
        all(is_write_of(statement, schema.table) for statement in statements),
        where,
    )
    before = undump(row["table_before"])
    try:
        replayed = replay(statements, schema, before, options.statement_time_limit_s)
    except SandboxError as exc:
        checks.check("the label replays in the sandbox", False, f"{where}: {exc}")
        return
    checks.check("replaying the label gives table_after", same_table(dump(replayed), row["table_after"]), where)
    target = row["target_speaker"]
    column = schema.speaker_column
    checks.check(
        "rows of other speakers are unchanged",
        rows_except(before, column, target) == rows_except(replayed, column, target),
        where,
    )
    checks.check(
        "the target speaker's rows changed", rows_of(before, column, target) != rows_of(replayed, column, target), where
    )


def is_write_of(statement: str, table: str) -> bool:
    try:
        parsed = parse_sql(statement)
    except SqlglotError:
        return False
    if len(parsed) != 1 or not isinstance(parsed[0], exp.Insert | exp.Update):
        return False
    written = parsed[0].find(exp.Table)
    return written is not None and written.name.lower() == table.lower()


def replay(statements: Sequence[str], schema: TableSchema, rows: list[Row], time_limit_s: float) -> list[Row]:
    with Sandbox(schema, rows, time_limit_s) as sandbox:
        for statement in statements:
            sandbox.execute(statement)
        return sandbox.rows()


def rows_of(rows: list[Row], column: str, speaker: str) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows if r.get(column) == speaker)


def rows_except(rows: list[Row], column: str, speaker: str) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in rows if r.get(column) != speaker)


def same_table(a: str, b: str) -> bool:
    return undump(a) == undump(b)


def check_episode_record(
    record: Record,
    pairs: Sequence[Record],
    facts: dict[str, list[str]],
    conversation: Conversation,
    table: str,
    expected: Expected,
    checks: Checks,
) -> None:
    where, schema_id, model = record["episode_id"], expected.schema_id, expected.model
    checks.check("episode_id is the conversation's", where == conversation.conversation_id, where)
    personas = {p["speaker"]: p["facts"] for p in record["personas"]}
    checks.check("personas are the source's", personas == facts, where)
    checks.check("pairs counts the pair records", record["pairs"] == len(pairs), where)
    rejected = [p["pair_index"] for p in pairs if p["label_status"] == "rejected"]
    checks.check("rejected_pairs lists the rejected pairs", record["rejected_pairs"] == rejected, where)
    checks.check("final_table is the last table_after", same_table(record["final_table"], table), where)
    checks.check("schema_ddl_id is the schema's", record["schema_ddl_id"] == schema_id, where)
    checks.check("model is the endpoint's", model is None or record["model"] == model, where)
    asked = conversation.metadata.get("self_instruct") or {}
    checks.check(
        "memory question and gold answer are the source's",
        record["memory_question"] == asked.get("question") and record["gold_answer"] == asked.get("answer"),
        where,
    )
    wanted = expected.options.retrieval_labels and bool(asked.get("question"))
    status = record["retrieval_status"]
    checks.check(
        "a retrieval label exactly where one was asked for",
        status in ("stored", "rejected") if wanted else status == "none",
        f"{where}: {status}",
    )
    if status == "stored":
        check_retrieval(record, expected.schema, expected.options, checks, where)


def check_retrieval(record: Record, schema: TableSchema, options: Options, checks: Checks, where: str) -> None:
    try:
        parsed = parse_sql(record["retrieval_sql"])
    except SqlglotError:
        parsed = []
    checks.check("the retrieval label is one SELECT", len(parsed) == 1 and isinstance(parsed[0], exp.Select), where)
    try:
        with Sandbox(schema, undump(record["final_table"]), options.statement_time_limit_s, read_only=True) as box:
            columns, rows = box.execute(record["retrieval_sql"])
    except SandboxError as exc:
        checks.check("the retrieval label runs read-only on the final table", False, f"{where}: {exc}")
        return
    retrieved = json.loads(record["retrieved"])
    checks.check(
        "rerunning the retrieval label returns what was recorded",
        retrieved == {"columns": columns, "rows": [list(r) for r in rows]},
        where,
    )
    fields = sum(value is not None for r in rows for value in r)
    low, high = options.retrieval_min_fields, options.retrieval_max_fields
    checks.check("retrieved_fields counts the non-null values returned", record["retrieved_fields"] == fields, where)
    checks.check(
        "the target range and whether it was met are recorded",
        (record["retrieval_target_min"], record["retrieval_target_max"], record["retrieval_in_target"])
        == (low, high, low <= fields <= high),
        where,
    )
