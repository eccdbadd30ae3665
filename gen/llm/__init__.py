"""The LLM engine (SPEC §9): see :mod:`gen.llm.engine` for the product author's surface.

    from gen.llm import Engine, Task, render_messages
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
