"""quality_labels (configs `quality_turns` and `quality_conversations`; docs/quality.md): every response of the log
labelled with the feedback reward the other speaker's follow-up gives it, the retrieval gate and advantage, and
the persona-consistency reward's parts: topic (R2) and repetition (R3.2) always; persona consistency (R1, each of
the speaker's persona facts against the reply by an NLI endpoint) and fluency (R3.1, by a language model's
log-probabilities) when the recipe names their endpoints. A part without its backend (or its inputs: R1 needs
persona facts) is null, and `reward_parts` says which parts `reward` sums."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from statistics import fmean
from typing import Any

from gen.llm import Task
from gen.llm.step import StepPolicy, most_calls
from gen.products.base import BuildContext, ConfigSpec, Needs, Product, Record, Records, Unit
from gen.products.checks import Checks
from gen.products.quality import checking, nli_model, steps, vectors
from gen.products.quality.options import QualityLabelsOptions
from gen.products.quality.signals import (
    LABELS,
    MEANS,
    WEIGHTS,
    FeedbackWords,
    distinct_1,
    feedback_reward,
    feedback_words,
    gate,
    keyword_signal,
    nli_counts,
    nli_label,
    pc,
    persona_consistency,
    words,
)
from gen.products.quality.steps import NAME, FactPair, ScoredReply
from gen.products.quality.vectors import EMBEDDER
from gen.products.schema import FLOAT64, INT64, STRING, Schema, list_of, schema
from gen.recipe import Recipe
from gen.timeline import Response, Timeline

TURNS, CONVERSATIONS = "quality_turns", "quality_conversations"
DIGITS = 6


def rounded(value: float | None) -> float | None:
    return None if value is None else round(float(value), DIGITS)


class Turns:
    """One conversation's responses with their vectors, and who said what where."""

    def __init__(self, timeline: Timeline) -> None:
        self.responses = timeline.responses
        self.vectors = vectors.encode([r.text for r in self.responses])

    def neighbour(self, index: int, step: int) -> Response | None:
        """The turn before (step -1) or after (+1) in the same session, if any."""
        other = index + step
        if (
            0 <= other < len(self.responses)
            and self.responses[other].session_index == self.responses[index].session_index
        ):
            return self.responses[other]
        return None

    def cosine(self, a: int, b: int) -> float:
        return float(self.vectors[a] @ self.vectors[b])


def turn_features() -> Schema:
    return schema(
        {
            "conversation_id": STRING,
            "response_index": INT64,
            "session_index": INT64,
            "speaker": STRING,
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


def conversation_features() -> Schema:
    return schema(
        {
            "conversation_id": STRING,
            "turns": INT64,
            "with_feedback": INT64,
            **{f"mean_{key}": FLOAT64 for key in MEANS},
            "n_entail": INT64,
            "n_contradict": INT64,
            "n_neutral": INT64,
            "pc": FLOAT64,
            "nli_backend": STRING,
        }
    )


class QualityLabels(Product[QualityLabelsOptions]):
    name = NAME
    description = (
        "a quality reward for every response: the follow-up's feedback, retrieval gating, topic and repetition"
    )
    Options = QualityLabelsOptions
    configs = (
        ConfigSpec(TURNS, "one record per response: feedback reward, gate, advantage, reward parts", turn_features()),
        ConfigSpec(CONVERSATIONS, "one record per conversation: the means of its labels", conversation_features()),
    )
    needs = Needs(timelines=True, products=("log",))

    def __init__(self, options: QualityLabelsOptions) -> None:
        super().__init__(options)
        self.needs = Needs(timelines=True, llm=options.uses_llm, products=("log",))

    def check_recipe(self, recipe: Recipe, where: str) -> None:
        """The encoder's packages and the feedback words, before any source is read."""
        from gen.embedding import model_folder

        model_folder(what=NAME)
        feedback_words(recipe.templates)
        if self.options.nli_model is not None:
            nli_model.require(self.options.nli_model, where)

    def build(self, units: Sequence[Unit], ctx: BuildContext) -> Iterator[Records]:
        """The labels that need no LLM, conversation by conversation; then each LLM part in one step over every
        conversation of the batch; then the rewards and each conversation's summary."""
        tables = [self.turn_rows(unit, ctx) for unit in units]
        backends = Backends.of(self.options)
        pairs = [pair for unit in units for pair in fact_pairs(unit, self.options)]
        labels = self.nli_labels(pairs, ctx) if pairs else {}
        fluency = self.fluency(units, ctx) if backends.lm_endpoint else {}
        for unit, rows in zip(units, tables):
            for row in rows:
                finish_row(row, unit, labels, fluency, backends)
            yield {TURNS: rows, CONVERSATIONS: [conversation_record(unit.conversation_id, rows, backends)]}

    def turn_rows(self, unit: Unit, ctx: BuildContext) -> list[Record]:
        feedback = feedback_words(ctx.templates_dir)
        turns = Turns(unit.stamped)
        memories = Memories(unit, turns, self.options)
        baselines: dict[str, float] = {}
        rows = []
        for index, response in enumerate(turns.responses):
            row = turn_record(unit.conversation_id, index, turns, feedback, memories, self.options)
            if row["feedback_reward"] is not None:
                before = baselines.get(response.speaker, 0.0)
                row["baseline"] = rounded(before)
                if row["gate"] is not None:
                    row["advantage"] = rounded(row["gate"] * (row["feedback_reward"] - before))
                rate = self.options.baseline_rate
                baselines[response.speaker] = (1 - rate) * before + rate * row["feedback_reward"]
            rows.append(row)
        return rows

    def nli_labels(self, pairs: list[FactPair], ctx: BuildContext) -> dict[str, dict[str, float]]:
        """item id -> the label probabilities of every fact-reply pair the NLI backend answered."""
        if self.options.nli_model is not None:
            found = nli_model.load(self.options.nli_model).probabilities([(p.fact, p.reply) for p in pairs])
            return {pair.item_id: probabilities for pair, probabilities in zip(pairs, found)}
        endpoint = self.options.nli_endpoint
        assert endpoint is not None
        step = steps.nli_step(endpoint, ctx.templates_dir)
        result = steps.run_checked(ctx, step, pairs, endpoint, self.options)
        return {item_id: accepted.value[1] for item_id, accepted in result.accepted.items()}

    def fluency(self, units: Sequence[Unit], ctx: BuildContext) -> dict[str, float]:
        """item id (conversation/response) -> the reply's mean token log-probability."""
        endpoint = self.options.lm_endpoint
        assert endpoint is not None
        scored = [reply for unit in units for reply in scored_replies(unit, ctx.templates_dir)]
        result = steps.run_checked(ctx, steps.fluency_step(endpoint), scored, endpoint, self.options)
        return {item_id: accepted.value for item_id, accepted in result.accepted.items()}

    def llm_tasks(self, units: Sequence[Unit], ctx: BuildContext) -> list[tuple[str, list[Task], int]]:
        planned = []
        policy = StepPolicy(self.options.retries)
        if self.options.nli_endpoint is not None:
            step = steps.nli_step(self.options.nli_endpoint, ctx.templates_dir)
            pairs = [pair for unit in units for pair in fact_pairs(unit, self.options)]
            planned.append((step.name, [step.task(pair, 0) for pair in pairs], most_calls(step, len(pairs), policy)))
        if self.options.lm_endpoint is not None:
            lm = steps.fluency_step(self.options.lm_endpoint)
            scored = [reply for unit in units for reply in scored_replies(unit, ctx.templates_dir)]
            planned.append((lm.name, [lm.task(reply, 0) for reply in scored], most_calls(lm, len(scored), policy)))
        return planned

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        checking.check_conversation(unit, records[TURNS], records[CONVERSATIONS], self.options, ctx, checks)

    def count(self, config: str, records: Sequence[Record]) -> Counter:
        counts: Counter = Counter()
        if config == TURNS:
            for row in records:
                counts["turns", ""] += 1
                if row["feedback_reward"] is not None:
                    counts["with feedback", ""] += 1
                    counts["feedback", f"{row['feedback_reward']:+.2f}"] += 1
                if row["gate"] is not None:
                    counts["gate", f"{row['gate']}"] += 1
                for label in row["nli_labels"]:
                    counts["nli", label] += 1
        return counts

    def summary(self, config: str, counts: Counter) -> dict:
        if config != TURNS:
            return {}
        rules, backends = self.options.rules, Backends.of(self.options)
        return {
            "turns": counts["turns", ""],
            "with_feedback": counts["with feedback", ""],
            "by_feedback_reward": distribution(counts, "feedback"),
            "by_gate": distribution(counts, "gate"),
            "by_nli_label": {label: counts["nli", label] for label in LABELS},
            "pc": rounded(pc(*(counts["nli", label] for label in LABELS))),
            "settings": {**vars(rules), "memories": self.options.memories, "memory_top_k": self.options.memory_top_k},
            "backends": {"embedder": EMBEDDER, "nli": backends.nli, "lm": backends.lm},
        }


def distribution(counts: Counter, key: str) -> dict[str, int]:
    """How many labels had each value, in the order of the values."""
    found = [(label, n) for (kind, label), n in counts.items() if kind == key]
    return dict(sorted(found, key=lambda item: float(item[0])))


class Memories:
    """What the replying speaker could have remembered when asked `query`: earlier sessions' responses, or
    persona facts; each query's nearest, and s_max."""

    def __init__(self, unit: Unit, turns: Turns, options: QualityLabelsOptions) -> None:
        self.turns, self.options = turns, options
        self.personas = unit.conversation.personas
        self.fact_vectors = (
            {speaker: vectors.encode(facts) for speaker, facts in self.personas.items() if facts}
            if options.memories == "personas"
            else {}
        )

    def nearest(self, query: int, speaker: str) -> tuple[list[Any], float | None]:
        """(the memories used, best first; s_max), or ([], None) when there is nothing to retrieve."""
        vector = self.turns.vectors[query]
        if self.options.memories == "personas":
            facts = self.personas.get(speaker) or []
            if not facts:
                return [], None
            scores = self.fact_vectors[speaker] @ vector
            order = sorted(range(len(facts)), key=lambda i: (-scores[i], i))[: self.options.memory_top_k]
            return [facts[i] for i in order], float(scores[order[0]])
        session = self.turns.responses[query].session_index
        earlier = [r.response_index for r in self.turns.responses if r.session_index < session and not r.is_padding]
        if not earlier:
            return [], None
        scores = self.turns.vectors[earlier] @ vector
        order = sorted(range(len(earlier)), key=lambda i: (-scores[i], earlier[i]))[: self.options.memory_top_k]
        return [earlier[i] for i in order], float(scores[order[0]])


def turn_record(
    conversation_id: str,
    index: int,
    turns: Turns,
    feedback: FeedbackWords,
    memories: Memories,
    options: QualityLabelsOptions,
) -> Record:
    response = turns.responses[index]
    query, follow_up = turns.neighbour(index, -1), turns.neighbour(index, +1)
    row: Record = {
        "conversation_id": conversation_id,
        "response_index": response.response_index,
        "session_index": response.session_index,
        "speaker": response.speaker,
        "query_index": query.response_index if query else None,
        "follow_up_index": follow_up.response_index if follow_up else None,
        "negative_hits": [],
        "positive_hits": [],
        **dict.fromkeys(("keyword_signal", "topic_cosine", "feedback_reward", "s_max", "gate", "baseline"), None),
        "advantage": None,
        "memory_indices": [],
        "memory_facts": [],
    }
    if query is not None and follow_up is not None:
        negative, positive = feedback.hits(follow_up.text)
        signal = keyword_signal(negative, positive)
        topic = turns.cosine(query.response_index, follow_up.response_index)
        row.update(
            negative_hits=negative,
            positive_hits=positive,
            keyword_signal=signal,
            topic_cosine=rounded(topic),
            feedback_reward=rounded(feedback_reward(signal, topic, options.rules)),
        )
    if query is not None:
        used, s_max = memories.nearest(query.response_index, response.speaker)
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
        r2=rounded(turns.cosine(index, query.response_index)) if query is not None else None,
        r3_1=None,
        r3_2=rounded(distinct_1(words(response.text))),
        reward=None,
        reward_parts=[],
        memory_source=options.memories,
        embedder=EMBEDDER,
        nli_backend="none",
        lm_backend="none",
    )
    return row


@dataclass(frozen=True)
class Backends:
    """Which endpoint, if any, gives R1 and R3.1 (named in every record and in run.json)."""

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


def fact_id(conversation_id: str, response_index: int, fact_index: int) -> str:
    return f"{conversation_id}/{response_index}/fact{fact_index}"


def fact_pairs(unit: Unit, options: QualityLabelsOptions) -> Iterator[FactPair]:
    """Every persona fact of the replying speaker against every reply (none where the source has no facts)."""
    if not options.has_nli:
        return
    personas = unit.conversation.personas
    for response in unit.stamped.responses:
        for k, fact in enumerate(personas.get(response.speaker) or []):
            item_id = fact_id(unit.conversation_id, response.response_index, k)
            yield FactPair(
                item_id, unit.conversation_id, response.response_index, response.speaker, fact, response.text
            )


def scored_replies(unit: Unit, templates_dir: str | None) -> Iterator[ScoredReply]:
    responses = unit.stamped.responses
    for index, response in enumerate(responses):
        same_session = index and responses[index - 1].session_index == response.session_index
        before = responses[index - 1] if same_session else None
        context = steps.fluency_context(
            templates_dir, response.speaker, before.speaker if before else None, before.text if before else None
        )
        item_id = f"{unit.conversation_id}/{response.response_index}"
        yield ScoredReply(item_id, unit.conversation_id, response.response_index, context, response.text)


def finish_row(
    row: Record, unit: Unit, labels: dict[str, dict[str, float]], fluency: dict[str, float], backends: Backends
) -> None:
    """R1 (when every fact of the speaker got its probabilities), R3.1, and the reward over the parts present."""
    if backends.has_nli:
        facts = unit.conversation.personas.get(row["speaker"]) or []
        ids = [fact_id(unit.conversation_id, row["response_index"], k) for k in range(len(facts))]
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
        row["r3_1"] = rounded(fluency.get(f"{unit.conversation_id}/{row['response_index']}"))
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


def conversation_record(conversation_id: str, rows: Sequence[Record], backends: Backends) -> Record:
    n_entail, n_contradict, n_neutral = nli_counts([label for r in rows for label in r["nli_labels"]])
    scored = backends.has_nli and n_entail + n_contradict + n_neutral > 0
    return {
        "conversation_id": conversation_id,
        "turns": len(rows),
        "with_feedback": sum(r["feedback_reward"] is not None for r in rows),
        **{f"mean_{key}": mean([r[key] for r in rows]) for key in MEANS},
        "n_entail": n_entail if scored else None,
        "n_contradict": n_contradict if scored else None,
        "n_neutral": n_neutral if scored else None,
        "pc": rounded(pc(n_entail, n_contradict, n_neutral)) if scored else None,
        "nli_backend": backends.nli,
    }
