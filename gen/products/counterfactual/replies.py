"""What the model answers at each step, and the checks each answer must pass before it is used.

Each check returns a list of :class:`Problem` (empty: accepted); the checked step regenerates an answer with
problems and, after the last round, rejects it with the first problem as the reason. The problem codes (before
the colon) are what run.json counts rejects by.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import BaseModel, Field

from gen.llm.step import Problem
from gen.products.counterfactual.quality import STOP_WORDS, words

MAX_FACTS = 15  # a session of 10-15 turns holds far fewer facts worth remembering
MAX_FACT_WORDS = 40
RESTATEMENT_SHARE = 0.8  # an answer whose content words are mostly the question's says nothing new


class Summary(BaseModel):
    """The summary of one session."""

    facts: list[str] = Field(description="short sentences, each one fact about one of the speakers")


class Counterfactual(BaseModel):
    asker: str = Field(description="the speaker who asks")
    question: str = Field(description="the question, presupposing something false")
    correct_answer: str = Field(description="what the other speaker, remembering correctly, answers")
    contradicted_fact: str = Field(description="the true fact the presupposition contradicts")


class Counterfactuals(BaseModel):
    """The questions of one episode."""

    questions: list[Counterfactual]


class Line(BaseModel):
    speaker: str
    text: str


class NewSession(BaseModel):
    """A synthetic session, in order."""

    turns: list[Line]


class Judgement(BaseModel):
    contradicts: bool
    reason: str = ""


class Verdicts(BaseModel):
    """The verifier's view of each question, in the order given."""

    verdicts: list[Judgement]


def clean(text: str) -> str:
    return " ".join(text.split())


@dataclass(frozen=True)
class Question:
    """A question as kept: the asker, the answerer, and the three texts, whitespace folded."""

    asker: str
    answerer: str
    question: str
    correct_answer: str
    contradicted_fact: str

    def to_dict(self) -> dict[str, str]:
        return {
            "asker": self.asker,
            "answerer": self.answerer,
            "question": self.question,
            "correct_answer": self.correct_answer,
            "contradicted_fact": self.contradicted_fact,
        }


# --- summaries ------------------------------------------------------------------------------------------


def summary_facts(reply: Summary) -> list[str]:
    return [clean(fact) for fact in reply.facts]


def summary_problems(facts: Sequence[str], speakers: Sequence[str]) -> list[Problem]:
    found: list[Problem] = []
    if not facts:
        return [Problem("no facts", "the summary lists no fact")]
    if len(facts) > MAX_FACTS:
        found.append(Problem("too many facts", f"{len(facts)}; at most {MAX_FACTS} short facts"))
    for number, fact in enumerate(facts, start=1):
        if not fact:
            found.append(Problem("empty fact", f"fact {number} is empty"))
        elif len(fact.split()) > MAX_FACT_WORDS:
            found.append(
                Problem("fact too long", f"fact {number} has {len(fact.split())} words; at most {MAX_FACT_WORDS}")
            )
        elif not names_a_speaker(fact, speakers):
            found.append(
                Problem("speaker not named", f"fact {number} ({fact!r}) names neither {' nor '.join(speakers)}")
            )
    if len(set(facts)) < len(facts):
        found.append(Problem("repeated fact", "a fact appears twice"))
    return found


def names_a_speaker(text: str, speakers: Sequence[str]) -> bool:
    lowered = text.lower()
    return any(speaker.lower() in lowered for speaker in speakers)


# --- questions ------------------------------------------------------------------------------------------


def questions_of(reply: Counterfactuals, speakers: Sequence[str]) -> list[Question]:
    """The reply's questions with texts cleaned; the answerer is whichever speaker the asker is not."""
    kept = []
    for entry in reply.questions:
        asker = clean(entry.asker)
        answerer = next((s for s in speakers if s != asker), "")
        kept.append(
            Question(
                asker, answerer, clean(entry.question), clean(entry.correct_answer), clean(entry.contradicted_fact)
            )
        )
    return kept


def question_problems(questions: Sequence[Question], speakers: Sequence[str]) -> list[Problem]:
    if len(questions) != 2:
        return [Problem("not two questions", f"{len(questions)} questions; write exactly two, one per speaker")]
    askers = [q.asker for q in questions]
    if sorted(askers) != sorted(speakers):
        return [Problem("askers", f"asked by {', '.join(askers)}; one question by {speakers[0]}, one by {speakers[1]}")]
    found: list[Problem] = []
    for q in questions:
        found += one_question_problems(q)
    if questions[0].question.lower() == questions[1].question.lower():
        found.append(Problem("same question", "both speakers ask the same question"))
    return found


def one_question_problems(q: Question) -> list[Problem]:
    found = []
    if not q.question.endswith("?") or "\n" in q.question:
        found.append(Problem("not a question", f"{q.asker}'s question does not end with '?': {q.question!r}"))
    if not q.correct_answer:
        found.append(Problem("no answer", f"{q.asker}'s question has no correct answer"))
    elif is_restatement(q.correct_answer, q.question):
        found.append(
            Problem("answer restates the question", f"{q.correct_answer!r} says nothing the question does not")
        )
    if not q.contradicted_fact:
        found.append(Problem("no contradicted fact", f"{q.asker}'s question names no true fact it contradicts"))
    return found


def content_words(text: str) -> list[str]:
    return [w for w in words(text) if w not in STOP_WORDS]


def is_restatement(answer: str, question: str) -> bool:
    """The answer is the question again, or nearly all its content words come from the question."""
    if clean(answer).lower().rstrip("?.!") == clean(question).lower().rstrip("?.!"):
        return True
    own = content_words(answer)
    asked = set(content_words(question))
    if not own:
        return False  # "No." restates nothing; whether it is a good answer is the judge's concern
    return sum(w in asked for w in own) / len(own) >= RESTATEMENT_SHARE


def verdict_problem(verdicts: Verdicts, count: int) -> Problem | None:
    if len(verdicts.verdicts) != count:
        return Problem("verifier reply", f"{len(verdicts.verdicts)} verdicts for {count} questions")
    for number, verdict in enumerate(verdicts.verdicts, start=1):
        if not verdict.contradicts:
            reason = clean(verdict.reason) or "the presupposition does not contradict the summaries"
            return Problem("verifier disagrees", f"question {number}: {reason}")
    return None


# --- the new session ------------------------------------------------------------------------------------


def session_lines(reply: NewSession) -> list[dict[str, str]]:
    return [{"speaker": clean(line.speaker), "text": clean(line.text)} for line in reply.turns]


def session_problems(
    turns: Sequence[dict[str, str]], speakers: Sequence[str], asker: str, question: str, low: int, high: int
) -> list[Problem]:
    found = []
    if not low <= len(turns) <= high:
        found.append(Problem("length", f"{len(turns)} turns; write {low} to {high}"))
    strangers = sorted({t["speaker"] for t in turns} - set(speakers))
    if strangers:
        found.append(Problem("unknown speaker", f"{', '.join(strangers)}; only {' and '.join(speakers)} speak"))
    repeats = [i + 1 for i in range(1, len(turns)) if turns[i]["speaker"] == turns[i - 1]["speaker"]]
    if repeats:
        found.append(Problem("speaker order", f"turn {repeats[0]} has the same speaker as the turn before"))
    if any(not t["text"] for t in turns):
        found.append(Problem("empty turn", "a turn has no text"))
    if not turns or (turns[-1]["speaker"], turns[-1]["text"]) != (asker, question):
        last = f"{turns[-1]['speaker']}: {turns[-1]['text']!r}" if turns else "nothing"
        found.append(Problem("last turn", f"the session ends with {last}, not {asker} asking {question!r}"))
    return found
