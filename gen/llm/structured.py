"""Parsers for model replies, JSON extraction, ``response_format`` and the correction-round message.

A task's ``parser`` is one of:

* ``None`` — the reply text is the value;
* a pydantic model class — JSON is taken out of the reply (a bare object, a fenced block or the first
  JSON value in the text) and validated; the endpoint is asked for that JSON schema through
  ``response_format`` when it supports it (``structured_output: json_schema``), for JSON mode with
  ``json_object``, and nothing with ``off``;
* :class:`Checked` — a pydantic model and rules on the validated value: the schema is sent and validated as for
  the model alone, then ``rules(value)`` runs; a ``ValueError`` it raises is a parse failure whose message the
  model sees in the correction round (for rules a model can fix by reading its own reply again, such as
  "cite only the responses shown");
* a function ``text -> value`` — raise ``ValueError`` (or ``TypeError``/``KeyError``/``IndexError``) with a
  message the model can act on; that message is shown to the model in the correction round.
  ``extract_json(text)`` is available to such functions.

The modes an endpoint may take ``response_format`` in are :data:`CANDIDATES`, in the order the
``structured_output: auto`` probe tries them (gen/llm/probes/mode.py); :class:`ModeChoice` is the one an
``auto`` endpoint ended with. They live here, beside :func:`response_format_for` that turns a mode into a
request field, so an endpoint can hold its mode without knowing how it was found.
"""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from gen.templating import INSTALLED, Templates

if TYPE_CHECKING:
    from typing_extensions import TypeIs

__all__ = [
    "CANDIDATES",
    "Checked",
    "ModeChoice",
    "ParseFailure",
    "correction_message",
    "extract_json",
    "parse_reply",
    "response_format_for",
    "schema_of",
]


@dataclass(frozen=True)
class Checked:
    """A schema with rules on top (see the module docstring). Rules that depend on the item (the indices it may
    cite) go in a closure, so a task's parser can be made per item; the cache key does not depend on it."""

    model: type[BaseModel]
    rules: Callable[[Any], None]  # raises ValueError saying what to fix


Parser = type[BaseModel] | Checked | Callable[[str], Any] | None

CORRECTION_TEMPLATE = "llm/correction.j2"
_FENCE = re.compile(r"```(?:json|JSON)?\s*\n?(.*?)```", re.S)


class ParseFailure(ValueError):
    """The reply could not be turned into a value; the message says why (shown to the model)."""


MAX_REPLY_CHARS = 1_000_000  # far above any structured reply a step asks for
MAX_STARTS = 64  # places a JSON value may start at that are tried in a reply with text around it


def extract_json(text: str) -> Any:
    """The JSON value in a reply: the whole text, a fenced block, or the first ``{...}``/``[...]`` in it. The
    reply is read within limits (size, nesting, a bounded number of places to start), so no reply, however built,
    costs more than a moment or ends other than as a value or a ParseFailure."""
    if len(text) > MAX_REPLY_CHARS:
        raise ParseFailure(f"the reply is {len(text):,} characters long, more than {MAX_REPLY_CHARS:,}")
    stripped = text.strip()
    candidates = [stripped, *(block.strip() for block in _FENCE.findall(text))]
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):  # RecursionError: nested past the parser's depth (~1,000)
            continue
    decoder = json.JSONDecoder()
    starts = (index for index, char in enumerate(text) if char in "{[")
    for index in itertools.islice(starts, MAX_STARTS):
        try:
            value, _ = decoder.raw_decode(text, index)
        except (ValueError, RecursionError):
            continue
        if isinstance(value, (dict, list)):
            return value
    raise ParseFailure("the reply contains no valid JSON value")


def _is_model(parser: Any) -> TypeIs[type[BaseModel]]:
    return isinstance(parser, type) and issubclass(parser, BaseModel)


@lru_cache(maxsize=256)
def _model_schema(model: type[BaseModel]) -> dict:
    return model.model_json_schema()  # costs ~0.1 ms: computed once per model class


def _model_of(parser: Any) -> type[BaseModel] | None:
    """The pydantic model a parser validates against, if any."""
    if isinstance(parser, Checked):
        return parser.model
    return parser if _is_model(parser) else None


def schema_of(parser: Parser) -> dict | None:
    """The JSON schema of a pydantic (or Checked) parser (shared: do not modify), else None."""
    model = _model_of(parser)
    return _model_schema(model) if model is not None else None


def _describe_validation(exc: ValidationError) -> str:
    parts = []
    for error in exc.errors()[:8]:
        where = ".".join(str(p) for p in error.get("loc", ())) or "(root)"
        parts.append(f"{where}: {error.get('msg', 'invalid')}")
    more = exc.error_count() - len(parts)
    if more > 0:
        parts.append(f"and {more} more")
    return "JSON does not match the schema: " + "; ".join(parts)


def parse_reply(parser: Parser, text: str) -> Any:
    """The parsed value, or :class:`ParseFailure` with a reason."""
    if parser is None:
        return text
    if isinstance(parser, Checked):
        value = parse_reply(parser.model, text)
        try:
            parser.rules(value)
        except ValueError as exc:
            raise ParseFailure(str(exc) or "the reply breaks a rule of the prompt") from None
        return value
    if _is_model(parser):
        data = extract_json(text)
        try:
            return parser.model_validate(data)
        except ValidationError as exc:
            raise ParseFailure(_describe_validation(exc)) from None
    try:
        return parser(text)
    except ParseFailure:
        raise
    except ValidationError as exc:
        raise ParseFailure(_describe_validation(exc)) from None
    except ValueError as exc:
        raise ParseFailure(str(exc) or "invalid reply") from None
    except (TypeError, KeyError, IndexError, RecursionError) as exc:
        raise ParseFailure(f"{type(exc).__name__}: {str(exc)[:200]}") from None


def _schema_name(parser: type[BaseModel]) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", parser.__name__)[:64] or "output"


CANDIDATES = ("json_schema", "json_object_schema", "json_object", "off")


@dataclass
class ModeChoice:
    """The mode an ``auto`` endpoint uses, and how it was found (``probe`` or ``cache``)."""

    mode: str
    how: str
    refused: dict[str, str] = field(default_factory=dict)  # mode -> what the server said

    def report(self) -> dict:
        return {"mode": self.mode, "how": self.how, **({"refused": dict(self.refused)} if self.refused else {})}

    def line(self, endpoint: str) -> str:
        why = "; ".join(f"{mode} refused: {said}" for mode, said in self.refused.items())
        origin = "found by a probe" if self.how == "probe" else "as probed before (kept in the LLM cache)"
        return (
            f"[llm] endpoint '{endpoint}': structured_output auto uses {self.mode}, {origin}"
            + (f" ({why})" if why else "")
            + f"; set structured_output: {self.mode} in the recipe to skip the probe"
        )


def response_format_for(parser: Parser, mode: str) -> dict | None:
    """The ``response_format`` request field for a parser on an endpoint with ``structured_output: mode``."""
    model = _model_of(parser)
    if model is None or mode == "off":
        return None
    if mode == "json_object":
        return {"type": "json_object"}
    if mode == "json_object_schema":
        return {"type": "json_object", "schema": schema_of(parser)}
    return {
        "type": "json_schema",
        "json_schema": {"name": _schema_name(model), "schema": schema_of(model), "strict": False},
    }


def correction_message(parser: Parser, error: str, templates: Templates = INSTALLED) -> str:
    """The user message of the correction round (``templates/llm/correction.j2``, which a recipe's
    ``templates_dir`` may shadow: the engine passes the recipe's Templates)."""
    schema = schema_of(parser)
    return templates.render(
        CORRECTION_TEMPLATE,
        error=error,
        expects_json=schema is not None,
        schema=json.dumps(schema, indent=2, sort_keys=True) if schema is not None else "",
    )
