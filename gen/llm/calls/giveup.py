"""When to stop trying: one call's budget, the endpoint's breaker, refusals, and the messages that say so.

* :class:`Budget` — one call (an item's request) gets at most ``max_retries + 1`` attempts and
  ``max_wait_s`` seconds from its first attempt (failed attempts and the waits between them); a wait that
  would end past the budget is not started. Past it, the item is given up (an engine reject).
* :class:`Breaker` — per endpoint: ``max_consecutive_failures`` failures of one kind (429, 503, timeout,
  unreachable, other 5xx, replies that are not completions) with no reply in between stop the run. A
  failure counts only if its request was sent after the last counted one came back, so a burst of requests
  that were all on their way when the server started failing counts once. An endpoint that never answered
  at all is given up after 3 refused connections.
* :class:`Refusals` — per endpoint: an answer that says the request itself is wrong is not retried: a 4xx,
  or a 5xx whose message complains about the request (a validation error, an unsupported value...) and
  comes back unchanged, for the same call or the next one, with no reply in between (a generic "the server
  had an error" is retried as usual). 3 such refusals in a row stop the run, quoting what the server said
  and, where it is known, the setting to change.

The messages name the endpoint and the setting to change, never a folder (the runner adds where it kept
the partial run).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field

from gen.errors import Stopped
from gen.llm.calls.request import RETRIED_4XX, Failure
from gen.llm.config import EndpointConfig

__all__ = [
    "NEVER_ANSWERED_LIMIT",
    "REFUSALS_TO_STOP",
    "Breaker",
    "Budget",
    "Refusals",
    "breaker_stop",
    "group_of",
    "refusal_stop",
    "setting_hint",
]

NEVER_ANSWERED_LIMIT = 3  # refused connections before an endpoint that never answered is given up
REFUSALS_TO_STOP = 3  # refused requests in a row (no reply in between) before the run stops
DISTINCT_SHOWN = 3  # server messages quoted in a stop message
# words of a 5xx message that complains about the request rather than the server's own state
_ABOUT_REQUEST = re.compile(
    r"validat|invalid|input should|not supported|unsupported|must be|\bexpected\b|unknown|unrecognized|"
    r"not allowed|not permitted|response_format|field required|missing",
    re.I,
)


def group_of(failure: Failure) -> str | None:
    """The breaker's kind of a failure; None for answers that refuse the request (4xx), which are not
    the server's trouble but the request's."""
    kind = failure.kind
    if kind in ("rate_limited", "http_503", "timeout", "connection_error", "invalid_response"):
        return kind
    if kind.startswith("http_5"):
        return "http_5xx"
    return None


@dataclass
class Budget:
    """One call's attempts and seconds."""

    attempts: int
    seconds: float
    started: float = field(default_factory=time.monotonic)
    used: int = 0

    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def spent_after(self, wait: float) -> str | None:
        """The setting that runs out if this call fails now and would then wait ``wait`` seconds; None
        while another attempt fits."""
        if self.used >= self.attempts:
            return f"max_retries {self.attempts - 1}"
        if self.elapsed() + wait > self.seconds:
            return f"max_wait_s {self.seconds:g}"
        return None


@dataclass
class Breaker:
    """Consecutive failures of one kind on an endpoint (see the module docstring)."""

    group: str | None = None
    count: int = 0
    last_counted: float = float("-inf")

    def reset(self) -> None:
        self.group, self.count, self.last_counted = None, 0, float("-inf")

    def failed(self, group: str, sent_at: float, arrived: float) -> int:
        """Count a failure of a request sent at ``sent_at`` that came back at ``arrived``; the run of failures
        of its kind so far."""
        if group != self.group:
            self.group, self.count = group, 0
        elif sent_at < self.last_counted:
            return self.count  # on its way before the last counted failure came back: the same event
        self.count += 1
        self.last_counted = arrived
        return self.count


@dataclass
class Refusals:
    """Answers that refuse the request (see the module docstring)."""

    repeated: set[str] = field(default_factory=set)  # 5xx messages about the request, seen twice in a row
    last_5xx: str | None = None  # the last 5xx message about the request, until a reply comes
    in_a_row: int = 0
    said: Counter[str] = field(default_factory=Counter)  # "HTTP 500: message" -> times, first seen first

    def is_refusal(self, failure: Failure, previous: Failure | None, *, probing: bool = False) -> bool:
        """Whether this answer refuses the request. A probe varies only ``response_format``, so there a 5xx
        that complains about the request is a refusal at once."""
        if not failure.answered or failure.kind in ("rate_limited", "http_503", "quota_exhausted"):
            return False
        if failure.kind.startswith("http_4"):
            return failure.kind not in RETRIED_4XX
        if not failure.kind.startswith("http_5"):
            return False
        if failure.reason in self.repeated:
            return True
        if not _ABOUT_REQUEST.search(failure.reason):
            return False  # "the server had an error", however often, is the server's trouble: retried
        if probing:
            return True
        again = previous is not None and (previous.kind, previous.reason) == (failure.kind, failure.reason)
        if again or failure.reason == self.last_5xx:
            self.repeated.add(failure.reason)
            return True
        self.last_5xx = failure.reason
        return False

    def refused(self, failure: Failure) -> int:
        """Count a refusal; the refusals in a row so far."""
        self.in_a_row += 1
        self.said[f"HTTP {failure.kind.removeprefix('http_')}: {failure.reason}"] += 1
        return self.in_a_row

    def answered(self) -> None:
        self.in_a_row = 0
        self.last_5xx = None
        self.said.clear()

    def quoted(self) -> str:
        shown = list(self.said.items())[:DISTINCT_SHOWN]
        text = "; ".join(f'"{said}"' + (f" (×{n})" if n > 1 else "") for said, n in shown)
        more = len(self.said) - len(shown)
        return text + (f"; and {more} other message{'s' if more > 1 else ''}" if more > 0 else "")


_WHAT = {
    "rate_limited": "keeps answering 429 (rate limited)",
    "http_503": "keeps answering 503 (overloaded)",
    "timeout": "keeps timing out",
    "connection_error": "cannot be reached",
    "http_5xx": "keeps answering server errors",
    "invalid_response": "keeps sending replies that are not chat completions",
}


def breaker_stop(where: str, group: str, count: int, failure: Failure, config: EndpointConfig) -> Stopped:
    """The stop for ``count`` failures of ``group`` in a row."""
    if group == "timeout":
        detail = f"no reply within timeout_s {config.timeout_s:g}s, {count} times in a row"
        change = "raise timeout_s if the model is slow, or check that the server is working"
    elif group == "connection_error":
        detail = f"{count} attempts in a row: {failure.reason}"
        change = "check base_url and that the server is running"
    elif group in ("rate_limited", "http_503"):
        detail = f"{count} times in a row with no reply in between: {failure.reason}"
        change = (
            "wait and run again, lower max_concurrency or requests_per_minute, or raise max_consecutive_failures "
            f"(now {config.max_consecutive_failures}) to keep trying longer"
        )
    else:
        detail = f"{count} times in a row: {failure.kind}: {failure.reason}"
        change = (
            "check the server's log, or raise max_consecutive_failures "
            f"(now {config.max_consecutive_failures}) to keep trying longer"
        )
    return Stopped(f"the endpoint {_WHAT[group]} ({detail}); to go on, {change}", record=where)


def refusal_stop(where: str, refusals: Refusals, hint: str | None) -> Stopped:
    """The stop for requests the server keeps refusing, quoting what it said."""
    change = hint or "make the request acceptable to the server (check the endpoint's settings against its message)"
    return Stopped(
        f"the endpoint refuses the requests ({refusals.in_a_row} in a row, not retried); it said: "
        f"{refusals.quoted()}; to go on, {change}",
        record=where,
    )


_SCHEMA_WORDS = re.compile(r"response_format|json_schema|json_object|schema|grammar", re.I)


def setting_hint(message: str, mode: str, explicit: bool, extra_params: dict | None = None) -> str | None:
    """The recipe setting that most likely makes the server accept the request, judged from its message."""
    if mode != "off" and _SCHEMA_WORDS.search(message):
        if not explicit:
            return (
                f"set structured_output explicitly: the mode found earlier ({mode}) is refused now, "
                "e.g. structured_output: off"
            )
        if mode == "json_schema" and "json_object" in message:
            return "set structured_output: json_object (or auto, which finds what the server accepts)"
        return "set structured_output: auto (which finds what the server accepts) or off"
    for name in sorted(extra_params or {}):
        if re.search(rf"\b{re.escape(name)}\b", message):
            return f"remove or fix {name} in the endpoint's extra_params"
    if re.search(r"context|max_tokens|too long|maximum", message, re.I):
        return "a lower max_tokens on the endpoint, or shorter prompts"
    for name in ("temperature", "top_p", "seed"):
        if name in message:
            return f"a value of {name} the server accepts"
    return None
