"""The rule a time+content question's gold answer must keep (docs/time-content-questions.md, "The answer"), the
one place it is stated: the reply parser runs it (steps.py), so a reply that breaks it goes back to the model in
the correction round with what to fix, and the validator (checking.py) runs it again with facts read from the
`log` records. A rule stated twice could drift; this way the generator and the validator cannot disagree on what
an acceptable answer is, only on the facts they feed it.

An answer is kept when

* it has words, and at most `max_answer_words` of them;
* it says something beyond the speakers and the time: after dropping stop words, the speakers' names and the
  words of the anchor's date and session, content words remain ("On April 4th." or "Tomas." do not answer);
* it adds something the question does not hold: at least one of its content words occurs in the anchor and not
  in the question (an answer that only repeats the question's topic tells nothing);
* it comes from the anchor: at least `min_answer_support` of its distinct content words occur in the anchor's
  text. Words are compared by their Porter stems (nltk's, as `gen eval --answers` scores), so "finished" in an
  answer matches "finish" in the anchor.

The default share, 0.5, was set on LoCoMo's own gold answers: of its 805 single-hop answers (category 4) with
content words, 92% keep it against their evidence turns; those below are nearly all answers taken from a shared
image rather than from what was said.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from gen.llm.step import Problem
from gen.products.lexical import word_stem, words
from gen.products.time_content.question_rules import Facts, clean, ignored_words

# every problem code answer_problems gives, for the validator's report (one check each)
ANSWER_CODES = (
    "answer empty",
    "answer too long",
    "answer says nothing",
    "answer repeats the question",
    "answer not from the anchor",
)


@dataclass(frozen=True)
class AnswerLimits:
    max_words: int
    min_support: float


def clean_answer(answer: str) -> str:
    """The answer as it is checked and written: one line, surrounding quote marks removed (as a question's)."""
    return clean(" ".join(answer.split()))


@lru_cache(maxsize=1)
def _porter() -> Any:
    from nltk.stem import PorterStemmer  # the stemmer gen eval --answers scores with; loaded on first use

    return PorterStemmer()


@lru_cache(maxsize=65536)
def _porter_stem(word: str) -> str:
    return _porter().stem(word)


def content_words(text: str, ignore: frozenset[str]) -> dict[str, str]:
    """Porter stem -> the first word of the text that has it, for the text's content words (gen.products.lexical's
    stop list, numbers and words under three letters left out) other than the `ignore`d names and time words."""
    found: dict[str, str] = {}
    for word in words(text):
        if word in ignore or word_stem(word) is None:
            continue
        found.setdefault(_porter_stem(word.removesuffix("'s")), word)
    return found


def answer_problems(answer: str, question: str, facts: Facts, limits: AnswerLimits) -> list[Problem]:
    """Everything wrong with a (cleaned) answer to `question` about the anchor in `facts`; empty when it passes."""
    count = len(answer.split())
    if count == 0:
        return [Problem("answer empty", "the reply holds no answer")]
    found = []
    if count > limits.max_words:
        found.append(Problem("answer too long", f"{count} words; an answer has at most {limits.max_words}"))
    ignore = ignored_words(tuple(facts.speakers), facts.day, facts.session_index)
    said = content_words(answer, ignore)
    if not said:
        detail = "it names only the speakers or the time, not what was said"
        return [*found, Problem("answer says nothing", detail)]
    anchor = content_words(facts.anchor_text, ignore).keys()
    if not (said.keys() & anchor) - content_words(question, ignore).keys():
        found.append(Problem("answer repeats the question", "it adds nothing from the passage the question lacks"))
    foreign = [said[s] for s in said if s not in anchor]
    support = 1 - len(foreign) / len(said)
    if support < limits.min_support:
        found.append(
            Problem(
                "answer not from the anchor",
                f"{_listed(foreign)} {'is' if len(foreign) == 1 else 'are'} not in the passage "
                f"({support:.0%} of its content words are; at least {limits.min_support:.0%} must be)",
            )
        )
    return found


def _listed(texts: Iterable[str]) -> str:
    return ", ".join(f'"{text}"' for text in texts)
