"""An episode's pseudo-dialogue: its two personas interleaved line by line, cut into overlapping pairs.

Speaker 1's first fact, then Speaker 2's first, and so on; when one persona runs out, the other's remaining
facts follow in order. Pair k is lines k and k+1 (stride 1), so n lines make n − 1 pairs, and the label of a pair
stores what its second line says about that line's speaker.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise, zip_longest

from gen.conversation import Conversation
from gen.errors import GenError


@dataclass(frozen=True)
class Line:
    speaker: str
    text: str

    def to_dict(self) -> dict[str, str]:
        return {"speaker": self.speaker, "text": self.text}


def personas(conversation: Conversation, which: str) -> dict[str, list[str]]:
    """The episode's two personas (speaker → facts): the source's current ones, or with `which` =
    "init_personas" the ones ParlAI MSC files record for the start of the episode."""
    found = conversation.personas if which == "personas" else conversation.metadata.get("init_personas") or {}
    if not all(isinstance(found.get(s), list) for s in conversation.speakers):
        raise GenError(
            f"no {which} for both speakers",
            file=conversation.source_file or None,
            record=conversation.conversation_id,
            field=which,
            expected="a persona (a list of facts) per speaker: MSC persona pairs, ParlAI MSC session files or "
            "MSC-Self-Instruct"
            + ("; init_personas only ParlAI MSC session files carry" if which == "init_personas" else ""),
        )
    return {
        speaker: [str(fact).strip() for fact in found[speaker] if str(fact).strip()]
        for speaker in conversation.speakers
    }


def pseudo_dialogue(speakers: tuple[str, str], facts: dict[str, list[str]]) -> list[Line]:
    first, second = speakers
    lines = []
    for a, b in zip_longest(facts[first], facts[second]):
        if a is not None:
            lines.append(Line(first, a))
        if b is not None:
            lines.append(Line(second, b))
    return lines


def pairs(lines: list[Line]) -> list[tuple[Line, Line]]:
    return list(pairwise(lines))
