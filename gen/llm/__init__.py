"""The LLM engine. Product authors: see :mod:`gen.llm.engine.engine` for the surface and an example, and
:mod:`gen.llm.step` for LLM output that must also pass the product's own checks.

    from gen.llm import Task, render_messages       # a product builds Tasks from a template and a parser
    outcomes = ctx.llm().run_step("my_step", tasks)  # the runner owns the one Engine of a run

Its parts, lowest first (each layer imports only the ones below it; pyproject.toml's import-linter contract
"gen.llm is layered" holds it):

* ``config`` (the recipe's ``llm:`` endpoints, run settings, data fingerprint), ``structured`` (parsers, JSON
  extraction, structured-output modes, the correction message), ``task`` (Task, Outcome, prompt helpers): the
  words products and recipes use;
* ``calls/`` (one HTTP call and its limits) and ``cache/`` (the SQLite store of replies);
* ``accounts/`` (what a step counts, projects and shows), ``batch/`` (the Batch API and batch files);
* ``probes/`` (structured-output and ``validate --probe`` requests);
* ``engine/`` (runs a step: cache, batches, requests, correction round, lanes);
* ``step`` (the checked, regenerated step every LLM product uses, over the engine).

Each package's ``__init__`` names its modules and what each does.

Names are imported on first use, so ``import gen.llm.config`` (recipe loading) loads neither the engine
nor openai.

Cache location: ``$GEN_CACHE_DIR/llm.sqlite``, else ``$XDG_CACHE_HOME/gen/llm.sqlite``, else
``~/.cache/gen/llm.sqlite``; ``RunSettings(cache_dir=...)`` (``--cache-dir``) overrides it. The cache is
shared by every recipe: a call is a call, whichever run made it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gen.llm.accounts.plan import StepPlan, format_messages
    from gen.llm.cache.store import Cache, cache_key
    from gen.llm.calls.request import build_request
    from gen.llm.config import EndpointConfig, Price, RunSettings, data_fingerprint, data_params, default_cache_path
    from gen.llm.engine.engine import Engine
    from gen.llm.structured import ParseFailure, extract_json
    from gen.llm.task import Outcome, Task, estimate_input_tokens, render_messages, split_messages

_HOMES = {  # name -> the submodule that defines it
    "Cache": "cache.store",
    "cache_key": "cache.store",
    "EndpointConfig": "config",
    "Price": "config",
    "RunSettings": "config",
    "data_fingerprint": "config",
    "data_params": "config",
    "default_cache_path": "config",
    "Engine": "engine.engine",
    "StepPlan": "accounts.plan",
    "format_messages": "accounts.plan",
    "build_request": "calls.request",
    "ParseFailure": "structured",
    "extract_json": "structured",
    "Outcome": "task",
    "Task": "task",
    "estimate_input_tokens": "task",
    "render_messages": "task",
    "split_messages": "task",
}

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


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})
