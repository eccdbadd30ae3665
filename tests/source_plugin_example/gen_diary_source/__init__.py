"""A diary: one message per line, `2024-05-01 08:00 | Ann | Good morning!`; a line `# name` starts the
conversation called name. gen reads it once a recipe says `format: diary`."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

from pydantic import Field

from gen.errors import GenError
from gen.reading import text_lines
from gen.sources.messages import Rules, Said, conversations
from gen.sources.registry import SourceFormat
from gen.validation import InputModel

EXPECTED = "lines of `date time | speaker | text`, each conversation after a line `# name`"


class DiaryOptions(InputModel):
    break_minutes: float = Field(default=60, gt=0, description="a pause this long starts a new sitting")


def read(path: Path, expected: str) -> Iterator[tuple[str, str]]:
    """("line N", text) per non-blank line, through gen's bounded reader."""
    for number, text in text_lines(path, expected):
        yield f"line {number}", text.rstrip("\n")


def parse(records, origin, spec, options: DiaryOptions):
    def said() -> Iterator[Said]:
        conversation = "diary"
        for where, line in records:
            if line.startswith("#"):
                conversation = line[1:].strip()
                continue
            parts = [part.strip() for part in line.split("|", 2)]
            if len(parts) != 3 or not all(parts):
                raise GenError("not three parts", file=origin, record=where, expected=EXPECTED)
            try:
                time = datetime.fromisoformat(parts[0])
            except ValueError:
                raise GenError(
                    f"cannot read {parts[0]!r}",
                    file=origin,
                    record=where,
                    field="time",
                    expected="an ISO date and time",
                ) from None
            yield Said(conversation, parts[1], parts[2], time, None, where)

    rules = Rules(
        origin=origin, prefix="diary", clock=spec.clock, break_minutes=options.break_minutes, source_format="diary"
    )
    return conversations(said(), rules)


DIARY = SourceFormat(EXPECTED, parse, read=read, Options=DiaryOptions)
