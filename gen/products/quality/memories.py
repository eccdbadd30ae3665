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


class Turns:
    """The dialogue's turns and its history, encoded in one pass; turn i's vector is `vector(i)`."""

    def __init__(self, dialogue: Dialogue) -> None:
        self.turns, self.history = dialogue.turns, dialogue.history
        self.vectors = vectors.encode([t.text for t in (*self.history, *self.turns)])

    def vector(self, index: int) -> Any:
        return self.vectors[len(self.history) + index]

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
        self.fact_vectors = (
            {speaker: vectors.encode(list(facts)) for speaker, facts in self.personas.items() if facts}
            if options.memories == "personas"
            else {}
        )

    def nearest(self, query: int, reply: int, speaker: str) -> tuple[list[Any], float | None]:
        """(the memories used, best first; s_max), or ([], None) when there is nothing to retrieve."""
        vector = self.turns.vector(query)
        if self.retrieval_path is not None:
            return self.retrieved(reply, vector)
        if self.options.memories == "personas":
            facts = self.personas.get(speaker) or []
            if not facts:
                return [], None
            scores = self.fact_vectors[speaker] @ vector
            order = sorted(range(len(facts)), key=lambda i: (-scores[i], i))[: self.options.memory_top_k]
            return [facts[i] for i in order], float(scores[order[0]])
        earlier = self.earlier(self.turns.turns[query].session_index)
        if not earlier:
            return [], None
        scores = self.turns.vectors[[row for row, _ in earlier]] @ vector
        named = [name for _, name in earlier]
        order = sorted(range(len(earlier)), key=lambda i: (-scores[i], named[i]))[: self.options.memory_top_k]
        return [named[i] for i in order], float(scores[order[0]])

    def earlier(self, session: int) -> list[tuple[int, int]]:
        """(row in the vectors, the memory's name) of every turn of an earlier session, padding left out."""
        history = self.turns.history
        if history:
            return [(row, t.index) for row, t in enumerate(history) if t.session_index < session]
        return [
            (len(history) + t.index, t.index)
            for t in self.turns.turns
            if t.session_index < session and not t.is_padding
        ]

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
