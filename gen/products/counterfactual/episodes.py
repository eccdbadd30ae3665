"""Which conversations become TeaBag episodes, and what an episode holds before any model call.

An episode needs at least `sessions` sessions (the history; 5 in the published set); shorter conversations are
skipped and counted. At most `episodes` are taken from each source file, in the source's order: the run sees
conversations in batches, and taking them in order is what keeps the choice the same however they are batched.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from gen.conversation import Conversation
from gen.products.base import Unit

SHORT = "fewer sessions than the history needs"
OVER_LIMIT = "past the episodes limit of its source"
CORPUS = {"msc_self_instruct": "msc"}  # source formats that are one corpus for scoring


@dataclass(frozen=True)
class Episode:
    """One episode: its history (the first `sessions` sessions) as lines, and its two speakers."""

    conversation: Conversation
    sessions: int

    @property
    def episode_id(self) -> str:
        return self.conversation.conversation_id

    @property
    def speakers(self) -> tuple[str, str]:
        return self.conversation.speakers

    @property
    def source(self) -> str:
        return source_of(self.conversation)

    def history(self) -> list[dict]:
        return history_of(self.conversation, self.sessions)

    def last_session(self) -> list[dict[str, str]]:
        return self.history()[-1]["turns"]


def source_of(conversation: Conversation) -> str:
    """The corpus a conversation comes from (msc, cc, ...), as scores are reported per source."""
    fmt = str(conversation.metadata.get("source_format") or conversation.conversation_id.split("/", 1)[0])
    return CORPUS.get(fmt, fmt)


def history_of(conversation: Conversation, sessions: int) -> list[dict]:
    return [
        {"session": number, "turns": [{"speaker": t.speaker, "text": t.text} for t in session.turns]}
        for number, session in enumerate(conversation.sessions[:sessions], start=1)
    ]


class Selection:
    """Takes episodes batch after batch, counting per source file what it took and what it skipped and why."""

    def __init__(self, sessions: int, per_source: int) -> None:
        self.sessions, self.per_source = sessions, per_source
        self.taken: Counter[str] = Counter()
        self.skipped: Counter[str] = Counter()

    def take(self, units: Sequence[Unit]) -> list[Episode]:
        chosen = []
        for unit in units:
            conversation = unit.conversation
            if len(conversation.sessions) < self.sessions:
                self.skipped[SHORT] += 1
            elif self.taken[conversation.source_file] >= self.per_source:
                self.skipped[OVER_LIMIT] += 1
            else:
                self.taken[conversation.source_file] += 1
                chosen.append(Episode(conversation, self.sessions))
        return chosen
