"""persona_sql's recipe options (besides `endpoint` and `max_reject_rate`, which every LLM product has)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gen.products.llm_options import LLMOptions


class PersonaSQLOptions(LLMOptions):
    schema_template: str = Field(
        "persona/schema.sql.j2",
        alias="schema",
        description="the table's DDL: a template under templates/ (or the recipe's templates_dir) holding one "
        "CREATE TABLE",
    )
    speaker_column: str = Field("speaker", min_length=1, description="the column that says whose row it is")
    seed_rows: bool = Field(True, description="start each episode with one row per speaker, only this column set")
    personas: Literal["personas", "init_personas"] = Field(
        "personas",
        description="which personas to interleave: the source's (current) ones, or the initial PersonaChat ones "
        "of ParlAI MSC session files",
    )
    max_episodes: int | None = Field(None, ge=1, description="label at most this many episodes, in source order")
    max_statements: int = Field(6, ge=1, le=50, description="statements a storage label may hold")
    statement_time_limit_s: float = Field(1.0, gt=0, le=60, description="each statement is stopped after this")
    retrieval_labels: bool = Field(
        False, description="a SELECT for each episode's memory question (MSC-Self-Instruct) over the final table"
    )
    retrieval_min_fields: int = Field(1, ge=0, description="the low end of the target range of values retrieved")
    retrieval_max_fields: int = Field(3, ge=1, description="the high end of the target range of values retrieved")

    @model_validator(mode="after")
    def _range(self) -> PersonaSQLOptions:
        if self.retrieval_min_fields > self.retrieval_max_fields:
            raise ValueError("retrieval_min_fields must not exceed retrieval_max_fields")
        return self
