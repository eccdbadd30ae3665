"""The same load as bench_llm_run.py's bare loop, through curator (bespokelabs-curator), for comparison.

    .venv-curator/bin/python bench/curator_run.py BASE_URL REQUESTS CONCURRENCY

Runs in its own virtual environment (curator is never a gen dependency): bench_llm_run.py starts it when
.venv-curator exists beside the repository, made with

    python3 -m venv .venv-curator && .venv-curator/bin/pip install bespokelabs-curator

Prints one JSON line: {"seconds": wall time of curator's run, "cpu_s": this process's CPU meanwhile,
"ok": responses parsed}. Curator's own cache, telemetry, display and viewer are switched off, and its
requests-per-minute and tokens-per-minute limits are set far above the load, so only the concurrency limit
(its max_concurrent_requests) and its request path set the pace.
"""

from __future__ import annotations

import importlib.util
import json
import os
import resource
import sys
import tempfile
import time

os.environ.update(  # before curator is imported: these are read at import time
    TELEMETRY_ENABLED="false",
    CURATOR_DISABLE_CACHE="true",
    CURATOR_DISABLE_RICH_DISPLAY="1",
    CURATOR_VIEWER="0",
    LITELLM_LOCAL_MODEL_COST_MAP="True",  # no download of litellm's price list
)
# curator counts tokens with tiktoken's cl100k_base, which tiktoken downloads unless it is in its cache folder:
# litellm (a curator dependency) ships the file under the name tiktoken looks for.
_LITELLM = importlib.util.find_spec("litellm")
if _LITELLM is not None and _LITELLM.submodule_search_locations:
    tokenizers = os.path.join(_LITELLM.submodule_search_locations[0], "litellm_core_utils", "tokenizers")
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", tokenizers)


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    base_url, requests, concurrency = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    from bespokelabs import curator

    class Echo(curator.LLM):
        def prompt(self, row: dict) -> str:
            return row["prompt"]

        def parse(self, row: dict, response: str) -> dict:
            return {"reply": response}

    llm = Echo(
        model_name="gpt-4o-mini",  # a name curator knows; the fake server answers any
        backend="openai",
        backend_params={
            "base_url": base_url,
            "api_key": "sk-bench",
            "max_concurrent_requests": concurrency,
            "max_requests_per_minute": 10_000_000,
            "max_tokens_per_minute": 10_000_000_000,
            "max_retries": 0,
            "require_all_responses": False,
        },
    )
    rows = [{"prompt": f"curator {i}"} for i in range(requests)]
    with tempfile.TemporaryDirectory() as folder:
        cpu, started = cpu_seconds(), time.perf_counter()
        result = llm(rows, working_dir=folder)
        seconds, cpu = time.perf_counter() - started, cpu_seconds() - cpu
    dataset = getattr(result, "dataset", result)
    print(json.dumps({"seconds": round(seconds, 3), "cpu_s": round(cpu, 3), "ok": len(dataset)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
