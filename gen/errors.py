"""The one error type users see: it names where the problem is and what was expected."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# A URL: its credentials (user:password@) and its query string or fragment may hold a secret. The scheme is at
# most 32 characters: unbounded, each place in a long word would be tried against the whole rest of the word
# (quadratic time: a megabyte of letters took the better part of an hour); bounded, the search is linear.
URL = re.compile(
    r"(?P<scheme>[A-Za-z][\w+.-]{0,31}://)(?P<userinfo>[^/\s@\"']*@)?(?P<rest>[^\s?#\"']*)(?P<query>[?#][^\s\"']*)?"
)


def redact_urls(text: str) -> str:
    """`text` with every URL's userinfo and query string replaced by "***": messages quote what a user wrote,
    and a URL may carry a password or a token."""
    return URL.sub(
        lambda found: (
            found["scheme"] + ("***@" if found["userinfo"] else "") + found["rest"] + ("?***" if found["query"] else "")
        ),
        text,
    )


MAX_PART_CHARS = 300  # of each place (file, record, field), of `expected`, and of each word of the message
MAX_MESSAGE_CHARS = 2000  # of the message as a whole: gen's own sentences, with the values it quotes cut
LONG_WORD = re.compile(rf"\S{{{MAX_PART_CHARS + 1},}}")


def shorten(text: str, limit: int = MAX_PART_CHARS) -> str:
    """`text` cut to about `limit` characters, its start and its end kept around "… (N characters) …"."""
    if len(text) <= limit:
        return text
    head, tail = text[: limit * 2 // 3], text[len(text) - limit // 6 :]
    return f"{head}… ({len(text):,} characters) …{tail}"


def visible(place: str) -> str:
    """A place as it reads: quoted, with escapes, when it begins or ends with white space or holds a character
    that does not print (a control or a bidi mark could hide or reorder what the message says)."""
    return place if place.isprintable() and place == place.strip() else repr(place)


@dataclass
class GenError(Exception):
    """A user-facing error (bad input, bad recipe, refused key...). The CLI prints it without a traceback.

    `file`, `record` and `field` locate the problem; `expected` says what would have been accepted. Every
    message is built here, in time linear in its parts, and each place, each word of the message and what was
    expected is cut to MAX_PART_CHARS (after URLs are redacted, so a cut never hides the end of a secret from the
    redaction): a message may quote a value from a file, and that value may be megabytes long. The message's own
    sentences (a stop says how to resume) are kept up to MAX_MESSAGE_CHARS.
    """

    message: str
    file: str | Path | None = None
    record: str | None = None
    field: str | None = None
    expected: str | None = None
    exit_code: int = 2  # the CLI's exit status: 2 for bad input and usage

    def __post_init__(self) -> None:
        super().__init__(str(self))

    def __str__(self) -> str:
        parts = [
            shorten(redact_urls(visible(str(part))))
            for part in (self.file, self.record, self.field)
            if part is not None
        ]
        message = LONG_WORD.sub(lambda word: shorten(word.group()), redact_urls(self.message))
        text = ": ".join([*parts, shorten(message, MAX_MESSAGE_CHARS)])
        if self.expected:
            text += f" (expected {shorten(redact_urls(self.expected))})"
        return text


@dataclass
class Stopped(GenError):
    """The run stopped before its end (reject limit, an endpoint given up on, Ctrl-C). What was made so far is
    kept: the runner writes `rejects` (records with a reason and the raw reply) with the others, and a report
    with this message as the stop reason, then names the folder it kept."""

    rejects: list[dict[str, Any]] = field(default_factory=list)
    exit_code: int = 1
    resume: str = ""  # what to do next, when it is not "run the same command again"
