"""The recipe's ``llm:`` section (named endpoints) and the run settings that override its limits.

Recipe YAML::

    llm:
      main:
        model: gpt-4o-mini
        base_url: https://api.openai.com/v1     # any OpenAI-compatible server (vLLM, Ollama, llama.cpp)
        api_key_env: OPENAI_API_KEY             # the NAME of the variable; null for a server without keys
        temperature: 0.7
        max_tokens: 800
        seed: 1234
        max_concurrency: 16
        requests_per_minute: 500
        price: {input_per_million: 0.15, output_per_million: 0.60}

Fields split in two groups:

* data fields — ``base_url``, ``model``, the sampling parameters (``temperature``, ``top_p``, ``max_tokens``,
  ``seed``, ``extra_params``) and ``structured_output``: they change what the model returns, so they enter
  the cache key and :func:`data_fingerprint` (with ``structured_output: auto`` the mode the endpoint was
  found to accept is what enters the request body, and so the cache key; see :mod:`gen.llm.probes.mode`);
* run fields — ``api_key_env``, ``max_concurrency``, ``requests_per_minute``, ``tokens_per_minute``,
  ``timeout_s``, ``max_retries``, ``max_wait_s``, ``max_consecutive_failures``, ``max_reject_rate``,
  ``price`` and the Batch API settings (``mode``, ``batch_*``, :mod:`gen.llm.batch.rounds`): they never enter any
  hash, and :class:`RunSettings` (command-line overrides) may replace the limits.

Giving up (docs/llm-endpoints.md): one call is tried at most ``max_retries + 1`` times and for at most
``max_wait_s`` seconds (failed attempts and the waits between them), then the item is given up; the run
stops when ``max_consecutive_failures`` failures of one kind (429, timeout, unreachable, server error) come
back in a row with no reply in between; a step stops when more than ``max_reject_rate`` of its items are
rejected (a product may set its own ``max_reject_rate``).

The API key itself is never part of a config: it is read from the environment when the first request is
sent, so planning and fully cached runs need no key.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from gen.hashing import canonical_json
from gen.progress import ProgressMode
from gen.validation import InputModel, OptionsModel

__all__ = [
    "EndpointConfig",
    "Price",
    "RateLimits",
    "RunSettings",
    "apply_limits",
    "data_fingerprint",
    "data_params",
    "default_cache_path",
]


MAX_REQUEST_PROCESSES = 64
# the output tokens assumed for a call nothing caps: a plan's projection, a rate bucket's estimate of a request
DEFAULT_OUTPUT_TOKENS = 256


class Price(InputModel):
    """US dollars per million tokens."""

    input_per_million: float = Field(ge=0)
    output_per_million: float = Field(ge=0)

    def cost(self, input_tokens: int, output_tokens: int) -> float:
        return (input_tokens * self.input_per_million + output_tokens * self.output_per_million) / 1_000_000


class EndpointConfig(InputModel):
    """One named endpoint of the recipe's ``llm:`` section."""

    # --- data: enters the cache key -------------------------------------------------------------
    model: str = Field(min_length=1)
    # a recipe that names no base_url gets OPENAI_BASE_URL, as the openai client's own users expect
    base_url: str = Field(default_factory=lambda: os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1")
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    max_tokens: int | None = Field(default=None, gt=0)
    seed: int | None = None
    extra_params: dict[str, Any] = Field(
        default_factory=dict,
        description="other request parameters sent as-is (e.g. top_k, presence_penalty, stop); they enter the "
        "cache key",
    )
    structured_output: Literal["auto", "json_schema", "json_object_schema", "json_object", "off"] = Field(
        default="auto",
        description="how parsed outputs are asked for: auto (a probe on first use finds what the endpoint "
        "accepts, then remembers it), response_format json_schema, json_object with the schema "
        "(json_object_schema: llama.cpp), json_object, or off (JSON is parsed out of plain text)",
    )

    # --- run: never hashed ----------------------------------------------------------------------
    api_key_env: str | None = "OPENAI_API_KEY"
    max_concurrency: int = Field(default=8, ge=1, le=1024)
    requests_per_minute: float | None = Field(default=None, gt=0)
    tokens_per_minute: float | None = Field(default=None, gt=0)
    timeout_s: float = Field(default=120.0, gt=0)
    max_retries: int = Field(default=6, ge=0, le=100)
    max_wait_s: float = Field(
        default=30.0,
        gt=0,
        description="the longest one call may keep failing (its failed attempts and the waits between them) "
        "before its item is given up",
    )
    max_consecutive_failures: int = Field(
        default=5,
        ge=1,
        le=10_000,
        description="stop the run when this many failures of one kind (429, timeout, unreachable, server "
        "error) come back in a row with no reply in between; failures of requests already on their way "
        "count once",
    )
    max_reject_rate: float | None = Field(
        default=0.2,
        ge=0,
        le=1,
        description="a step using this endpoint stops when more than this share of its items is rejected; "
        "null for no limit; a product's own max_reject_rate wins",
    )
    price: Price | None = None
    mode: Literal["online", "batch"] = Field(
        default="online",
        description="online: one request at a time as the limits allow; batch: each round of a step goes "
        "through the Batch API (files + batches, answered within 24 hours at a lower price)",
    )
    batch_discount: float = Field(
        default=0.5, ge=0, le=1, description="the share of the online price a batch call costs (OpenAI: half)"
    )
    batch_poll_s: float = Field(
        default=15.0, gt=0, description="seconds before a batch is first polled; the wait doubles up to 10 minutes"
    )
    batch_max_requests: int = Field(default=50_000, ge=1, le=50_000, description="requests per batch input file")
    batch_max_bytes: int = Field(
        default=200 * 1024 * 1024, ge=1024, le=200 * 1024 * 1024, description="bytes per batch input file"
    )
    batch_keep_files: bool = Field(
        default=False,
        description="keep a batch's request, output and error files on the provider once its results are in the "
        "cache (by default gen deletes them: they hold the corpus text)",
    )

    @property
    def batch_price(self) -> Price | None:
        """What a call through the Batch API costs (the online price times batch_discount)."""
        if self.price is None:
            return None
        scale = self.batch_discount
        return Price(
            input_per_million=self.price.input_per_million * scale,
            output_per_million=self.price.output_per_million * scale,
        )

    @property
    def output_cap(self) -> tuple[int | None, str]:
        """(the most tokens a reply may have, the parameter that says so): max_tokens, else a
        max_completion_tokens among extra_params (the name newer OpenAI models take), else none."""
        if self.max_tokens is not None:
            return self.max_tokens, "max_tokens"
        cap = self.extra_params.get("max_completion_tokens")
        return (cap, "max_completion_tokens") if isinstance(cap, int) and cap > 0 else (None, "")

    @field_validator("base_url")
    @classmethod
    def _check_base_url(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError("base_url must be an http(s) URL such as https://api.openai.com/v1")
        if parts.username or parts.password:
            raise ValueError("base_url must not contain credentials; put the key in the variable named by api_key_env")
        if parts.query or parts.fragment:
            raise ValueError("base_url must not have a query string or fragment")
        return value.rstrip("/")

    @field_validator("extra_params")
    @classmethod
    def _check_extra(cls, value: dict[str, Any]) -> dict[str, Any]:
        reserved = {"model", "messages", "response_format", "stream", "n", "temperature", "top_p", "max_tokens", "seed"}
        clash = sorted(reserved & set(value))
        if clash:
            raise ValueError(f"extra_params may not set {', '.join(clash)} (use the endpoint's own fields)")
        try:
            canonical_json(value, ascii_only=False)
        except (TypeError, ValueError):
            raise ValueError("extra_params must be plain JSON values") from None
        return value


def data_params(endpoint: EndpointConfig) -> dict[str, Any]:
    """The part of an endpoint config that affects the data (cache keys, run fingerprints)."""
    return {
        "base_url": endpoint.base_url,
        "model": endpoint.model,
        "temperature": endpoint.temperature,
        "top_p": endpoint.top_p,
        "max_tokens": endpoint.max_tokens,
        "seed": endpoint.seed,
        "extra_params": endpoint.extra_params,
        "structured_output": endpoint.structured_output,
    }


def data_fingerprint(endpoint: EndpointConfig) -> str:
    """A short hash of :func:`data_params`: equal fingerprints mean the endpoint produces the same data."""
    return hashlib.sha256(canonical_json(data_params(endpoint), ascii_only=False).encode()).hexdigest()[:16]


def default_cache_path() -> Path:
    """``$GEN_CACHE_DIR/llm.sqlite``, else ``$XDG_CACHE_HOME/gen/llm.sqlite``, else ``~/.cache/gen/llm.sqlite``."""
    folder = os.environ.get("GEN_CACHE_DIR")
    if folder:
        return Path(folder).expanduser() / "llm.sqlite"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "gen" / "llm.sqlite"


class RateLimits(OptionsModel):
    """Limits given for one run (on the command line) that replace those of every endpoint. They change how fast
    calls go, never the data, so none enters any hash."""

    max_concurrency: int | None = Field(default=None, ge=1, le=1024)
    requests_per_minute: float | None = Field(default=None, ge=0.001, le=1e9)
    tokens_per_minute: float | None = Field(default=None, ge=1, le=1e12)
    timeout_s: float | None = Field(default=None, gt=0)
    max_retries: int | None = Field(default=None, ge=0, le=100)
    max_wait_s: float | None = Field(default=None, gt=0)


class RunSettings(OptionsModel):
    """Where and how one run calls its endpoints: its rate-limit overrides, the cache folder (``cache_dir`` holds
    ``llm.sqlite``; default: :func:`default_cache_path`), ``offline`` (the first cache miss is an error, for a
    reproducible CI) and the progress display (``auto``: as the command line chose, live on a terminal and plain
    lines otherwise, nothing under -q or for a program; ``live``, ``plain`` or ``off``: that, for this run only,
    whoever calls; gen/progress.py). None of them changes the data.
    """

    limits: RateLimits = Field(default_factory=RateLimits)
    cache_dir: Path | None = None
    offline: bool = False
    progress: ProgressMode = "auto"
    progress_interval_s: float = Field(default=10.0, gt=0)
    # send requests from this many processes (gen.llm.calls.senders); each is a process started, hence the bound
    request_processes: int = Field(default=0, ge=0, le=MAX_REQUEST_PROCESSES)
    # offline batch files (gen.llm.batch.files): write the next round's requests here and stop; read these
    # output files into the cache first
    batch_export: Path | None = None
    batch_import: tuple[Path, ...] = ()

    def cache_path(self) -> Path:
        return Path(self.cache_dir).expanduser() / "llm.sqlite" if self.cache_dir else default_cache_path()


def apply_limits(endpoint: EndpointConfig, limits: RateLimits) -> EndpointConfig:
    """The endpoint with the run's limit overrides applied (data fields are never touched)."""
    overrides = limits.model_dump(exclude_none=True)
    return endpoint.model_copy(update=overrides) if overrides else endpoint
