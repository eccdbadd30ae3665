"""A dialogue's turns with their vectors, and what a replying speaker could have remembered when asked a query:
earlier sessions' turns (the dialogue's own, and its history), the speaker's persona facts, or what a memory
system retrieved before the reply (a retrieval file)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gen.errors import GenError
from gen.products.quality import retrieval, vectors
from gen.products.quality.dialogues import Dialogue, Turn
from gen.products.quality.options import QualityLabelsOptions


def texts_of(dialogue: Dialogue) -> list[str]:
    """Everything of a dialogue the labels encode: its history, its turns, its speakers' persona facts."""
    facts = [fact for speaker_facts in dialogue.personas.values() for fact in speaker_facts]
    return [t.text for t in (*dialogue.history, *dialogue.turns)] + facts


class Turns:
    """The dialogue's turns, its history and its speakers' persona facts, encoded in one pass; turn i's vector is
    `vector(i)`, a speaker's facts' vectors `fact_vectors[speaker]`."""

    def __init__(self, dialogue: Dialogue) -> None:
        self.turns, self.history = dialogue.turns, dialogue.history
        encoded = vectors.encode(texts_of(dialogue))
        size = len(self.history) + len(self.turns)
        self.vectors = encoded[:size]
        self.fact_vectors: dict[str, Any] = {}
        for speaker, facts in dialogue.personas.items():
            self.fact_vectors[speaker], size = encoded[size : size + len(facts)], size + len(facts)

    def vector(self, index: int) -> Any:
        return self.vectors[len(self.history) + index]

    def persona_cosine(self, index: int, speaker: str) -> float | None:
        """The turn's best cosine to one of its speaker's persona facts (None for a speaker without facts)."""
        facts = self.fact_vectors.get(speaker)
        return None if facts is None or not len(facts) else float((facts @ self.vector(index)).max())

    def neighbour(self, index: int, step: int) -> Turn | None:
        """The turn before (step -1) or after (+1) in the same session, if any."""
        other = index + step
        if 0 <= other < len(self.turns) and self.turns[other].session_index == self.turns[index].session_index:
            return self.turns[other]
        return None

    def cosine(self, a: int, b: int) -> float:
        return float(self.vector(a) @ self.vector(b))


class Memories:
    """Each query's nearest memories and s_max. Earlier-session memories are named by their position: in the
    history for a dialogue that has one (a TeaBag session 6), else in the dialogue (the log's response index)."""

    def __init__(
        self, dialogue: Dialogue, turns: Turns, options: QualityLabelsOptions, retrieval_path: Path | None = None
    ) -> None:
        self.turns, self.options, self.personas = turns, options, dialogue.personas
        self.conversation_id, self.retrieval_path = dialogue.conversation_id, retrieval_path
        self._earlier: dict[int, tuple[list[int], Any]] = {}

    def nearest(self, query: int, reply: int, speaker: str) -> tuple[list[Any], float | None]:
        """(the memories used, best first; s_max), or ([], None) when there is nothing to retrieve."""
        vector = self.turns.vector(query)
        if self.retrieval_path is not None:
            return self.retrieved(reply, vector)
        if self.options.memories == "personas":
            facts = self.personas.get(speaker) or []
            if not facts:
                return [], None
            scores = self.turns.fact_vectors[speaker] @ vector
            order = sorted(range(len(facts)), key=lambda i: (-scores[i], i))[: self.options.memory_top_k]
            return [facts[i] for i in order], float(scores[order[0]])
        names, memory_vectors = self.earlier(self.turns.turns[query].session_index)
        if not names:
            return [], None
        import numpy as np  # only when labelling (vectors.py)

        scores = memory_vectors @ vector
        # the names rise with the rows, so a stable sort breaks ties by name, as the validator does
        ranked = np.argsort(-scores, kind="stable")[: self.options.memory_top_k]
        return [names[i] for i in ranked], float(scores[ranked[0]])

    def earlier(self, session: int) -> tuple[list[int], Any]:
        """The names and vectors of every turn of a session before `session`, padding left out (worked out once
        per session: every query of a session has the same memories)."""
        if session not in self._earlier:
            history = self.turns.history
            if history:  # a history's rows come first in the vectors
                found = [(row, t.index) for row, t in enumerate(history) if t.session_index < session]
            else:  # no history: a turn's row is its index
                found = [(t.index, t.index) for t in self.turns.turns if t.session_index < session and not t.is_padding]
            self._earlier[session] = ([name for _, name in found], self.turns.vectors[[row for row, _ in found]])
        return self._earlier[session]

    def retrieved(self, reply: int, vector: Any) -> tuple[list[Any], float | None]:
        """The first memory_top_k responses the file says were retrieved before `reply`, in its order."""
        assert self.retrieval_path is not None
        used = retrieval.load(self.retrieval_path).get((self.conversation_id, reply), [])[: self.options.memory_top_k]
        late = [index for index in used if index >= reply]
        if late:
            raise GenError(
                f"response {late[0]} is retrieved for reply {reply} of {self.conversation_id}, but does not come "
                "before it",
                file=self.retrieval_path,
                field="retrieved",
                expected="indices of responses before the reply",
            )
        if not used:
            return [], None
        return used, float(max(self.turns.vectors[used] @ vector))
