"""The LLM engine (SPEC §9). Product authors: see :mod:`gen.llm.engine` for the surface and an example.

    from gen.llm import Task, render_messages       # a product builds Tasks from a template and a parser
    outcomes = ctx.llm().run_step("my_step", tasks)  # the runner owns the one Engine of a run

Modules: ``config`` (the recipe's ``llm:`` endpoints, run settings, data fingerprint), ``engine`` (calls,
retries, flow control, accounting), ``cache`` (SQLite store), ``limiter`` (slots, rate buckets, backoff),
``structured`` (parsers, JSON extraction, correction round), ``task`` (Task, Outcome, prompt helpers),
``plan`` (``gen plan`` / ``gen preview``), ``progress`` (live display or plain lines on stderr).

Cache location: ``$GEN_CACHE_DIR/llm.sqlite``, else ``$XDG_CACHE_HOME/gen/llm.sqlite``, else
``~/.cache/gen/llm.sqlite``; ``RunSettings(cache_dir=...)`` (``--cache-dir``) overrides it. The cache is
shared by every recipe: a call is a call, whichever run made it.
"""

from gen.llm.cache import Cache, cache_key
from gen.llm.config import EndpointConfig, Price, RunSettings, data_fingerprint, data_params, default_cache_path
from gen.llm.engine import Engine, build_request
from gen.llm.plan import StepPlan, format_messages
from gen.llm.structured import ParseFailure, extract_json
from gen.llm.task import Outcome, Task, estimate_input_tokens, render_messages, split_messages

__all__ = [
    "Cache",
    "EndpointConfig",
    "Engine",
    "Outcome",
    "ParseFailure",
    "Price",
    "RunSettings",
    "StepPlan",
    "Task",
    "build_request",
    "cache_key",
    "data_fingerprint",
    "data_params",
    "default_cache_path",
    "estimate_input_tokens",
    "extract_json",
    "format_messages",
    "render_messages",
    "split_messages",
]
