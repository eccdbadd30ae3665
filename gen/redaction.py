"""The recipe's optional `redact:` step: emails, phone numbers, URLs and listed names in the conversations are
replaced by placeholders as each conversation is read, before it is stored (gen/pipeline/shards.py: prepare).

Every product and every validator reads conversations from that store only, so they all see the same redacted
text and the ground truth stays consistent with it; no other path reads a source's texts for a product. What is
replaced, and how many of each kind, goes into run.json (`redaction`) and the card.

How each kind is found:
  phone numbers  Google's libphonenumber rules (the `phonenumbers` package, PhoneNumberMatcher with the VALID
                 leniency): a number written with its country code (+44 20 7946 0958) is found anywhere; one
                 written the national way ((415) 555-0132, 020 7946 0958) only with `phone_region`, the country
                 whose national forms to read. VALID keeps years, dates, prices and version numbers out.
  emails         a regular expression: no small, well-kept library finds addresses inside running text (the
                 known ones validate a single address). Unicode letters count in both parts.
  URLs           a regular expression for links with a scheme (https://, ftp://...) or starting with www., and for
                 bare domains under the endings in BARE_DOMAIN_ENDINGS, written in lower case; punctuation that ends
                 a sentence stays out, and so does a closing bracket unless the link opened it (a Wikipedia
                 link's parentheses); a full-width stop or comma (Chinese, Japanese) ends a link.
  names          the recipe's list, as whole words (Ann is not replaced inside Annabel or Joanna), with runs of
                 spaces inside a name matching any spaces, case-sensitive unless `ignore_case`.

Matches are gathered from the original text and replaced in one pass: where two overlap, the one that starts
first wins (at the same start, the longer), so a link that holds an address is one [URL], and a placeholder is
never searched again. A speaker's name goes through the same replacement; should both speakers of a
conversation end up with the same name, they are told apart as "<name> 1" and "<name> 2".
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any

from pydantic import Field, field_validator, model_validator

from gen.conversation import Conversation, DataWarning, Turn
from gen.validation import InputModel

# Bump when what a setting finds changes (a pattern, a library option): the recipe fingerprint includes it, so
# a run redacted by other rules never shares a fingerprint with this one.
RULES_VERSION = 1
KINDS = ("email", "phone", "url", "name")

# Bare domains (no scheme, no www.) are links only under these endings: any ending would turn "end.So" or
# "file.txt" into links, and these are the ones people write bare.
BARE_DOMAIN_ENDINGS = ("com", "org", "net", "edu", "gov", "io", "info", "co.uk", "org.uk", "me", "app", "dev")

EMAIL = re.compile(
    r"(?<![\w.+-])"  # not in the middle of a longer word
    r"[\w!#$%&'*+/=?^`{|}~-]+(?:\.[\w!#$%&'*+/=?^`{|}~-]+)*"  # the local part: dots between, not at either end
    r"@(?:[^\W_](?:[\w-]*[^\W_])?\.)+[^\W\d_]{2,}(?![\w-])"  # the domain: labels and a top-level name of letters
)
CJK_STOPS = "。，、；：！？（）「」『』【】"  # text without spaces goes on after a link: these end it
LINK_BODY = rf"[^\s<>\"{CJK_STOPS}]"
SCHEMED = re.compile(rf"(?:(?<![\w.+-])[a-zA-Z][a-zA-Z0-9+.-]*://|(?<![\w.@/-])[wW]{{3}}\.){LINK_BODY}+")
# the ending in lower case, as a domain is written: "ASP.NET" and "end.So" are words, "Example.com" a link
BARE = re.compile(
    r"(?<![\w.@/-])(?:[^\W_](?:[\w-]*[^\W_])?\.)+(?:"
    + "|".join(re.escape(ending) for ending in BARE_DOMAIN_ENDINGS)
    + rf")(?![\w@-])(?:[/?#]{LINK_BODY}*)?"
)
TRAILING = ".,;:!?'\"…。，、；：！？"  # end a sentence, not a link
CLOSERS = {")": "(", "]": "[", "}": "{", "）": "（", "」": "「", "』": "『", "】": "【", ">": "<"}
BRACKETS = set(CLOSERS) | set(CLOSERS.values())
DIGIT = re.compile(r"\d")  # Unicode digits too: a phone number needs one, and most texts have none
# a name must not go on into a letter, a digit or a combining mark (e + U+0308 is "ë" written in two parts)
NAME_END = r"(?![\w\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f])"


class Placeholders(InputModel):
    """What each kind of match is replaced with."""

    email: str = Field(default="[EMAIL]", min_length=1)
    phone: str = Field(default="[PHONE]", min_length=1)
    url: str = Field(default="[URL]", min_length=1)
    name: str = Field(default="[NAME]", min_length=1)


class RedactSpec(InputModel):
    """The recipe's `redact:` section: what is replaced before anything is built (docs/personal-data.md says how
    each kind is found)."""

    emails: bool = Field(default=True, description="replace email addresses")
    phones: bool = Field(default=True, description="replace phone numbers")
    phone_region: str | None = Field(
        default=None,
        description="the country (two letters, e.g. GB, US) whose national number forms are read; without it, "
        "only numbers written with their country code (+44 ...) are found",
    )
    urls: bool = Field(default=True, description="replace links")
    names: list[str] = Field(default=[], description="names to replace, as whole words")
    ignore_case: bool = Field(default=False, description="names match whatever their case (ann, ANN)")
    placeholders: Placeholders = Placeholders()

    @field_validator("phone_region")
    @classmethod
    def known_region(cls, value: str | None) -> str | None:
        if value is None:
            return None
        import phonenumbers

        region = value.strip().upper()
        if region not in phonenumbers.SUPPORTED_REGIONS:
            raise ValueError(f"{value!r} is not a region phonenumbers knows: give a two-letter country code such as GB")
        return region

    @field_validator("names")
    @classmethod
    def usable_names(cls, names: list[str]) -> list[str]:
        for index, name in enumerate(names):
            if not name.strip():
                raise ValueError(f"name {index + 1} is blank")
            if name != name.strip():
                raise ValueError(f"name {index + 1} ({name!r}) has spaces around it")
        return names

    @model_validator(mode="after")
    def replaces_something(self) -> RedactSpec:
        if not (self.emails or self.phones or self.urls or self.names):
            raise ValueError("every kind is off and no name is listed: there is nothing to replace")
        if self.phone_region is not None and not self.phones:
            raise ValueError("phone_region only applies when phones is true")
        for kind, placeholder in self.placeholders.model_dump().items():
            # a placeholder the rules would replace leaves in the text what it stands for (a name as its own
            # placeholder is the name, unredacted)
            if found := next((span for find in self.finders() for span in find(placeholder)), None):
                raise ValueError(
                    f"placeholders.{kind}: {placeholder!r} holds {placeholder[found.start : found.end]!r}, which "
                    f"this redaction replaces ({found.kind}): choose a placeholder such as [{kind.upper()}]"
                )
        return self

    def finders(self) -> list[Finder]:
        """What finds each kind this recipe replaces."""
        finders: list[Finder] = []
        if self.urls:
            finders.append(find_urls)
        if self.emails:
            finders.append(find_emails)
        if self.phones:
            finders.append(phone_finder(self.phone_region))
        if self.names:
            finders.append(name_finder(self.names, self.ignore_case))
        return finders

    @property
    def kinds(self) -> list[str]:
        """The kinds this recipe replaces, in KINDS order."""
        on = {"email": self.emails, "phone": self.phones, "url": self.urls, "name": bool(self.names)}
        return [kind for kind in KINDS if on[kind]]

    def fingerprinted(self) -> dict[str, Any]:
        """What the recipe fingerprint takes of this section: the settings and the version of the rules."""
        return {**self.model_dump(mode="json"), "rules_version": RULES_VERSION}

    def public(self) -> dict[str, Any]:
        """The settings as run.json and the card show them: the names are counted, never listed (they are what
        the redaction hides)."""
        shown = self.model_dump(mode="json", exclude={"names"})
        return {**shown, "kinds": self.kinds, "names": len(self.names), "rules_version": RULES_VERSION}


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    kind: str


Finder = Callable[[str], Iterator[Span]]


class Redactor:
    """The replacements one recipe asks for, compiled once; `conversation` applies them and counts what it
    replaced (`counts`, per kind, over every conversation it was given)."""

    def __init__(self, spec: RedactSpec) -> None:
        self.spec = spec
        self.placeholder = spec.placeholders.model_dump()
        self.counts: Counter[str] = Counter({kind: 0 for kind in spec.kinds})
        self.conversations = 0
        self.changed = 0
        self.finders = spec.finders()

    def text(self, text: str, counts: Counter[str]) -> str:
        """`text` with every match replaced; the replacements are added to `counts`."""
        spans = sorted((span for find in self.finders for span in find(text)), key=lambda s: (s.start, s.start - s.end))
        if not spans:
            return text
        parts: list[str] = []
        done = 0
        for span in spans:
            if span.start < done:  # inside a match already replaced
                continue
            parts += [text[done : span.start], self.placeholder[span.kind]]
            counts[span.kind] += 1
            done = span.end
        parts.append(text[done:])
        return "".join(parts)

    def conversation(self, conversation: Conversation) -> Conversation:
        """The conversation with its texts, speakers' names, personas and metadata redacted. Its id is kept (ids
        select conversations and tie every record to one); an id that holds a match is warned about."""
        counts: Counter[str] = Counter()
        speakers = self.speakers(conversation.speakers, counts)
        rename = dict(zip(conversation.speakers, speakers, strict=True))
        # dataclasses.replace keeps every field redaction does not touch (an observed clock, each turn's time)
        sessions = tuple(
            replace(session, turns=tuple(self.turn(turn, rename, counts) for turn in session.turns))
            for session in conversation.sessions
        )
        personas = {
            rename.get(name, name): [self.text(fact, counts) for fact in facts]
            for name, facts in conversation.personas.items()
        }
        metadata = self.value(conversation.metadata, rename, counts)
        self.conversations += 1
        self.changed += bool(counts)
        self.counts.update(counts)
        self.warn_about_id(conversation)
        return replace(conversation, speakers=speakers, sessions=sessions, personas=personas, metadata=metadata)

    def speakers(self, names: tuple[str, str], counts: Counter[str]) -> tuple[str, str]:
        first, second = (self.text(name, counts) for name in names)
        if first == second and names[0] != names[1]:  # both names replaced alike: keep them two people
            first, second = f"{first} 1", f"{second} 2"
        return first, second

    def turn(self, turn: Turn, rename: dict[str, str], counts: Counter[str]) -> Turn:
        text = self.text(turn.text, counts)
        caption = self.text(turn.image_caption, counts) if turn.image_caption else turn.image_caption
        speaker = rename.get(turn.speaker, turn.speaker)
        if text is turn.text and caption is turn.image_caption and speaker == turn.speaker:
            return turn
        return replace(turn, speaker=speaker, text=text, image_caption=caption)

    def value(self, value: Any, rename: dict[str, str], counts: Counter[str]) -> Any:
        """Metadata redacted: every string inside it, and keys that name a speaker renamed with the speaker."""
        if isinstance(value, str):
            return self.text(value, counts)
        if isinstance(value, dict):
            return {rename.get(key, key): self.value(item, rename, counts) for key, item in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(self.value(item, rename, counts) for item in value)
        return value

    def warn_about_id(self, conversation: Conversation) -> None:
        found: Counter[str] = Counter()
        self.text(conversation.conversation_id, found)
        if found:
            warnings.warn(
                DataWarning(
                    f"conversation id {conversation.conversation_id!r} holds what redaction replaces "
                    f"({', '.join(sorted(found))}); ids are kept as the source gives them, so rename it there"
                ),
                stacklevel=2,
            )

    def report(self) -> dict[str, Any]:
        """run.json's `redaction`: the settings (names counted, not listed) and what was replaced."""
        return {
            **self.spec.public(),
            "replaced": {kind: self.counts[kind] for kind in self.spec.kinds},
            "conversations_read": self.conversations,
            "conversations_changed": self.changed,
        }


# --- finders --------------------------------------------------------------------------------------


def find_emails(text: str) -> Iterator[Span]:
    if "@" not in text:
        return
    for match in EMAIL.finditer(text):
        yield Span(match.start(), match.end(), "email")


def find_urls(text: str) -> Iterator[Span]:
    if "." not in text and ":" not in text:
        return
    for match in (*SCHEMED.finditer(text), *BARE.finditer(text)):
        end = link_end(text, match.start(), match.end())
        if end > match.start():
            yield Span(match.start(), end, "url")


def link_end(text: str, start: int, end: int) -> int:
    """Where a link really ends: sentence punctuation after it is left out, and a closing bracket too unless
    the link holds its opening one. Brackets are counted once, so a link that ends in a long run of them takes
    linear time."""
    held = Counter(char for char in text[start:end] if char in BRACKETS)
    while end > start:
        last = text[end - 1]
        if last in CLOSERS and held[CLOSERS[last]] < held[last]:
            held[last] -= 1
        elif last not in TRAILING:
            break
        end -= 1
    return end


def phone_finder(region: str | None) -> Finder:
    import phonenumbers

    valid = phonenumbers.Leniency.VALID

    def find(text: str) -> Iterator[Span]:
        if DIGIT.search(text) is None:
            return
        for match in phonenumbers.PhoneNumberMatcher(text, region, leniency=valid):
            yield Span(match.start, match.end, "phone")

    return find


def name_finder(names: list[str], ignore_case: bool) -> Finder:
    """One pattern for every name, longest first (so "Ann Lee" wins over "Ann"), each in its composed and
    decomposed Unicode forms (Zoë typed either way)."""
    forms = {
        form for name in names for form in (unicodedata.normalize("NFC", name), unicodedata.normalize("NFD", name))
    }
    alternatives = [
        r"\s+".join(re.escape(word) for word in form.split()) for form in sorted(forms, key=len, reverse=True)
    ]
    pattern = re.compile(rf"(?<!\w)(?:{'|'.join(alternatives)}){NAME_END}", re.IGNORECASE if ignore_case else 0)

    def find(text: str) -> Iterator[Span]:
        for match in pattern.finditer(text):
            yield Span(match.start(), match.end(), "name")

    return find
