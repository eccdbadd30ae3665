"""The arithmetic of the quality labels, on plain numbers and words (docs/quality.md): feedback keywords, the
keyword signal, the topic damping, the retrieval gate, the running baseline and advantage, and distinct-1."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from gen import reading
from gen.errors import GenError
from gen.templating import Templates

WORDS_TEMPLATE = "quality/feedback_words.yaml"
WEIGHTS = {"r1": 0.4, "r2": 0.16, "r3_1": 0.22, "r3_2": 0.22}  # the persona-consistency reward's parts
# what a dialogue's record averages
MEANS = ("feedback_reward", "advantage", "r1", "persona_cosine", "r2", "r3_1", "r3_2", "reward")
LABELS = ("entailment", "contradiction", "neutral")  # the NLI labels, in the order ties are broken
WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")

NEGATIVE_SIGNAL = -1.0  # any negative hit
POSITIVE_STEP = 0.5  # each distinct positive hit adds this ...
POSITIVE_CAP = 1.0  # ... up to this
# The gate: how much of the reward's advantage is put down to retrieval (the rest to the reply's writer).
GATE_NOTHING_RELEVANT = 0.9  # strongly negative and no memory near the query: retrieval likely at fault
GATE_IGNORED_MEMORY = 0.2  # strongly negative although a near memory was there: the writer ignored it
GATE_UNCLEAR = 0.5  # strongly negative with a memory half near: either could be at fault
GATE_HELPED = 0.6  # positive with a relevant memory: retrieval shares the credit
GATE_OTHERWISE = 0.3


def words(text: str) -> list[str]:
    """Lower-case word tokens, apostrophes kept inside words (curly ones read as straight)."""
    return WORD.findall(text.lower().replace("\u2019", "'"))


@dataclass(frozen=True)
class FeedbackWords:
    negative: tuple[str, ...]
    positive: tuple[str, ...]
    answers: tuple[str, ...] = ()  # negative answers to a yes/no question ("nope"), not feedback after one

    @classmethod
    def load(cls, templates: Templates) -> FeedbackWords:
        text, filename = templates.source(WORDS_TEMPLATE)
        data = reading.load_yaml(text, Path(filename))
        lists = {key: data.get(key) if isinstance(data, dict) else None for key in ("negative", "positive")}
        if not all(phrases(v) and v for v in lists.values()):
            raise GenError(
                "the feedback words are not two lists of phrases",
                file=filename,
                expected="negative: [...] and positive: [...], each a non-empty list of words or phrases",
            )
        answers = data.get("answers", [])
        if not phrases(answers):
            raise GenError(
                "the negative answers are not a list of phrases",
                file=filename,
                field="answers",
                expected="answers: [no, nope, ...], words that open a negative answer to a yes/no question",
            )
        return cls(tuple(lists["negative"] or ()), tuple(lists["positive"] or ()), tuple(answers))

    def hits(self, text: str) -> tuple[list[str], list[str]]:
        """The negative and the positive phrases the text holds as whole words, in list order."""
        return self.found(words(text))

    def feedback(self, response: str, follow_up: str) -> tuple[list[str], list[str]]:
        """The hits of a follow-up as feedback on the response. When the response ends with a question mark and
        the follow-up opens with one of the answers ("Nope, never been"), that opening answers the question and
        says nothing of how the response landed: it is not searched, the rest of the follow-up is. The one place
        this rule is applied (docs/quality.md)."""
        tokens = words(follow_up)
        if asks(response):
            opening = next((len(answer) for answer in map(words, self.answers) if tokens[: len(answer)] == answer), 0)
            tokens = tokens[opening:]
        return self.found(tokens)

    def found(self, tokens: Sequence[str]) -> tuple[list[str], list[str]]:
        spaced = spaced_words(tokens)
        negative = [p for p in self.negative if spaced_phrase(p) in spaced]
        return negative, [p for p in self.positive if spaced_phrase(p) in spaced]


def phrases(value: object) -> bool:
    return isinstance(value, list) and all(isinstance(w, str) and words(w) for w in value)


def asks(text: str) -> bool:
    """Whether a turn ends with a question: its last character other than white space is "?"."""
    return text.rstrip().endswith("?")


@lru_cache(maxsize=8)
def feedback_words(templates: Templates) -> FeedbackWords:
    """The feedback words of a recipe's templates, read once per process (labels and validator alike)."""
    return FeedbackWords.load(templates)


def spaced_words(tokens: Sequence[str]) -> str:
    """Word tokens joined by spaces with a space at each end: a phrase's words come one after another among a
    text's words exactly when its spaced form is a substring of the text's (no word holds a space), which `in`
    finds without a loop in Python over every position."""
    return f" {' '.join(tokens)} "


@lru_cache(maxsize=4096)
def spaced_phrase(phrase: str) -> str:
    return spaced_words(words(phrase))


def keyword_signal(negative: Sequence[str], positive: Sequence[str]) -> float:
    return (NEGATIVE_SIGNAL if negative else 0.0) + min(POSITIVE_CAP, POSITIVE_STEP * len(positive))


@dataclass(frozen=True)
class Rules:
    """The settings where the method leaves a choice (recipe options; their values go into run.json)."""

    topic_threshold: float  # below this cosine between query and follow-up, the topic changed
    topic_damping: float  # the reward is multiplied by this after a topic change
    strongly_negative: float  # a reward at or below this is strongly negative
    relevant_memory: float  # s_max above this: a memory near the query was there
    unrelated_memory: float  # s_max below this: nothing near the query was retrieved
    baseline_rate: float  # alpha of the running baseline b <- (1 - alpha) b + alpha r


def feedback_reward(signal: float, topic_cosine: float, rules: Rules) -> float:
    damped = signal * rules.topic_damping if topic_cosine < rules.topic_threshold else signal
    return max(-1.0, min(1.0, damped))


def gate(reward: float, s_max: float, rules: Rules) -> float:
    if reward <= rules.strongly_negative:
        if s_max < rules.unrelated_memory:
            return GATE_NOTHING_RELEVANT
        return GATE_IGNORED_MEMORY if s_max > rules.relevant_memory else GATE_UNCLEAR
    return GATE_HELPED if reward > 0 and s_max > rules.relevant_memory else GATE_OTHERWISE


def distinct_1(tokens: Sequence[str]) -> float | None:
    """Unique tokens over tokens (None for a reply without words)."""
    return len(set(tokens)) / len(tokens) if tokens else None


def persona_consistency(p_entail: Sequence[float], p_contradict: Sequence[float]) -> float:
    """R1 over the speaker's facts: the entailment probabilities, less twice the contradiction probabilities."""
    return sum(p_entail) - 2 * sum(p_contradict)


def nli_label(p_entail: float, p_contradict: float, p_neutral: float) -> str:
    """The most probable label (ties go to the first in LABELS)."""
    scores = (p_entail, p_contradict, p_neutral)
    return LABELS[scores.index(max(scores))]


def nli_counts(labels: Sequence[str]) -> tuple[int, int, int]:
    return labels.count("entailment"), labels.count("contradiction"), labels.count("neutral")


def pc(n_entail: int, n_contradict: int, n_neutral: int) -> float | None:
    """Persona consistency over reply-fact pairs, in percent: 100 (N_e - N_c + N_n) / N (None without pairs)."""
    total = n_entail + n_contradict + n_neutral
    return 100 * (n_entail - n_contradict + n_neutral) / total if total else None


def relative_pc(pc_replies: float, pc_human: float) -> float:
    """rPC of generated replies against the human replies of the same corpus: 1 + (PC - PC_human) / 100, so 1 is
    as consistent as the humans (docs/quality.md on the table that drops the /100)."""
    return 1 + (pc_replies - pc_human) / 100
