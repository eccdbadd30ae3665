"""The dialogues quality_labels labels (option `dialogues`, docs/quality.md), each as turns to label and the
earlier turns its speakers could remember: the `log` of a conversation; each LLM-written TeaBag session 6, after
the episode's history; each persona pseudo-dialogue of persona_sql."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from gen.products.base import Unit

LOG, SESSION6, PSEUDO = "log", "teabag_session6", "persona_dialogues"
NEEDS = {LOG: "log", SESSION6: "teabag", PSEUDO: "persona_sql"}  # the product whose records hold each kind


@dataclass(frozen=True)
class Turn:
    index: int  # position in its dialogue (in the log: the response index)
    speaker: str
    text: str
    session_index: int
    is_padding: bool = False


@dataclass(frozen=True)
class Dialogue:
    name: str  # "log", "session6 <question id>" or "pseudo-dialogue"
    conversation_id: str
    turns: tuple[Turn, ...]  # what is labelled
    history: tuple[Turn, ...]  # earlier sessions the speakers could remember, not labelled themselves
    personas: Mapping[str, Sequence[str]]

    def item_id(self, index: int) -> str:
        """How a turn is named in the LLM steps and in rejects."""
        middle = "" if self.name == LOG else f"{self.name.replace(' ', ':')}/"
        return f"{self.conversation_id}/{middle}{index}"


def dialogues_of(unit: Unit, kinds: Sequence[str]) -> Iterator[Dialogue]:
    personas = unit.conversation.personas
    if LOG in kinds:
        turns = tuple(
            Turn(r.response_index, r.speaker, r.text, r.session_index, r.is_padding) for r in unit.stamped.responses
        )
        yield Dialogue(LOG, unit.conversation_id, turns, (), personas)
    if SESSION6 in kinds:
        for record in unit.records_of("teabag"):
            history = tuple(history_turns(record["history"]))
            after = max((t.session_index for t in history), default=-1) + 1
            turns = tuple(Turn(k, t["speaker"], t["text"], after) for k, t in enumerate(record["session6"]))
            yield Dialogue(f"session6 {record['question_id']}", unit.conversation_id, turns, history, personas)
    if PSEUDO in kinds:
        for record in unit.records_of("persona_sql_episodes"):
            turns = tuple(Turn(k, line["speaker"], line["text"], 0) for k, line in enumerate(record["lines"]))
            facts = {p["speaker"]: p["facts"] for p in record["personas"]}
            yield Dialogue("pseudo-dialogue", unit.conversation_id, turns, (), facts)


def history_turns(history: Sequence[Mapping]) -> Iterator[Turn]:
    position = 0
    for session in history:
        for turn in session["turns"]:
            yield Turn(position, turn["speaker"], turn["text"], int(session["session"]))
            position += 1
