"""The canonical conversation every source adapter produces: two speakers and their sessions of turns, each
session with a start date or the gap since the previous one (gen/timeline.py places them on a clock)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

MIN_YEAR = 1000  # timestamps are written and read as four-digit years (ISO 8601), so every date keeps four


@dataclass(frozen=True, slots=True)
class Turn:
    speaker: str
    text: str
    source_turn_id: str | None = None
    image_caption: str | None = None
    time: datetime | None = None  # when it was said, where the source says so (an observed clock keeps it)
    word_count: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:  # counted once: timestamps, padding and selection all need it
        object.__setattr__(self, "word_count", len(self.text.split()))

    # A run pickles every turn into its store and reads them back in each worker: as a plain tuple, both take
    # half the time of the dataclass default (which looks up the fields for every turn).
    def __getstate__(self) -> tuple:
        return (self.speaker, self.text, self.source_turn_id, self.image_caption, self.time, self.word_count)

    def __setstate__(self, state: tuple) -> None:
        speaker, text, source_turn_id, image_caption, time, word_count = state
        set_field = object.__setattr__
        set_field(self, "speaker", speaker)
        set_field(self, "text", text)
        set_field(self, "source_turn_id", source_turn_id)
        set_field(self, "image_caption", image_caption)
        set_field(self, "time", time)
        set_field(self, "word_count", word_count)


@dataclass(frozen=True, slots=True)
class Session:
    """One sitting. Sources with absolute dates set `start`; relative sources (MSC, CC) set
    `gap_before` instead: the time from the end of the previous session to the start of this one."""

    turns: tuple[Turn, ...]
    start: datetime | None = None
    gap_before: timedelta | None = None
    label: str = ""  # how the source names the session, for error messages (e.g. "session_3")

    @property
    def word_count(self) -> int:
        return sum(turn.word_count for turn in self.turns)


SIMULATED = "simulated"  # session starts (or gaps) from the source, each response's time from the speaking rate
OBSERVED = "observed"  # every turn keeps the time its source gives it (docs/timestamps.md, "Observed clocks")
CLOCKS = (OBSERVED, SIMULATED)


@dataclass(frozen=True, slots=True)
class Conversation:
    conversation_id: str  # source-prefixed, e.g. "locomo/conv-26"
    speakers: tuple[str, str]
    sessions: tuple[Session, ...]
    personas: dict[str, list[str]] = field(default_factory=dict)
    metadata: dict = field(default_factory=dict)
    source_file: str = ""
    clock: str = SIMULATED  # OBSERVED: every turn has its `time`, checked by gen/sources/clock.py

    @property
    def word_count(self) -> int:
        return sum(session.word_count for session in self.sessions)

    @property
    def session_count(self) -> int:
        return len(self.sessions)


class DataWarning(UserWarning):
    """Input gen accepts but that may not be what was meant (e.g. a session number skipped); the command line
    prints each as one `warning:` line and goes on."""
