"""What a server's reply says, read in one place: the body's bytes to a checked :class:`Answer`, or
:class:`Malformed` with the reason.

Every completion gen receives passes through :func:`answer_of` (online replies through
:func:`gen.llm.calls.request.send_once`, the Batch API's result lines and ``--batch-import`` files through
:func:`gen.llm.batch.files.read_result`), so whatever a server sends, the rest of gen sees only these shapes:

* the text, finish reason and refusal are a string or None, and every string is well-formed Unicode: a lone
  surrogate (JSON allows the escape ``\\ud800``; UTF-8 cannot hold it, so SQLite, orjson and the run's files
  cannot either) becomes U+FFFD, as a UTF-8 decoder does with bytes that are not text;
* the usage numbers are token counts (whole numbers, 0 to 2**53; not booleans, floats or strings). A reply whose
  usage holds anything else keeps its text, but its usage is set aside: its tokens are estimated from the text,
  as for a server that gives no usage, counted in run.json as ``usage_estimated_calls``, and a warning names the
  field once per run. So no Infinity, NaN or negative count reaches the accounting and no overflow is raised;
* log-probabilities are asked for by a few steps and read as numbers by them: every number in them is finite,
  each log-probability is at most 0 (a rounding error of LOGPROB_SLACK allowed), offsets are token counts. A reply
  whose log-probabilities break this is malformed (retried, then the item is rejected with the reason); a call
  that did not ask for them drops whatever the server sent.

A body that is not UTF-8 JSON, or whose structure is not a completion (no choices, choices null, a choice or
message that is not an object, a content or finish reason that is neither string nor null) is malformed. The
caller turns :class:`Malformed` into an ``invalid_response`` failure, which is retried within the call's budget,
and rejects the item with the reason when the budget is spent; a reply never stops the run.
"""

from __future__ import annotations

import json
import logging
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gen.llm.task import estimate_input_tokens

__all__ = ["MAX_COUNT", "Answer", "Malformed", "answer_of", "reply_json", "well_formed"]

log = logging.getLogger("gen.llm")

MAX_COUNT = 2**53  # the largest whole number a JSON reader anywhere (JavaScript's included) keeps exactly
LOGPROB_SLACK = 1e-4  # servers round a certain token's log-probability to a hair above 0
_SURROGATE = re.compile("[\ud800-\udfff]")
_warned: set[str] = set()  # usage problems already warned about (once per field and process)


class Malformed(ValueError):
    """The reply is not a completion gen can read; the message says what is wrong with it."""


@dataclass(frozen=True)
class Answer:
    """A completion came back (its text may still be missing or truncated)."""

    text: str | None
    finish_reason: str | None
    usage: Mapping[str, Any]  # checked token counts only ({} when the server gave none, or none gen trusts)
    refusal: Any = None
    logprobs: Any = None  # the choice's logprobs object, checked, when the request asked for them
    usage_problem: str | None = field(default=None, compare=False)  # why the server's usage was set aside

    def tokens(self, messages: list[dict]) -> tuple[int, int, bool]:
        """(input tokens, output tokens, estimated?): the server's usage, or an estimate when it gives none
        (or none that is a token count; the first reply with each such problem is warned about)."""
        if self.usage_problem is not None and self.usage_problem not in _warned:
            _warned.add(self.usage_problem)
            log.warning("[llm] a reply's usage is not a token count (%s): its tokens are estimated", self.usage_problem)
        if "prompt_tokens" in self.usage:
            return self.usage["prompt_tokens"], self.usage.get("completion_tokens", 0), False
        return estimate_input_tokens(messages), math.ceil(len(self.text or "") / 4), True


def reply_json(content: bytes) -> Any:
    """A reply body parsed as JSON (UTF-8, a byte order mark allowed); :class:`Malformed` otherwise."""
    try:
        return json.loads(content)
    except UnicodeDecodeError as exc:
        raise Malformed(f"the reply is not UTF-8 text (byte {exc.object[exc.start]:#04x} at {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise Malformed(f"the reply is not JSON ({exc.msg} at character {exc.pos})") from None
    except (ValueError, RecursionError) as exc:  # a number of thousands of digits; arrays nested past the stack
        raise Malformed(f"the reply is not JSON gen can read ({type(exc).__name__})") from None


def well_formed(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD (see the module docstring)."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


def answer_of(data: Any, *, logprobs: bool = True) -> Answer:
    """The completion in a chat (or /completions) reply body, checked (see the module docstring).
    ``logprobs``: whether the request asked for log-probabilities (if not, any sent are dropped)."""
    if not isinstance(data, Mapping):
        raise Malformed(f"the reply's JSON is {_kind(data)}, not an object")
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise Malformed(f"the reply has no choices (choices: {_shown(choices)})")
    choice = choices[0]
    if not isinstance(choice, Mapping):
        raise Malformed(f"the reply's first choice is {_kind(choice)}, not an object")
    if "message" not in choice and "text" in choice:  # a /completions reply
        text, refusal, name = choice["text"], None, "text"
    else:
        message = choice.get("message")
        if message is None:
            message = {}
        if not isinstance(message, Mapping):
            raise Malformed(f"the reply's message is {_kind(message)}, not an object")
        text, refusal, name = message.get("content"), message.get("refusal"), "content"
    usage, problem = checked_usage(data.get("usage"))
    return Answer(
        _string_or_none(text, name),
        _string_or_none(choice.get("finish_reason"), "finish_reason"),
        usage,
        None if refusal is None else well_formed(str(refusal)),
        checked_logprobs(choice.get("logprobs")) if logprobs else None,
        problem,
    )


def _string_or_none(value: Any, name: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise Malformed(f"the reply's {name} is {_kind(value)}, not a string")
    return well_formed(value)


def _kind(value: Any) -> str:
    """What JSON value `value` is, with its article ("an object", "a number", "null")."""
    names = {
        dict: "an object",
        list: "an array",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }
    return "null" if value is None else names.get(type(value), f"a {type(value).__name__}")


def _shown(value: Any) -> str:
    return well_formed(json.dumps(value, ensure_ascii=False))[:60] if value is not None else "null"


def is_count(value: Any) -> bool:
    """A token count: a whole number from 0 to MAX_COUNT (a bool is not one, nor is 12.0 or "12")."""
    return type(value) is int and 0 <= value <= MAX_COUNT


def checked_usage(usage: Any) -> tuple[dict[str, int], str | None]:
    """(the usage's token counts, None), or ({}, what is wrong) when any count in it is not one. Fields named
    ``*_tokens`` are checked, also inside ``*_details`` objects (cached and reasoning tokens)."""
    if usage is None:
        return {}, None
    if not isinstance(usage, Mapping):
        return {}, f"usage is {_kind(usage)}"
    counts: dict[str, int] = {}
    for name, value in usage.items():
        if str(name).endswith("_details") and isinstance(value, Mapping):
            for inner, count in value.items():
                if str(inner).endswith("_tokens") and count is not None and not is_count(count):
                    return {}, f"usage.{name}.{inner} is {_shown(count)}"
        elif str(name).endswith("_tokens") and value is not None:
            if not is_count(value):
                return {}, f"usage.{name} is {_shown(value)}"
            counts[str(name)] = value
    return counts, None


def checked_logprobs(value: Any) -> Any:
    """The choice's logprobs object with its strings made well-formed; :class:`Malformed` when a number in it is
    not what it must be. Knows the chat shape (``content: [{token, logprob, bytes, top_logprobs: [...]}]``) and
    the /completions one (``tokens``, ``token_logprobs``, ``text_offset``, ``top_logprobs: [{token: logprob}]``)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise Malformed(f"the reply's logprobs is {_kind(value)}, not an object")
    return _walk(value, "logprobs")


def _walk(value: Any, path: str) -> Any:
    if isinstance(value, str):
        return well_formed(value)
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        if not math.isfinite(value) or abs(value) > MAX_COUNT:
            raise Malformed(f"the reply's {path} is {_shown(value)}, not a finite number")
        return value
    if isinstance(value, list):
        return [_walk(item, f"{path}[{index}]") for index, item in enumerate(value)]
    if not isinstance(value, Mapping):
        raise Malformed(f"the reply's {path} is {_kind(value)}")
    checked = {}
    for key, item in value.items():
        name = f"{path}.{key}"
        if key == "logprob":
            _logprob(item, name, nullable=False)
        elif key == "token_logprobs" and isinstance(item, list):
            for index, each in enumerate(item):
                _logprob(each, f"{name}[{index}]", nullable=True)
        elif key == "text_offset" and isinstance(item, list):
            for index, each in enumerate(item):
                if not is_count(each):
                    raise Malformed(f"the reply's {name}[{index}] is {_shown(each)}, not an offset")
        elif key == "top_logprobs" and isinstance(item, list):
            for index, each in enumerate(item):
                if isinstance(each, Mapping) and "logprob" not in each:  # /completions: {token: logprob}
                    for token, number in each.items():
                        _logprob(number, f"{name}[{index}][{well_formed(str(token))!r}]", nullable=False)
        checked[well_formed(str(key))] = _walk(item, name)
    return checked


def _logprob(value: Any, path: str, *, nullable: bool) -> None:
    if value is None and nullable:
        return
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not math.isfinite(value) or value > LOGPROB_SLACK:
        raise Malformed(f"the reply's {path} is {_shown(value)}, not a log-probability (a finite number ≤ 0)")
