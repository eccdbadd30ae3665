"""The validator of quality_labels, by its own path: turns read back from the `log` records, feedback phrases found
by a separately written matcher (regular expressions over the text, the opening answer to a question cut off by
its own pattern), distinct-1 by a hand-written scanner, every cosine recomputed from the texts' vectors (which
vectors.encode may hand over from the labelling: looked up by text, so a label computed from the wrong turn still
fails), then the nearest memories, gate, baseline, advantage, reward and the dialogue's means recomputed from
those."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from statistics import fmean
from typing import Any

from gen.products.base import BuildContext, Record, Unit
from gen.products.checks import Checks
from gen.products.quality import retrieval, vectors
from gen.products.quality.options import QualityLabelsOptions
from gen.products.quality.signals import (
    MEANS,
    WEIGHTS,
    FeedbackWords,
    feedback_reward,
    feedback_words,
    gate,
    keyword_signal,
)

TOLERANCE = 1e-3  # float32 vectors encoded in other batches may move the fourth decimal
ALPHABET = "abcdefghijklmnopqrstuvwxyz"
LETTERS = ALPHABET + "0123456789"


@lru_cache(maxsize=4096)  # every follow-up is searched for every phrase
def phrase_pattern(phrase: str) -> re.Pattern:
    parts = re.findall(r"[a-z0-9']+", phrase.lower())
    return re.compile(r"(?<![a-z0-9'])" + r"[^a-z0-9']+".join(map(re.escape, parts)) + r"(?![a-z0-9]|'[a-z])")


def found(phrases: Sequence[str], text: str) -> list[str]:
    plain = text.lower().replace("\u2019", "'")
    return [p for p in phrases if phrase_pattern(p).search(plain)]


def after_answer(answers: Sequence[str], response: str, follow_up: str) -> str:
    """The follow-up without its opening negative answer when the response ends with a question mark."""
    if not re.search(r"\?\s*$", response):
        return follow_up
    plain = follow_up.lower().replace("\u2019", "'")
    for answer in answers:
        parts = re.findall(r"[a-z0-9']+", answer.lower())
        opening = re.match(r"[^a-z0-9]*" + r"[^a-z0-9']+".join(map(re.escape, parts)) + r"(?![a-z0-9]|'[a-z])", plain)
        if opening:
            return plain[opening.end() :]
    return follow_up


def scanned_words(text: str) -> list[str]:
    """Runs of letters and digits; an apostrophe followed by letters joins them to the word, which then ends
    with those letters (so "don't" is one word, "rock'n'roll" is "rock'n" and "roll")."""
    plain, tokens, current, joined = text.lower().replace("\u2019", "'") + " ", [], "", False
    for position, char in enumerate(plain[:-1]):
        if char in LETTERS and not (joined and char not in ALPHABET):
            current += char
            continue
        if char == "'" and current and not joined and plain[position + 1] in ALPHABET:
            current, joined = current + char, True
            continue
        if current:
            tokens.append(current)
        current, joined = (char, False) if char in LETTERS else ("", False)
    return [*tokens, current] if current else tokens


def near(a: float | None, b: float | None) -> bool:
    return (a is None) == (b is None) and (a is None or abs(a - b) <= TOLERANCE)  # type: ignore[operator]


def text_vectors(texts: Sequence[str]) -> Any:
    return vectors.encode(texts)  # by text: which turn a label was computed from is checked, not taken on trust


@dataclass
class Read:
    """A dialogue as the validator reads it from the records the run wrote (not from the build's dialogues)."""

    name: str
    turns: list[dict]  # {index, speaker, text, session, padding}
    history: list[dict]
    personas: Mapping[str, Sequence[str]]


def read_dialogues(unit: Unit, kinds: Sequence[str]) -> Iterator[Read]:
    personas = unit.conversation.personas
    if "log" in kinds:
        turns = [
            {
                "index": r["response_index"],
                "speaker": r["speaker"],
                "text": r["text"],
                "session": r["session_index"],
                "padding": r["is_padding"],
            }
            for r in unit.records_of("log")
        ]
        yield Read("log", turns, [], personas)
    if "teabag_session6" in kinds:
        for record in unit.records_of("teabag"):
            history = [
                {"index": k, "speaker": t["speaker"], "text": t["text"], "session": s, "padding": False}
                for k, (s, t) in enumerate((h["session"], t) for h in record["history"] for t in h["turns"])
            ]
            last = max((h["session"] for h in history), default=-1) + 1
            turns = [
                {"index": k, "speaker": t["speaker"], "text": t["text"], "session": last, "padding": False}
                for k, t in enumerate(record["session6"])
            ]
            yield Read(f"session6 {record['question_id']}", turns, history, personas)
    if "persona_dialogues" in kinds:
        for record in unit.records_of("persona_sql_episodes"):
            turns = [
                {"index": k, "speaker": t["speaker"], "text": t["text"], "session": 0, "padding": False}
                for k, t in enumerate(record["lines"])
            ]
            yield Read("pseudo-dialogue", turns, [], {p["speaker"]: p["facts"] for p in record["personas"]})


def check_conversation(
    unit: Unit,
    rows: Sequence[Record],
    summaries: Sequence[Record],
    options: QualityLabelsOptions,
    ctx: BuildContext,
    checks: Checks,
) -> None:
    where = unit.conversation_id
    dialogues = list(read_dialogues(unit, options.dialogues))
    expected = [(d.name, t["index"]) for d in dialogues for t in d.turns]
    if not checks.check(
        "one record per turn of every dialogue", [(r["dialogue"], r["response_index"]) for r in rows] == expected, where
    ):
        return
    if not checks.check(
        "one summary per dialogue", [s["dialogue"] for s in summaries] == [d.name for d in dialogues], where
    ):
        return
    words = feedback_words(ctx.templates)
    path = options.retrieval_file
    retrieval_path = None if path is None else retrieval.resolve(ctx.recipe.file, path)
    start, human_pc = 0, None
    for dialogue, summary in zip(dialogues, summaries):
        own = rows[start : start + len(dialogue.turns)]
        start += len(dialogue.turns)
        check_dialogue(dialogue, own, words, options, checks, f"{where} {dialogue.name}", retrieval_path)
        human = None if dialogue.name == "log" else human_pc
        check_summary(summary, own, checks, f"{where} {dialogue.name}", human, options.include_padding)
        human_pc = summary["pc"] if dialogue.name == "log" else human_pc


def check_dialogue(
    dialogue: Read,
    rows: Sequence[Record],
    words: FeedbackWords,
    options: QualityLabelsOptions,
    checks: Checks,
    where: str,
    retrieval_path: Path | None,
) -> None:
    vectors = text_vectors([t["text"] for t in (*dialogue.history, *dialogue.turns)])
    offset = len(dialogue.history)
    baselines: dict[str, float] = {}
    earlier = EarlierTurns(dialogue, vectors)
    for row, turn in zip(rows, dialogue.turns):
        place = f"{where} {turn['index']}"
        check_turn(row, turn["index"], dialogue.turns, vectors[offset:], words, options, checks, place)
        check_memory(row, dialogue, vectors, earlier, options, checks, place, retrieval_path)
        facts = dialogue.personas.get(row["speaker"]) or []
        check_persona(row, facts, options, checks, place)
        best = max((float(v @ vectors[offset + turn["index"]]) for v in text_vectors(facts)), default=None)
        checks.check(
            "persona_cosine is the reply's best cosine to its speaker's facts", near(row["persona_cosine"], best), place
        )
        if row["feedback_reward"] is not None:
            before = baselines.get(row["speaker"], 0.0)
            expected = None if row["gate"] is None else row["gate"] * (row["feedback_reward"] - before)
            checks.check(
                "baseline and advantage follow the speaker's earlier rewards",
                near(row["baseline"], before) and near(row["advantage"], expected),
                place,
            )
            rate = options.baseline_rate
            baselines[row["speaker"]] = (1 - rate) * before + rate * row["feedback_reward"]


def same_session(turns: Sequence[dict], a: int, b: int) -> bool:
    return 0 <= b < len(turns) and turns[a]["session"] == turns[b]["session"]


def check_turn(
    row: Record,
    index: int,
    turns: Sequence[dict],
    vectors: Any,
    words: FeedbackWords,
    options: QualityLabelsOptions,
    checks: Checks,
    where: str,
) -> None:
    query = index - 1 if same_session(turns, index, index - 1) else None
    follow_up = index + 1 if same_session(turns, index, index + 1) else None
    checks.check(
        "query and follow-up are the neighbouring turns of the session",
        (row["query_index"], row["follow_up_index"]) == (query, follow_up),
        where,
    )
    checks.check("padding turns are marked", row["padding"] is turns[index]["padding"], where)
    if query is not None and follow_up is not None:
        searched = after_answer(words.answers, turns[index]["text"], turns[follow_up]["text"])
        negative, positive = found(words.negative, searched), found(words.positive, searched)
        checks.check(
            "feedback phrases are those of the follow-up",
            (row["negative_hits"], row["positive_hits"]) == (negative, positive),
            where,
        )
        topic = float(vectors[query] @ vectors[follow_up])
        checks.check("topic cosine of query and follow-up", near(row["topic_cosine"], topic), where)
        signal = keyword_signal(negative, positive)
        # a cosine within the tolerance of topic_threshold may fall either side of it (the record rounds it)
        allowed = [feedback_reward(signal, value, options.rules) for value in (topic - TOLERANCE, topic + TOLERANCE)]
        checks.check(
            "feedback reward from keywords and topic", any(near(row["feedback_reward"], v) for v in allowed), where
        )
    else:
        checks.check("no feedback without a query and a follow-up", row["feedback_reward"] is None, where)
    tokens = scanned_words(turns[index]["text"])
    checks.check(
        "r3_2 is distinct-1 of the reply", near(row["r3_2"], len(set(tokens)) / len(tokens) if tokens else None), where
    )
    r2 = None if query is None else float(vectors[index] @ vectors[query])
    checks.check("r2 is the cosine of reply and query", near(row["r2"], r2), where)
    parts = {name: row[name] for name in WEIGHTS if row[name] is not None}
    reward = sum(WEIGHTS[name] * value for name, value in parts.items()) if parts else None
    checks.check(
        "reward sums the parts it names", near(row["reward"], reward) and row["reward_parts"] == list(parts), where
    )


def check_persona(row: Record, facts: Sequence[str], options: QualityLabelsOptions, checks: Checks, where: str) -> None:
    """R1 and the labels from the stored probabilities: every fact of the speaker scored, or none."""
    probabilities = list(zip(row["p_entail"], row["p_contradict"], row["p_neutral"]))
    if row["r1"] is None:
        checks.check("no persona labels without R1", not (row["persona_facts"] or probabilities), where)
        return
    checks.check(
        "R1 scores every persona fact of the speaker",
        options.has_nli and row["persona_facts"] == list(facts) and len(probabilities) == len(facts),
        where,
    )
    sums_to_one = all(abs(sum(triple) - 1) <= TOLERANCE and min(triple) >= 0 for triple in probabilities)
    expected = sum(p[0] for p in probabilities) - 2 * sum(p[1] for p in probabilities)
    checks.check("label probabilities sum to 1 and give R1", sums_to_one and near(row["r1"], expected), where)
    names = ("entailment", "contradiction", "neutral")
    argmax = [names[max(range(3), key=lambda k: (triple[k], -k))] for triple in probabilities]
    checks.check("each label is its most probable", row["nli_labels"] == argmax, where)


class EarlierTurns:
    """What a query of each session could remember, read from the records: the turns of earlier sessions (of the
    history when there is one), padding left out; their names (indices) and vectors, gathered once per session."""

    def __init__(self, dialogue: Read, vectors: Any) -> None:
        self.dialogue, self.vectors = dialogue, vectors
        self.sessions: dict[int, tuple[list[int], Any]] = {}

    def scores(self, session: int, query: Any) -> dict[int, float]:
        """Each earlier turn's index -> its cosine to the query."""
        if session not in self.sessions:
            offset = len(self.dialogue.history)
            pool = [(t, t["index"]) for t in self.dialogue.history] or [
                (t, offset + t["index"]) for t in self.dialogue.turns
            ]
            kept = [(t["index"], row) for t, row in pool if t["session"] < session and not t["padding"]]
            self.sessions[session] = ([name for name, _ in kept], self.vectors[[row for _, row in kept]])
        names, vectors = self.sessions[session]
        return dict(zip(names, (vectors @ query).tolist())) if names else {}


def check_memory(
    row: Record,
    dialogue: Read,
    vectors: Any,
    earlier: EarlierTurns,
    options: QualityLabelsOptions,
    checks: Checks,
    where: str,
    retrieval_path: Path | None,
) -> None:
    if row["query_index"] is None:
        checks.check("no retrieval without a query", row["s_max"] is None and row["gate"] is None, where)
        return
    offset = len(dialogue.history)
    query = vectors[offset + row["query_index"]]
    scores: dict[Any, float]
    if options.memories == "personas":
        facts = dialogue.personas.get(row["speaker"]) or []
        scores = {fact: float(v @ query) for fact, v in zip(facts, text_vectors(facts))} if facts else {}
        used = row["memory_facts"]
    elif retrieval_path is not None:  # the file's own order: the nearest are not the point, what was retrieved is
        retrieved = retrieval.load(retrieval_path).get((row["conversation_id"], row["response_index"]), [])
        kept = retrieved[: options.memory_top_k]
        checks.check("the memories used are the file's first memory_top_k", row["memory_indices"] == kept, where)
        scores = {index: float(vectors[index] @ query) for index in kept}
        used = row["memory_indices"]
    else:
        scores = earlier.scores(dialogue.turns[row["response_index"]]["session"], query)
        used = row["memory_indices"]
    best = sorted(scores.values(), reverse=True)[: options.memory_top_k]
    s_max = best[0] if best else None
    checks.check("s_max is the nearest memory's cosine", near(row["s_max"], s_max), where)
    if retrieval_path is None:
        chosen = len(used) == len(best) and all(key in scores and scores[key] >= best[-1] - TOLERANCE for key in used)
        checks.check("the memories used are the nearest memory_top_k", chosen, where)
    if s_max is None or row["feedback_reward"] is None:
        checks.check("no gate without memories and a feedback reward", row["gate"] is None, where)
        return
    allowed = {
        gate(row["feedback_reward"], value, options.rules) for value in (s_max - TOLERANCE, s_max, s_max + TOLERANCE)
    }
    checks.check("the gate follows the table for the reward and s_max", row["gate"] in allowed, where)


def check_summary(
    summary: Record, table: Sequence[Record], checks: Checks, where: str, human_pc: float | None, padding: bool
) -> None:
    """The means, feedback count and PC over the dialogue's turns, the padding session's only when asked for."""
    rows = [r for r in table if padding or not r["padding"]]

    def mean(key: str) -> float | None:
        values = [r[key] for r in rows if r[key] is not None]
        return fmean(values) if values else None

    means = all(near(summary[f"mean_{key}"], mean(key)) for key in MEANS)
    counts = (summary["turns"], summary["padding_turns"], summary["with_feedback"]) == (
        len(table),
        sum(r["padding"] for r in table),
        sum(r["feedback_reward"] is not None for r in rows),
    )
    checks.check("the summary's counts and means are the turns'", means and counts, where)
    labels = [label for r in rows for label in r["nli_labels"]]
    n = {name: labels.count(name) for name in ("entailment", "contradiction", "neutral")}
    pc = 100 * (n["entailment"] - n["contradiction"] + n["neutral"]) / len(labels) if labels else None
    found = (summary["n_entail"], summary["n_contradict"], summary["n_neutral"])
    expected = (n["entailment"], n["contradiction"], n["neutral"]) if labels else (None, None, None)
    checks.check("PC from the labels' counts", near(summary["pc"], pc) and found == expected, where)
    rpc = 1 + (pc - human_pc) / 100 if pc is not None and human_pc is not None else None
    checks.check("rPC against the conversation's log", near(summary["rpc"], rpc), where)
