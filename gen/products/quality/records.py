"""quality_labels' records: their schemas, a turn's labels that need no model, the model-backed parts (R1, R3.1)
and the reward filled in afterwards, and each dialogue's summary."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean

from gen.products.base import Record
from gen.products.quality.dialogues import Dialogue
from gen.products.quality.memories import Memories, Turns
from gen.products.quality.options import QualityLabelsOptions
from gen.products.quality.signals import (
    MEANS,
    WEIGHTS,
    FeedbackWords,
    distinct_1,
    feedback_reward,
    gate,
    keyword_signal,
    nli_counts,
    nli_label,
    pc,
    persona_consistency,
    relative_pc,
    words,
)
from gen.products.quality.vectors import EMBEDDER
from gen.products.schema import BOOL, FLOAT64, INT64, STRING, Schema, list_of, schema

DIGITS = 6


def rounded(value: float | None) -> float | None:
    return None if value is None else round(float(value), DIGITS)


def turn_features() -> Schema:
    return schema(
        {
            "conversation_id": STRING,
            "dialogue": STRING,
            "response_index": INT64,
            "session_index": INT64,
            "speaker": STRING,
            "padding": BOOL,
            "query_index": INT64,
            "follow_up_index": INT64,
            "negative_hits": list_of(STRING),
            "positive_hits": list_of(STRING),
            "keyword_signal": FLOAT64,
            "topic_cosine": FLOAT64,
            "feedback_reward": FLOAT64,
            "s_max": FLOAT64,
            "gate": FLOAT64,
            "baseline": FLOAT64,
            "advantage": FLOAT64,
            "memory_indices": list_of(INT64),
            "memory_facts": list_of(STRING),
            "persona_facts": list_of(STRING),
            "p_entail": list_of(FLOAT64),
            "p_contradict": list_of(FLOAT64),
            "p_neutral": list_of(FLOAT64),
            "nli_labels": list_of(STRING),
            "r1": FLOAT64,
            "persona_cosine": FLOAT64,
            "r2": FLOAT64,
            "r3_1": FLOAT64,
            "r3_2": FLOAT64,
            "reward": FLOAT64,
            "reward_parts": list_of(STRING),
            "memory_source": STRING,
            "embedder": STRING,
            "nli_backend": STRING,
            "lm_backend": STRING,
        }
    )


def dialogue_features() -> Schema:
    return schema(
        {
            "conversation_id": STRING,
            "dialogue": STRING,
            "turns": INT64,
            "padding_turns": INT64,
            "with_feedback": INT64,
            **{f"mean_{key}": FLOAT64 for key in MEANS},
            "n_entail": INT64,
            "n_contradict": INT64,
            "n_neutral": INT64,
            "pc": FLOAT64,
            "rpc": FLOAT64,
            "nli_backend": STRING,
        }
    )


@dataclass(frozen=True)
class Backends:
    """Which backend, if any, gives R1 and R3.1 (named in every record and in run.json)."""

    nli_endpoint: str | None
    nli_model: str | None
    lm_endpoint: str | None

    @classmethod
    def of(cls, options: QualityLabelsOptions) -> Backends:
        return cls(options.nli_endpoint, options.nli_model, options.lm_endpoint)

    @property
    def has_nli(self) -> bool:
        return self.nli_endpoint is not None or self.nli_model is not None

    @property
    def nli(self) -> str:
        if self.nli_model is not None:
            return f"transformers model {Path(self.nli_model).name}, softmax"
        return "none" if self.nli_endpoint is None else f"llm endpoint {self.nli_endpoint}, label log-probabilities"

    @property
    def lm(self) -> str:
        return "none" if self.lm_endpoint is None else f"llm endpoint {self.lm_endpoint}, /completions echo logprobs"


def dialogue_rows(
    dialogue: Dialogue, feedback: FeedbackWords, options: QualityLabelsOptions, retrieval_path: Path | None
) -> list[Record]:
    """Every turn's labels that need no model, with each speaker's running baseline and advantage."""
    turns = Turns(dialogue)
    memories = Memories(dialogue, turns, options, retrieval_path)
    baselines: dict[str, float] = {}
    rows = []
    for index, turn in enumerate(turns.turns):
        row = turn_record(dialogue, index, turns, feedback, memories, options)
        if row["feedback_reward"] is not None:
            before = baselines.get(turn.speaker, 0.0)
            row["baseline"] = rounded(before)
            if row["gate"] is not None:
                row["advantage"] = rounded(row["gate"] * (row["feedback_reward"] - before))
            rate = options.baseline_rate
            baselines[turn.speaker] = (1 - rate) * before + rate * row["feedback_reward"]
        rows.append(row)
    return rows


def turn_record(
    dialogue: Dialogue,
    index: int,
    turns: Turns,
    feedback: FeedbackWords,
    memories: Memories,
    options: QualityLabelsOptions,
) -> Record:
    turn = turns.turns[index]
    query, follow_up = turns.neighbour(index, -1), turns.neighbour(index, +1)
    row: Record = {
        "conversation_id": dialogue.conversation_id,
        "dialogue": dialogue.name,
        "response_index": turn.index,
        "session_index": turn.session_index,
        "speaker": turn.speaker,
        "padding": turn.is_padding,
        "query_index": query.index if query else None,
        "follow_up_index": follow_up.index if follow_up else None,
        "negative_hits": [],
        "positive_hits": [],
        **dict.fromkeys(("keyword_signal", "topic_cosine", "feedback_reward", "s_max", "gate", "baseline"), None),
        "advantage": None,
        "memory_indices": [],
        "memory_facts": [],
    }
    if query is not None and follow_up is not None:
        negative, positive = feedback.feedback(turn.text, follow_up.text)
        signal = keyword_signal(negative, positive)
        topic = turns.cosine(query.index, follow_up.index)
        row.update(
            negative_hits=negative,
            positive_hits=positive,
            keyword_signal=signal,
            topic_cosine=rounded(topic),
            feedback_reward=rounded(feedback_reward(signal, topic, options.rules)),
        )
    if query is not None:
        used, s_max = memories.nearest(query.index, turn.index, turn.speaker)
        row["memory_facts" if options.memories == "personas" else "memory_indices"] = used
        row["s_max"] = rounded(s_max)
        if s_max is not None and row["feedback_reward"] is not None:
            row["gate"] = gate(row["feedback_reward"], s_max, options.rules)
    row.update(
        persona_facts=[],
        p_entail=[],
        p_contradict=[],
        p_neutral=[],
        nli_labels=[],
        r1=None,
        persona_cosine=rounded(turns.persona_cosine(index, turn.speaker)),
        r2=rounded(turns.cosine(index, query.index)) if query is not None else None,
        r3_1=None,
        r3_2=rounded(distinct_1(words(turn.text))),
        reward=None,
        reward_parts=[],
        memory_source=options.memories,
        embedder=EMBEDDER,
        nli_backend="none",
        lm_backend="none",
    )
    return row


def fact_id(turn_id: str, fact_index: int) -> str:
    return f"{turn_id}/fact{fact_index}"


def finish_row(
    row: Record,
    dialogue: Dialogue,
    labels: Mapping[str, Mapping[str, float]],
    fluency: Mapping[str, float],
    backends: Backends,
) -> None:
    """R1 (when every fact of the speaker got its probabilities), R3.1, and the reward over the parts present."""
    turn_id = dialogue.item_id(row["response_index"])
    if backends.has_nli:
        facts = dialogue.personas.get(row["speaker"]) or []
        ids = [fact_id(turn_id, k) for k in range(len(facts))]
        if ids and all(item_id in labels for item_id in ids):
            found = [labels[item_id] for item_id in ids]
            row.update(
                persona_facts=list(facts),
                p_entail=[rounded(p["entailment"]) for p in found],
                p_contradict=[rounded(p["contradiction"]) for p in found],
                p_neutral=[rounded(p["neutral"]) for p in found],
            )
            row["nli_labels"] = [nli_label(*p) for p in zip(row["p_entail"], row["p_contradict"], row["p_neutral"])]
            row["r1"] = rounded(persona_consistency(row["p_entail"], row["p_contradict"]))
    if backends.lm_endpoint is not None:
        row["r3_1"] = rounded(fluency.get(turn_id))
    parts = {name: row[name] for name in WEIGHTS if row[name] is not None}
    row.update(
        reward=rounded(sum(WEIGHTS[name] * value for name, value in parts.items())) if parts else None,
        reward_parts=list(parts),
        nli_backend=backends.nli,
        lm_backend=backends.lm,
    )


def mean(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return rounded(fmean(present)) if present else None


def averaged(rows: Sequence[Record], include_padding: bool) -> list[Record]:
    """The turns a dialogue's means, feedback count and PC are over: the padding session's turns are another
    conversation's words, left out unless the recipe says include_padding. The one place this is decided (the
    run's PC counts with it too)."""
    return list(rows) if include_padding else [r for r in rows if not r["padding"]]


def dialogue_record(
    dialogue: Dialogue, table: Sequence[Record], backends: Backends, human_pc: float | None, include_padding: bool
) -> Record:
    """The dialogue's means and PC over its averaged turns; rPC for a written dialogue against `human_pc`, the PC
    of its conversation's log (when the run labels both with an NLI backend)."""
    rows = averaged(table, include_padding)
    n_entail, n_contradict, n_neutral = nli_counts([label for r in rows for label in r["nli_labels"]])
    scored = backends.has_nli and n_entail + n_contradict + n_neutral > 0
    dialogue_pc = pc(n_entail, n_contradict, n_neutral) if scored else None
    rpc = relative_pc(dialogue_pc, human_pc) if dialogue_pc is not None and human_pc is not None else None
    return {
        "conversation_id": dialogue.conversation_id,
        "dialogue": dialogue.name,
        "turns": len(table),
        "padding_turns": sum(r["padding"] for r in table),
        "with_feedback": sum(r["feedback_reward"] is not None for r in rows),
        **{f"mean_{key}": mean([r[key] for r in rows]) for key in MEANS},
        "n_entail": n_entail if scored else None,
        "n_contradict": n_contradict if scored else None,
        "n_neutral": n_neutral if scored else None,
        "pc": rounded(dialogue_pc),
        "rpc": rounded(rpc),
        "nli_backend": backends.nli,
    }
