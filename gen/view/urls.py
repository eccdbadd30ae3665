"""The viewer's addresses: the one place that turns a config, a record's row, a question id or a conversation id
into a URL path, and a path's part back into what it names. Every link on every page is made here and every
route reads its part through here, so a link always opens the record it names, whatever the id holds.

The scheme:

- a record is `/records/CONFIG/N`, N counted from 1 as the tables show it;
- a question is `/questions/CONFIG/ID` and a conversation `/conversations/ID`, the id percent-encoded whole
  (a "/" in it becomes %2F, so `conv-1/tcq-001` is one part of the path);
- an id that cannot travel as a path part - empty, "." or ".." (which browsers resolve away, even encoded), one
  starting with the hash marker below, or one too long for a URL - is linked by the MD5 of its UTF-8 text:
  `/questions/CONFIG/~md5~HEX`. The viewer finds the record whose id has that hash.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

HASHED = "~md5~"  # marks an id given by its hash
LONGEST_ID_IN_URL = 1_000  # characters of the encoded id: well within every server's and browser's URL limits
MD5_HEX = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True)
class IdInUrl:
    """A question or conversation id read back from a URL: the id itself, or the MD5 hex of its UTF-8 text."""

    text: str | None = None
    md5: str | None = None

    def matches(self, value: Any) -> bool:
        shown = id_text(value)
        if self.md5 is not None:
            return md5(shown) == self.md5
        return shown == self.text


def id_text(value: Any) -> str:
    """How an id of any type is written in a URL: as DuckDB casts it to text, so a lookup finds it again."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return value if isinstance(value, str) else str(value)


def md5(text: str) -> str:
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest()


def part(text: str) -> str:
    """One path part: every byte but letters, digits and -._~ percent-encoded (so "/", "?", "#", "%" too)."""
    return quote(text, safe="")


def id_part(value: Any) -> str:
    text = id_text(value)
    encoded = part(text)
    if text in ("", ".", "..") or text.startswith(HASHED) or len(encoded) > LONGEST_ID_IN_URL:
        return HASHED + md5(text)
    return encoded


def read_id(raw: str) -> IdInUrl:
    """The id a route received (already percent-decoded by the server)."""
    if raw.startswith(HASHED) and MD5_HEX.match(raw[len(HASHED) :]):
        return IdInUrl(md5=raw[len(HASHED) :])
    return IdInUrl(text=raw)


def records_url(config: str) -> str:
    return f"/records/{part(config)}"


def record_url(config: str, number: int) -> str:
    """A record by its number in the config, counted from 1 (the first record is 1, as its table shows)."""
    return f"/records/{part(config)}/{number}"


def question_url(config: str, question_id: Any) -> str:
    return f"/questions/{part(config)}/{id_part(question_id)}"


def conversation_url(conversation_id: Any) -> str:
    return f"/conversations/{id_part(conversation_id)}"
