"""quality_labels' recipe options: where the memories for the retrieval gate come from, and the settings the
method leaves open (docs/quality.md says why each default)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gen.products.quality.signals import Rules
from gen.recipe import StrictModel


class QualityLabelsOptions(StrictModel):
    dialogues: list[Literal["log", "teabag_session6", "persona_dialogues"]] = Field(
        ["log"],
        min_length=1,
        description="what to label: the log's responses, the sessions 6 TeaBag writes (teabag runs too), the "
        "persona pseudo-dialogues of persona_sql (persona_sql runs too)",
    )
    include_padding: bool = Field(
        False,
        description="count the padding session's turns in each dialogue's means and PC (they are labelled and "
        "marked `padding` either way; they are another conversation's words, so by default they are left out)",
    )
    memories: Literal["earlier_sessions", "personas", "retrieval_file"] = Field(
        "earlier_sessions",
        description="what the replying speaker could have remembered: the top memory_top_k responses of earlier "
        "sessions nearest the query, the speaker's persona facts (sources that have them), or what a memory "
        "system retrieved before each reply of the log (retrieval_file)",
    )
    retrieval_file: str | None = Field(
        None,
        description="with memories: retrieval_file, a JSONL file of {conversation_id, response_index, retrieved} "
        "per reply, as `gen baseline NAME RUN --turns` writes it (relative to the recipe's folder)",
    )
    memory_top_k: int = Field(5, ge=1, le=100, description="earlier-session responses retrieved per query")
    topic_threshold: float = Field(
        0.2, ge=-1.0, le=1.0, description="below this query/follow-up cosine, the topic changed"
    )
    topic_damping: float = Field(
        0.5, ge=0.0, le=1.0, description="the feedback reward is multiplied by this after a topic change"
    )
    strongly_negative: float = Field(
        -0.5, ge=-1.0, le=0.0, description="a feedback reward at or below this is strongly negative"
    )
    relevant_memory: float = Field(
        0.5, ge=-1.0, le=1.0, description="s_max above this: a memory near the query was retrieved"
    )
    unrelated_memory: float = Field(
        0.2, ge=-1.0, le=1.0, description="s_max below this: nothing near the query was retrieved"
    )
    baseline_rate: float = Field(0.1, gt=0.0, le=1.0, description="alpha of each speaker's running baseline")
    nli_endpoint: str | None = Field(
        None,
        description="the llm: endpoint asked whether each persona fact of the speaker entails, contradicts or is "
        "neutral to the reply (R1), read from its label's log-probabilities; none: R1 is left out",
    )
    nli_model: str | None = Field(
        None,
        description="instead of nli_endpoint: a local folder with a three-way NLI sequence-classification model and "
        "its tokenizer, run with transformers (the nli extra)",
    )
    lm_endpoint: str | None = Field(
        None,
        description="an llm: endpoint serving /completions with echo and logprobs, whose mean log-probability of "
        "the reply's tokens after the previous turn is the fluency (R3.1); none: R3.1 is left out",
    )
    retries: int = Field(1, ge=0, le=5, description="new attempts at a label whose answer named no label")
    max_reject_rate: float | None = Field(
        None,
        ge=0,
        le=1,
        description="stop the run when more than this share of an NLI or fluency step's items is rejected; "
        "default: the endpoint's max_reject_rate",
    )

    @model_validator(mode="after")
    def _ordered(self) -> QualityLabelsOptions:
        if self.unrelated_memory > self.relevant_memory:
            raise ValueError("unrelated_memory must not exceed relevant_memory")
        if len(set(self.dialogues)) < len(self.dialogues):
            raise ValueError("dialogues names a kind twice")
        if (self.memories == "retrieval_file") != (self.retrieval_file is not None):
            raise ValueError("memories: retrieval_file and a retrieval_file go together")
        if self.memories == "retrieval_file" and self.dialogues != ["log"]:
            raise ValueError(
                "a retrieval file names replies of the log: memories: retrieval_file needs dialogues: [log]"
            )
        if self.nli_endpoint is not None and self.nli_model is not None:
            raise ValueError("name one NLI backend: nli_endpoint or nli_model, not both")
        return self

    @property
    def has_nli(self) -> bool:
        return self.nli_endpoint is not None or self.nli_model is not None

    @property
    def uses_llm(self) -> bool:
        return self.nli_endpoint is not None or self.lm_endpoint is not None

    @property
    def rules(self) -> Rules:
        return Rules(
            self.topic_threshold,
            self.topic_damping,
            self.strongly_negative,
            self.relevant_memory,
            self.unrelated_memory,
            self.baseline_rate,
        )
