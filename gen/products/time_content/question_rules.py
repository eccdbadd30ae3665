"""The checks a time+content question must pass (docs/time-content-questions.md), shared by generation (to
decide on regenerating) and by the validator (which feeds them facts read back from the `log` records instead
of the timeline).

Supported renderings (case-insensitive, commas optional, any whitespace):

* a date: month first ("May 8th, 2023", "May 8, 2023", "May the 8th 2023"), day first ("8 May 2023",
  "8th of May, 2023", "the eighth of May 2023"), or ISO "2023-05-08"; months in full or abbreviated
  ("Sep", "Sept.", "Apr."); days as digits, digit ordinals or ordinal words. The year may be left out only
  when no other date of the conversation has the same day and month (``yearless_ok``), and a year that
  follows must be the right one.
* a session number k: "session 3", "session three", "session number 3", "session #3", "session no. 3",
  "3rd session", "third session" (also with "conversation" or "chat" for "session").

Word overlap (see :func:`overlap`): the share of the anchor's distinct content stems (gen.products.time_content.anchors:
stop words, names and time words removed) that the question repeats. A verbatim copy scores near 1; a
question that only names the topic scores low. :func:`copied_run` is the longest run of consecutive words
(all words, lower-cased) the question shares with the anchor.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date
from functools import lru_cache

from num2words import num2words

from gen.calendar_names import month_name, weekday_name
from gen.llm.step import Problem
from gen.products.lexical import stems_without, word_stems, words

QUOTES = "\"'“”‘’«»`"


@dataclass(frozen=True)
class Facts:
    """What a question about one anchor must agree with."""

    speaker: str
    speakers: tuple[str, ...]  # both speakers of the conversation (their names never count as overlap)
    kind: str  # "date" | "session"
    day: date
    session_index: int
    yearless_ok: bool
    anchor_text: str


def clean(question: str) -> str:
    """The question as it is checked and written: surrounding whitespace and quote marks removed."""
    text = question.strip()
    while len(text) >= 2 and text[0] in QUOTES and text[-1] in QUOTES:
        text = text[1:-1].strip()
    return text


# --- time references ---------------------------------------------------------------------------------


def _alternation(options) -> str:
    return "(?:" + "|".join(sorted({re.escape(o).replace(r"\-", "[- ]") for o in options}, key=len, reverse=True)) + ")"


def month_alternation(month: int) -> str:
    """The month in full or abbreviated, with an optional full stop ("Apr", "Apr.", "Sept.")."""
    forms = [re.escape(month_name(month)), re.escape(month_name(month)[:3]) + r"\.?"]
    if month == 9:
        forms.append(r"Sept\.?")
    return "(?:" + "|".join(forms) + ")"


@lru_cache(maxsize=4096)
def date_pattern(day: date, yearless_ok: bool) -> re.Pattern:
    month = month_alternation(day.month) + r"(?![a-z])"
    digits = str(day.day)
    numeric_day = rf"(?<!\d)0?{digits}(?:st|nd|rd|th)?(?![\d\w])"
    word_day = r"(?<![\w-])" + _alternation([num2words(day.day, to="ordinal")]) + r"(?![\w-])"
    d = rf"(?:the\s+)?(?:{numeric_day}|{word_day})"
    year = rf"{day.year}(?!\d)"
    no_year_after = r"(?!\s*,?\s*(?:of\s+)?\d)"
    sep = r"\s*,?\s*"
    forms = [
        rf"\b{month}\s+{d}{sep}{year}",
        rf"\b{d}\s+(?:of\s+)?{month}{sep}{year}",
        rf"(?<!\d){day.year}-{day.month:02d}-{day.day:02d}(?!\d)",
    ]
    if yearless_ok:
        forms += [rf"\b{month}\s+{d}{no_year_after}", rf"\b{d}\s+(?:of\s+)?{month}{no_year_after}"]
    return re.compile("|".join(f"(?:{f})" for f in forms), re.I)


def mentions_date(question: str, day: date, yearless_ok: bool) -> bool:
    return date_pattern(day, yearless_ok).search(question) is not None


@lru_cache(maxsize=1024)
def session_pattern(number: int) -> re.Pattern:
    cardinal = rf"(?:(?<!\d){number}(?!\d)|(?<![\w-]){_alternation([num2words(number)])}(?![\w-]))"
    ordinal = (
        rf"(?:(?<!\d){number}(?:st|nd|rd|th)|(?<![\w-]){_alternation([num2words(number, to='ordinal')])})(?![\w-])"
    )
    noun = r"(?:session|conversation|chat)"
    return re.compile(rf"\b{noun}\s+(?:number\s+|no\.?\s*|#\s*)?{cardinal}|{ordinal}\s+{noun}\b", re.I)


def mentions_session(question: str, number: int) -> bool:
    return session_pattern(number).search(question) is not None


@lru_cache(maxsize=4096)
def time_words(day: date, session_index: int) -> frozenset[str]:
    """Words of any rendering of the anchor's date or session: never counted as overlap with the anchor.
    Cached: spelling numbers out (num2words) costs more than the rest of the checks."""
    out = {
        month_name(day.month).lower(),
        month_name(day.month)[:3].lower(),
        weekday_name(day).lower(),
        "session",
    }
    for n in (day.day, session_index):
        out |= set(words(num2words(n))) | set(words(num2words(n, to="ordinal")))
    return frozenset(out)


# --- the checks --------------------------------------------------------------------------------------


def names(question: str, speaker: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(speaker)}(?!\w)", question, re.I) is not None


def form_problem(question: str) -> Problem | None:
    if not question:
        return Problem("not a question", "the reply holds no question")
    if "\n" in question:
        return Problem("not a question", "the text spans several lines")
    if not question.endswith("?"):
        return Problem("not a question", "the text does not end with a question mark")
    if question.count("?") > 1:
        return Problem("not a question", "the text asks more than one question")
    count = len(question.split())
    if count < 5 or count > 60:
        return Problem("not a question", f"{count} words; a question has 5 to 60")
    return None


@lru_cache(maxsize=4096)
def ignored_words(speakers: tuple[str, ...], day: date, session_index: int) -> frozenset[str]:
    """The lower-case words overlap never counts: the speakers' names and the time words."""
    return frozenset(w for name in speakers for w in words(name)) | time_words(day, session_index)


def overlap(question: str, facts: Facts) -> float:
    return overlap_of(words(question), facts)


def overlap_of(question_words: list[str], facts: Facts) -> float:
    """:func:`overlap` of a question already split by :func:`words`."""
    ignore = ignored_words(tuple(facts.speakers), facts.day, facts.session_index)
    anchor = stems_without(facts.anchor_text, ignore)
    if not anchor:
        return 0.0
    return len(anchor & word_stems(question_words, ignore)) / len(anchor)


def copied_run(question: str, anchor_text: str) -> int:
    """The longest run of consecutive words the question shares with the anchor text."""
    return longest_shared_run(words(question), words(anchor_text))


def longest_shared_run(question_words: list[str], anchor_words: list[str]) -> int:
    """The longest run of consecutive words the two share.

    ``run[j]`` is the length of the common run ending at the question's current word and the anchor's word j;
    only the anchor positions holding the current word can extend a run, so only those are visited (and only
    the positions of the words the question holds are listed)."""
    asked = set(question_words)
    positions: dict[str, list[int]] = {}
    for j, word in enumerate(anchor_words):
        if word in asked:
            positions.setdefault(word, []).append(j)
    best = 0
    previous: dict[int, int] = {}
    for word in question_words:
        where = positions.get(word)
        if where is None:
            previous = {}
            continue
        run = {j: previous.get(j - 1, 0) + 1 for j in where}
        best = max(best, *run.values())
        previous = run
    return best


def problems(question: str, facts: Facts, max_overlap: float, max_copied_words: int) -> list[Problem]:
    """Everything wrong with a (cleaned) question; empty when it passes."""
    return list(found_problems(question, facts, max_overlap, max_copied_words))


@lru_cache(maxsize=8192)
def found_problems(question: str, facts: Facts, max_overlap: float, max_copied_words: int) -> tuple[Problem, ...]:
    """:func:`problems`, kept for the last few thousand questions: the validator checks each question the
    generation checked, with the same facts read back from the log, soon after."""
    found = []
    if (p := form_problem(question)) is not None:
        found.append(p)
    if not names(question, facts.speaker):
        others = [s for s in facts.speakers if s != facts.speaker and names(question, s)]
        hint = f" (it names {others[0]} instead)" if others else ""
        found.append(Problem("speaker not named", f"the question does not name {facts.speaker}{hint}"))
    if facts.kind == "date" and not mentions_date(question, facts.day, facts.yearless_ok):
        found.append(
            Problem(
                "date missing",
                f"the question does not give {facts.day.isoformat()} in a supported "
                f"rendering{'' if facts.yearless_ok else ' with its year'}",
            )
        )
    if facts.kind == "session" and not mentions_session(question, facts.session_index):
        found.append(Problem("session missing", f"the question does not name session {facts.session_index}"))
    question_words = words(question)
    run = longest_shared_run(question_words, words(facts.anchor_text))
    if run > max_copied_words:
        found.append(
            Problem("copies the anchor", f"{run} consecutive words of the anchor (at most {max_copied_words} allowed)")
        )
    share = overlap_of(question_words, facts)
    if share >= max_overlap:
        found.append(
            Problem(
                "overlap too high", f"repeats {share:.0%} of the anchor's content words (ceiling {max_overlap:.0%})"
            )
        )
    return tuple(found)
