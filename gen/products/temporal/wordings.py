"""Wordings of the time-query products: time phrases, question frames and dialogue frames.

All wording is in templates/ (Python only supplies variables and splits the output into lines):

  time_queries/phrases/<test>.j2   one time phrase per output line, e.g. "in our {{ session_ordinal }} conversation"
  time_queries/frames.j2           one question frame per output line, with the slot {{ time }}
  ambiguous/frames/<name>.j2       dialogue frames: turns "A: ..." / "B: ...", variants separated by blank lines
  ambiguous/resolved.j2            the unambiguous question for a dialogue (first non-empty line, slot {{ time }})

Phrase templates get, for each integer parameter X of the base question, `X` (the numeral in the current
style: "5" or "five"; the words style spells out 0-100 only, "236 days ago" stays in digits), `X_ordinal`
("5th" or "fifth") and `X_value` (the int); for each date parameter (`date`, `first_date`, `last_date`, with
prefix "" / "first_" / "last_") `month` ("May"), `day` ("8"), `day_ordinal` ("8th" or "eighth"), `year`
("2023") and `weekday` ("Monday"); for a month parameter `month` and `year`; and `yearless_ok` (true when
leaving the year out cannot name a second date or month of the conversation), `test` and `style`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import date

from gen.calendar_names import month_name
from gen.errors import GenError
from gen.products.date_words import cardinal, date_variables, ordinal
from gen.templating import Templates

SLOT = "\x00time\x00"  # stands for the time phrase while a frame is rendered; replaced afterwards
DATE_PREFIXES = {"date": "", "first_date": "first_", "last_date": "last_"}
FRAMES = "time_queries/frames.j2"
DIALOGUE_DIR = "ambiguous/frames/"
RESOLVED = "ambiguous/resolved.j2"
TURN = re.compile(r"^(A|B):\s*(.+)$")


def phrase_variables(test: str, params: dict, style: str, yearless_ok: bool) -> dict:
    variables = {"test": test, "style": style, "yearless_ok": yearless_ok}
    for key, value in params.items():
        if isinstance(value, int):
            variables.update(
                {key: cardinal(value, style), f"{key}_ordinal": ordinal(value, style), f"{key}_value": value}
            )
        elif key in DATE_PREFIXES:
            variables.update(date_variables(date.fromisoformat(value), style, DATE_PREFIXES[key]))
        elif key == "month":
            year, month = map(int, value.split("-"))
            variables.update({"month": month_name(month), "year": str(year)})
        else:
            variables[key] = value
    return variables


def lines(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines() if line.strip()]


class Wordings:
    """Renders phrases and frames for one recipe (its templates), caching what does not vary."""

    def __init__(self, templates: Templates, styles: Sequence[str]):
        self.templates = templates
        self.styles = styles
        self._frames: dict[str, list[str]] = {}
        self._resolved: str | None = None
        self._dialogues: dict[tuple, list[tuple[str, int, tuple[tuple[str, str], ...]]]] = {}
        self._phrases: dict[tuple, list[tuple[str, str]]] = {}

    @classmethod
    def for_recipe(cls, templates: Templates, styles: Sequence[str]) -> Wordings:
        """One Wordings per templates folder and styles in a process, so frames are rendered once per run."""
        key = (templates, tuple(styles))
        if key not in _SHARED:
            _SHARED[key] = cls(templates, styles)
        return _SHARED[key]

    # --- time phrases -----------------------------------------------------------------------------------

    def phrases(self, test: str, params: dict, yearless_ok: bool) -> list[tuple[str, str]]:
        """(phrase, style) pairs, distinct phrases only (a phrase without numerals reads the same in every style).
        They follow from the test, the params and yearless_ok alone, so each is rendered once per run: the same
        session numbers, days ago and dates come back in every conversation, and a validator asking again for
        the same base question gets the list the build rendered."""
        key = (test, tuple(sorted(params.items())), yearless_ok)
        found = self._phrases.get(key)
        if found is None:
            if len(self._phrases) >= PHRASE_CACHE_SIZE:
                self._phrases.clear()
            found = self._phrases[key] = self.render_phrases(test, params, yearless_ok)
        return found

    def render_phrases(self, test: str, params: dict, yearless_ok: bool) -> list[tuple[str, str]]:
        out: dict[str, str] = {}
        name = f"time_queries/phrases/{test}.j2"
        for style in self.styles:
            for phrase in lines(self.templates.render(name, **phrase_variables(test, params, style, yearless_ok))):
                out.setdefault(phrase, style)
        if not out:
            raise GenError(
                f"no time phrase for {test} {params}",
                file=name,
                expected="at least one line of output for every base question of the test",
            )
        return list(out.items())

    # --- question frames --------------------------------------------------------------------------------

    def frames(self, test: str) -> list[str]:
        """Question frames for a test, each holding SLOT once."""
        if test not in self._frames:
            found = lines(self.templates.render(FRAMES, test=test, time=SLOT))
            for frame in found:
                require_one_slot(frame, FRAMES)
            if not found:
                raise GenError(
                    f"no question frame for test {test!r}", file=FRAMES, expected="at least one line with {{ time }}"
                )
            self._frames[test] = found
        return self._frames[test]

    # --- dialogue frames (ambiguous) --------------------------------------------------------------------

    def dialogue_frame_names(self) -> list[str]:
        names = self.templates.names(DIALOGUE_DIR)
        if not names:
            raise GenError("no dialogue frames found", file=DIALOGUE_DIR, expected="one or more <name>.j2 files")
        return [n[len(DIALOGUE_DIR) : -len(".j2")] for n in names]

    def dialogues(self, test: str, speakers: tuple[str, str], only: list[str] | None = None):
        """[(frame name, variant number, ((speaker, text with SLOT), ...))] for one test and speaker pair."""
        key = (test, speakers, tuple(only or ()))
        if key not in self._dialogues:
            out = []
            for name in self.dialogue_frame_names():
                if only and name not in only:
                    continue
                source = f"{DIALOGUE_DIR}{name}.j2"
                text = self.templates.render(source, test=test, time=SLOT, speaker_a=speakers[0], speaker_b=speakers[1])
                for number, block in enumerate(re.split(r"\n\s*\n", text.strip()), start=1):
                    if block.strip():
                        out.append((name, number, parse_dialogue(block, speakers, source)))
            self._dialogues[key] = out
        return self._dialogues[key]

    def resolved(self, phrase: str) -> str:
        if self._resolved is None:
            found = lines(self.templates.render(RESOLVED, time=SLOT))
            if not found:
                raise GenError("empty template", file=RESOLVED, expected="one line with {{ time }}")
            require_one_slot(found[0], RESOLVED)
            self._resolved = found[0]
        return self._resolved.replace(SLOT, phrase)


_SHARED: dict[tuple, Wordings] = {}
PHRASE_CACHE_SIZE = 100_000  # phrase lists kept per Wordings (one per test, params, yearless_ok); cleared when full


def require_one_slot(text: str, template: str) -> None:
    if text.count(SLOT) != 1:
        raise GenError(
            f"a frame must contain {{{{ time }}}} exactly once: {text.replace(SLOT, '{{ time }}')!r}",
            file=template,
            expected="the time phrase slot {{ time }} once per frame line",
        )


def parse_dialogue(block: str, speakers: tuple[str, str], source: str) -> tuple[tuple[str, str], ...]:
    turns = []
    for line in lines(block):
        match = TURN.match(line)
        if not match:
            raise GenError(
                f"a dialogue line must start with 'A:' or 'B:': {line.replace(SLOT, '{{ time }}')!r}",
                file=source,
                expected="turns 'A: text' (speaker_a) and 'B: text' (speaker_b)",
            )
        turns.append((speakers[0] if match.group(1) == "A" else speakers[1], match.group(2).strip()))
    slots = [SLOT in text for _, text in turns]
    if len(turns) < 2 or sum(slots) != 1 or slots[-1] or turns[-1][0] != speakers[0]:
        shown = " / ".join(f"{s}: {t}" for s, t in turns).replace(SLOT, "{{ time }}")
        raise GenError(
            f"bad dialogue variant: {shown!r}",
            file=source,
            expected="two or more turns, {{ time }} in exactly one turn before the last, "
            "and the last turn (the ambiguous request) spoken by A",
        )
    return tuple(turns)
