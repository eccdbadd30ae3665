"""A small run driven as a subprocess by test_faults.py (SIGKILL half-way, then resume).

    python kill_driver.py BASE_URL CACHE_DIR OUT_PATH N [online|batch]

Runs one step of N summary tasks and writes the outcomes as JSON lines to OUT_PATH (only at the end).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from pydantic import BaseModel

from gen.llm import Engine, RunSettings, Task


class Summary(BaseModel):
    topic: str
    words: int


def main(base_url: str, cache_dir: str, out_path: str, n: int, mode: str = "online") -> int:
    endpoint = {
        "model": "fake-model",
        "base_url": base_url,
        "api_key_env": "GEN_TEST_API_KEY",
        "max_concurrency": 4,
        "timeout_s": 60,
        "temperature": 0.5,
        "structured_output": "json_schema",
        "mode": mode,
        "batch_poll_s": 0.05,
    }
    tasks = [Task(f"item-{i}", "main", f"topic{i} " + "word " * (i % 7), Summary) for i in range(n)]
    with Engine({"main": endpoint}, RunSettings(cache_dir=cache_dir, progress="off")) as engine:
        outcomes = engine.run_step("summaries", tasks)
    with open(out_path, "w", encoding="utf-8") as out:
        for outcome in outcomes:
            record = {
                "item_id": outcome.item_id,
                "ok": outcome.ok,
                "text": outcome.text,
                "value": outcome.value.model_dump() if outcome.ok else None,
            }
            out.write(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), *sys.argv[5:]))
