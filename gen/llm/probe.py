"""``structured_output: auto``: which ``response_format`` an endpoint accepts, found once and remembered.

On the first step that needs parsed output from an ``auto`` endpoint, the engine sends one small request per
candidate mode, in this order, and keeps the first the server answers:

1. ``json_schema`` — ``{"type": "json_schema", "json_schema": {...}}`` (OpenAI, vLLM, recent servers);
2. ``json_object_schema`` — ``{"type": "json_object", "schema": {...}}`` (llama.cpp's server constrains the
   reply to the schema this way; servers that ignore the extra key still answer);
3. ``json_object`` — ``{"type": "json_object"}`` alone;
4. ``off`` — no ``response_format``; JSON is parsed out of the reply's text.

A mode counts as refused when the server answers the probe with an error that says so (a 4xx, or the same
5xx twice); failures that say nothing about the request (429, timeouts, an unreachable server) are retried
and stopped as for any call. The choice is stored in the LLM cache under :func:`probe_key` (the endpoint's
``base_url`` and ``model``), so a later run, ``--offline`` or ``gen plan`` needs no probe. The chosen mode
shapes every request body, and so every cache key: replies cached under one mode are never served for
another. An explicit ``structured_output`` is used as given, without a probe.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

from pydantic import BaseModel

from gen.hashing import canonical_json
from gen.llm.config import EndpointConfig
from gen.llm.request import build_request
from gen.llm.structured import response_format_for

__all__ = ["CANDIDATES", "PROBE_STEP", "ModeChoice", "probe_body", "probe_key"]

CANDIDATES = ("json_schema", "json_object_schema", "json_object", "off")
PROBE_STEP = "structured_output probe"  # the probe's requests are counted under this step in run.json
PROBE_MAX_TOKENS = 16
PROBE_PROMPT = 'Reply with the JSON object {"ok": true} and nothing else.'


class ProbeReply(BaseModel):
    ok: bool


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


def probe_key(config: EndpointConfig) -> str:
    """Where the choice is kept in the LLM cache: the server and model it was found for."""
    material = {"v": 1, "structured_output_probe": {"base_url": config.base_url, "model": config.model}}
    return hashlib.sha256(canonical_json(material, ascii_only=False).encode()).hexdigest()


def probe_body(config: EndpointConfig, mode: str) -> dict:
    """The probe's request in ``mode``: the endpoint's own parameters, a short prompt, a few tokens."""
    small = config.model_copy(update={"max_tokens": PROBE_MAX_TOKENS})
    messages = [{"role": "user", "content": PROBE_PROMPT}]
    return build_request(small, messages, response_format_for(ProbeReply, mode), sample=0)
