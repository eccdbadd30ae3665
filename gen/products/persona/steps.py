"""persona_sql's LLM steps: the storage label of each pair (the table as the earlier labels left it, and the
pair's second line → SQL that stores its facts), and the retrieval label of an episode's memory question. Both are
checked while they are parsed (labels.py), so a failing reply gets the engine's correction round."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from gen.llm.step import CheckedStep
from gen.llm.task import Task, render_messages
from gen.products.base import Record, Unit
from gen.products.persona import dialogue
from gen.products.persona.options import PersonaSQLOptions as Options
from gen.products.persona.sandbox import Row, TableSchema, seeded_rows
from gen.templating import Templates

if TYPE_CHECKING:  # labels.py imports sqlglot: only a run with persona_sql pays for it (memory, startup)
    from gen.products.persona import labels

NAME = "persona_sql"
LABEL_PROMPT = "prompts/persona_sql_label.j2"
RETRIEVE_PROMPT = "prompts/persona_sql_retrieve.j2"
RETRIEVE_STEP = f"{NAME}/retrieve"


# --- episodes and items ---------------------------------------------------------------------------------


@dataclass
class Episode:
    """One episode being labelled: its lines, the table as the labels so far left it, and its pair records."""

    episode_id: str
    unit: Unit
    facts: dict[str, list[str]]
    lines: list[dialogue.Line]
    rows: list[Row]
    records: list[Record] = field(default_factory=list)
    retrieval: dict[str, Any] = field(default_factory=dict)

    @property
    def speakers(self) -> tuple[str, str]:
        return self.unit.conversation.speakers

    @property
    def question(self) -> tuple[str | None, str | None]:
        found = self.unit.conversation.metadata.get("self_instruct") or {}
        return found.get("question"), found.get("answer")


@dataclass(frozen=True)
class PairItem:
    """One pair to label, with the table it starts from."""

    item_id: str
    episode: Episode
    index: int
    first: dialogue.Line
    second: dialogue.Line
    rows: tuple[Row, ...]

    @property
    def other(self) -> str:
        return next(s for s in self.episode.speakers if s != self.second.speaker)


def load_schema(options: Options, templates: Templates) -> TableSchema:
    from gen.products.persona import labels

    ddl = templates.render(options.schema_template)
    return labels.load_schema(ddl, options.speaker_column, options.schema_template)


def episode_of(unit: Unit, options: Options, schema: TableSchema) -> Episode:
    conversation = unit.conversation
    facts = dialogue.personas(conversation, options.personas)
    lines = dialogue.pseudo_dialogue(conversation.speakers, facts)
    rows = seeded_rows(schema, conversation.speakers, options.seed_rows)
    return Episode(conversation.conversation_id, unit, facts, lines, rows)


def item_at(episode: Episode, index: int) -> PairItem:
    first, second = episode.lines[index], episode.lines[index + 1]
    return PairItem(f"{episode.episode_id}/pair-{index:03d}", episode, index, first, second, tuple(episode.rows))


def prompt_rows(rows: Sequence[Row]) -> list[str]:
    """Rows as the prompt shows them: empty columns left out (the DDL lists them all), so prompts stay short."""
    return [json.dumps({k: v for k, v in row.items() if v is not None}, ensure_ascii=False) for row in rows]


def label_task(item: PairItem, options: Options, schema: TableSchema, templates: Templates) -> Task:
    from gen.products.persona import labels

    speaker = item.second.speaker

    def parse(text: str) -> labels.Stored:  # every check runs here, so a failure gets the correction round
        return labels.store(text, schema, item.rows, speaker, options.statement_time_limit_s, options.max_statements)

    return Task(
        item_id=item.item_id,
        endpoint=options.endpoint,
        parser=parse,
        messages=render_messages(
            LABEL_PROMPT,
            templates,
            speaker=speaker,
            other=item.other,
            line=item.second.text,
            table=schema.table,
            speaker_column=schema.speaker_column,
            schema=schema.ddl,
            rows=prompt_rows(item.rows),
            max_statements=options.max_statements,
        ),
    )


def retrieve_task(episode: Episode, options: Options, schema: TableSchema, templates: Templates) -> Task:
    from gen.products.persona import labels

    rows = list(episode.rows)

    def parse(text: str) -> labels.Retrieved:
        return labels.retrieve(text, schema, rows, options.statement_time_limit_s)

    return Task(
        item_id=f"{episode.episode_id}/retrieval",
        endpoint=options.endpoint,
        parser=parse,
        messages=render_messages(
            RETRIEVE_PROMPT,
            templates,
            question=episode.question[0],
            table=schema.table,
            schema=schema.ddl,
            rows=prompt_rows(rows),
            min_fields=options.retrieval_min_fields,
            max_fields=options.retrieval_max_fields,
        ),
    )


def label_step(options: Options, schema: TableSchema, templates: Templates) -> CheckedStep[PairItem]:
    return CheckedStep(
        name=NAME,
        task=lambda item, sample: label_task(item, options, schema, templates),
        check=lambda item, value: (),  # the parser has run every check, so a failure got the correction round
        item_id=lambda item: item.item_id,
        describe=lambda value: {"statements": value.statements},
    )


def retrieve_step(options: Options, schema: TableSchema, templates: Templates) -> CheckedStep[Episode]:
    return CheckedStep(
        name=RETRIEVE_STEP,
        task=lambda episode, sample: retrieve_task(episode, options, schema, templates),
        check=lambda episode, value: (),  # as for label_step
        item_id=retrieval_id,
        describe=lambda value: {"statement": value.statement},
    )


def retrieval_id(episode: Episode) -> str:
    return f"{episode.episode_id}/retrieval"
