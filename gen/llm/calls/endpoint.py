"""The recipe's endpoints at run time: client, flow control, the give-up state and the structured-output mode;
and keeping keys out of text.

An :class:`Endpoint` is shared by every step that uses it, so its limits, its breaker and its refusal count
hold across steps (:mod:`gen.llm.calls.giveup`). Its openai
client is made on the first request that is really sent, which is also when the API key is read from the
environment: a plan or a fully cached run needs no key. Every key the engine may have seen goes into its
:class:`KeyScrubber`, which replaces it in every reply, reason and error message.
"""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from gen.errors import GenError, Stopped
from gen.llm.calls.giveup import (
    NEVER_ANSWERED_LIMIT,
    REFUSALS_TO_STOP,
    Breaker,
    Refusals,
    breaker_stop,
    group_of,
    refusal_stop,
    setting_hint,
)
from gen.llm.calls.limiter import FlowControl
from gen.llm.calls.request import Failure, stop_error
from gen.llm.config import EndpointConfig, RunSettings, apply_limits, data_fingerprint, data_params
from gen.llm.structured import ModeChoice

if TYPE_CHECKING:
    from openai import AsyncOpenAI

__all__ = ["Endpoint", "Judgement", "KeyScrubber", "find_endpoint", "load_endpoints"]

REDACTED = "[redacted]"


class KeyScrubber:
    """The API keys this engine knows of; calling it on a text replaces every one of them."""

    def __init__(self) -> None:
        self._keys: set[str] = set()

    def add(self, key: str) -> None:
        if len(key) >= 4:  # shorter strings would blank out ordinary text
            self._keys.add(key)

    def add_from_env(self, env: str | None) -> None:
        if env and os.environ.get(env):
            self.add(os.environ[env])

    def __call__(self, text: str) -> str:
        for key in self._keys:
            if key in text:
                text = text.replace(key, REDACTED)
        return text


@dataclass(frozen=True)
class Judgement:
    """What one failed attempt means: the call's request is refused (not retried), or the run stops."""

    refused: bool = False
    stop: Stopped | None = None


class Endpoint:
    """Run-time state of one named endpoint (its flow control is made on the engine's loop thread)."""

    def __init__(self, name: str, config: EndpointConfig) -> None:
        self.name = name
        self.config = config
        self.answered = False  # has the server ever replied? if not, refused connections stop sooner
        self.breaker = Breaker()
        self.refusals = Refusals()
        self.choice: ModeChoice | None = None  # structured_output auto: the mode found
        self._client: AsyncOpenAI | None = None
        self._spec: tuple[str, str, int, float] | None = None
        self._flow: FlowControl | None = None

    @property
    def mode(self) -> str | None:
        """The structured-output mode requests use; None while ``auto`` is not resolved yet."""
        if self.config.structured_output != "auto":
            return self.config.structured_output
        return self.choice.mode if self.choice else None

    @property
    def where(self) -> str:
        return f"llm endpoint '{self.name}' ({self.config.base_url})"

    def report(self) -> dict[str, Any]:
        """Data parameters, the fingerprint of the data the endpoint produces (with the mode ``auto`` chose),
        and how that mode was found."""
        config = self.config
        if self.choice is not None:
            config = config.model_copy(update={"structured_output": self.choice.mode})
        entry: dict[str, Any] = {**data_params(self.config), "fingerprint": data_fingerprint(config)}
        if self.config.structured_output == "auto":
            entry["structured_output_chosen"] = self.choice.report() if self.choice else None
        return entry

    @property
    def flow(self) -> FlowControl:
        if self._flow is None:
            config = self.config
            self._flow = FlowControl(config.max_concurrency, config.requests_per_minute, config.tokens_per_minute)
        return self._flow

    def client(self, keys: KeyScrubber) -> AsyncOpenAI:
        """The openai client, made on first use with the key read from the environment now."""
        if self._client is None:
            from gen.llm.calls.clients import openai_client  # (openai is loaded only when a request is sent)

            config = self.config
            self._client = openai_client(
                config.base_url, self._api_key(keys), connections=config.max_concurrency, timeout=config.timeout_s
            )
        return self._client

    def client_spec(self, keys: KeyScrubber) -> tuple[str, str, int, float]:
        """What a request process needs to make the same client (gen.llm.calls.senders), the key read now."""
        if self._spec is None:
            config = self.config
            self._spec = (config.base_url, self._api_key(keys), config.max_concurrency, config.timeout_s)
        return self._spec

    def _api_key(self, keys: KeyScrubber) -> str:
        env = self.config.api_key_env
        if not env:
            return "no-key"  # the client insists on some key; a server without keys ignores it
        key = os.environ.get(env, "")
        if not key:
            raise GenError(
                f"the environment variable {env} is not set",
                record=self.where,
                field="api_key_env",
                expected=f"the API key in {env} (or api_key_env: null for a server without keys)",
            )
        keys.add(key)
        return key

    def replied(self) -> None:
        """A completion came back: every run of failures ends."""
        self.answered = True
        self.breaker.reset()
        self.refusals.answered()

    def judge(
        self, failure: Failure, sent: tuple[float, float], previous: Failure | None, *, probing: bool = False
    ) -> Judgement:
        """Record what a failed attempt (``sent``: when it went out and came back; ``previous``: the same call's
        last failure) says about the server. A probe's refusals are expected and never stop the run."""
        self.answered = self.answered or failure.answered
        fatal = stop_error(failure, self.where, self.config.api_key_env)
        if fatal is not None:
            return Judgement(stop=fatal)
        group = group_of(failure)
        if group is not None:
            limit = self.config.max_consecutive_failures
            if group == "connection_error" and not self.answered:
                limit = min(limit, NEVER_ANSWERED_LIMIT)
            count = self.breaker.failed(group, *sent)
            if count >= limit:
                return Judgement(stop=breaker_stop(self.where, group, count, failure, self.config))
        if not self.refusals.is_refusal(failure, previous, probing=probing):
            return Judgement()
        if not probing and self.refusals.refused(failure) >= REFUSALS_TO_STOP:
            return Judgement(refused=True, stop=refusal_stop(self.where, self.refusals, self.hint(failure)))
        return Judgement(refused=True)

    def hint(self, failure: Failure) -> str | None:
        explicit = self.config.structured_output != "auto"
        return setting_hint(failure.reason, self.mode or "off", explicit, self.config.extra_params)

    def gave_up(self) -> None:
        """The run stopped on this endpoint: a later step starts counting afresh."""
        self.breaker.reset()
        self.refusals.answered()

    async def close(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):  # closing is best effort: the run's result is already decided
                await client.close()


def load_endpoints(
    endpoints: Mapping[str, EndpointConfig | Mapping[str, Any]], settings: RunSettings
) -> dict[str, Endpoint]:
    """The recipe's ``llm:`` mapping as endpoints, run-setting overrides applied; bad configs are GenErrors."""
    loaded = {}
    for name, config in endpoints.items():
        if not isinstance(config, EndpointConfig):
            try:
                config = EndpointConfig.model_validate(config)
            except ValidationError as exc:
                first = exc.errors()[0]
                raise GenError(
                    first.get("msg", "invalid endpoint"),
                    record=f"llm endpoint '{name}'",
                    field=".".join(str(p) for p in first.get("loc", ())) or None,
                ) from None
        loaded[name] = Endpoint(name, apply_limits(config, settings.limits))
    return loaded


def find_endpoint(endpoints: Mapping[str, Endpoint], name: str, item_id: str) -> Endpoint:
    try:
        return endpoints[name]
    except KeyError:
        names = sorted(endpoints)
        near = difflib.get_close_matches(name, names, n=1)
        hint = f"; did you mean '{near[0]}'?" if near else ""
        raise GenError(
            f"unknown LLM endpoint '{name}'{hint}",
            record=f"item {item_id}",
            field="endpoint",
            expected=f"a name of the recipe's llm: section ({', '.join(names) or 'none defined'})",
        ) from None
