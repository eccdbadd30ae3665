"""Every LLM product, run by `gen run` against a real model (SmolLM2-135M-Instruct on llama.cpp's server).

A 135M model writes poor questions, so nothing here asserts how many items it gets right. What must hold
whatever it writes: every planned item ends in the output (which passed the product's validators) or in
rejects.jsonl with a reason and the model's raw reply; the requests that reached the server (counted by a
proxy, not by gen) are the requests run.json says were sent; and a run stopped by the reject limit keeps
rejects.jsonl with the raw reply of every item it gave up on.
"""

from __future__ import annotations

import json
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, gen_subprocess, read_jsonl, write_recipe

pytestmark = pytest.mark.realmodel

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"
SAMPLE_CONVERSATIONS = 2
RUN_TIMEOUT_S = 600  # a guard against a hung run, not a measurement


@dataclass(frozen=True)
class LLMProduct:
    """How the real-model group runs one LLM product on a few items of the bundled sample."""

    name: str
    options: dict[str, Any]
    items: int  # items the options plan over the sample, worked out by hand
    config: str  # the config its records are written to
    id_field: str  # the field of a record that holds the item id (rejects.jsonl calls it item_id)
    endpoint: dict[str, Any] = field(default_factory=dict)  # endpoint settings beyond the shared ones
    before: list[dict[str, Any]] = field(default_factory=list)  # products listed before it (whose records it reads)
    source: dict[str, Any] = field(default_factory=dict)  # the source entry's selection (default: the whole sample)
    sessions: int | None = None  # keep only each conversation's first N sessions (a copy of the sample)


PRODUCTS = [
    LLMProduct(
        "time_content_questions",
        {"per_conversation": 2, "retries": 1},
        items=2 * SAMPLE_CONVERSATIONS,
        config="time_content_questions",
        id_field="question_id",
        endpoint={"max_tokens": 96},  # a question and its answer fit in about 60 tokens
    ),
    LLMProduct(
        "gold_answers",
        {},
        items=1,  # one answer: the one real session left of sample-2
        config="gold_answers",
        id_field="group_id",
        # a weak model rambles: a reply cut off is a truncated reject, kept raw. A session window is a prompt of
        # ~1,500 tokens, which a CPU reads at 50-200 tokens/s: one window proves the accounting as well as three
        endpoint={"max_tokens": 160, "timeout_s": 300},
        before=[{"type": "time_queries", "tests": ["session"]}],
        source={"ids": ["sample-2"]},
        sessions=1,
    ),
]


# LLM products whose sources the bundled LoCoMo sample cannot feed, run against the real model in a file of
# their own (product → that file, under tests/realmodel/).
OWN_FILES = {"persona_sql": "test_persona_sql.py", "teabag": "test_teabag.py"}


def llm_products() -> set[str]:
    from gen.products.registry import REGISTRY

    return {name for name, product in REGISTRY.items() if product.needs.llm}


def endpoint(real_model, **settings) -> dict[str, Any]:
    return {
        "model": real_model.model,
        "base_url": real_model.base_url,
        "api_key_env": None,
        "temperature": 0.7,
        "max_tokens": 64,  # a question fits in about 30 tokens; a 135M model may ramble to the cap
        "seed": 7,
        "structured_output": "json_object",  # explicit: llama.cpp's server answers json_schema with a 500
        **settings,
    }


def recipe(path: Path, name: str, llm: dict[str, Any], product: dict[str, Any], before=(), source=None) -> Path:
    return write_recipe(
        path,
        {
            "name": name,
            "seed": 13,
            "sources": [{"format": "locomo", "path": str(SAMPLE), **(source or {})}],
            "timeline": {"padding": {"mode": "donor", "target_words": 800}},
            "llm": {"main": llm},
            "products": [*before, product],
        },
    )


def gen_run(recipe_path: Path, out: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    return gen_subprocess(
        "run", recipe_path, "--output-dir", out, cwd=REPO, env={"GEN_CACHE_DIR": str(cache)}, timeout=RUN_TIMEOUT_S
    )


def first_sessions(path: Path, count: int) -> Path:
    """The bundled sample with each conversation cut to its first `count` sessions (their dates kept)."""
    samples = json.loads(SAMPLE.read_text())
    for sample in samples:
        conversation = sample["conversation"]
        for key in [k for k in conversation if k.startswith("session_")]:
            if int(key.split("_")[1]) > count:
                del conversation[key]
    path.write_text(json.dumps(samples))
    return path


def belongs_to(reject: dict[str, Any], product: str) -> bool:
    """A product's own rejects name it; the engine's name the step, which is the product or product/<part>."""
    return reject.get("product") == product or str(reject.get("step", "")).split("/")[0] == product


def assert_raw_replies(rejects: list[dict[str, Any]], replies: list[str]) -> None:
    for reject in rejects:
        assert isinstance(reject.get("reason"), str) and reject["reason"].strip(), reject
        assert isinstance(reject.get("raw_text"), str), f"no raw reply kept: {reject}"
        assert reject["raw_text"] in replies, f"raw_text is not a reply the server sent: {reject}"


def test_every_llm_product_has_a_real_model_run():
    assert llm_products() == {p.name for p in PRODUCTS} | set(OWN_FILES), (
        "every LLM product runs against the real model: list it in PRODUCTS in tests/realmodel/test_products.py, "
        "or in OWN_FILES with the file that runs it"
    )
    for product, name in OWN_FILES.items():
        text = (Path(__file__).parent / name).read_text()
        assert f'"type": "{product}"' in text, f"{name} does not run {product}"


@pytest.mark.parametrize("product", PRODUCTS, ids=lambda p: p.name)
def test_a_run_of_a_few_items_accounts_for_every_item_and_every_request(product, real_model, tmp_path):
    options = {"type": product.name, **product.options, "max_reject_rate": 1.0}  # a weak model: keep going
    llm = endpoint(real_model, **product.endpoint)
    source = dict(product.source)
    if product.sessions is not None:
        source["path"] = str(first_sessions(tmp_path / "sample.json", product.sessions))
    path = recipe(tmp_path / "r.yaml", "realmodel", llm, options, product.before, source)

    result = gen_run(path, tmp_path / "out", tmp_path / "cache")

    assert result.returncode == 0, result.stderr
    folder = tmp_path / "out" / "realmodel"
    report = json.loads((folder / "run.json").read_text())
    assert report["validation"][product.name]["passed"]
    records = read_jsonl(folder / product.config / "test.jsonl")
    rejects = [r for r in read_jsonl(folder / "rejects.jsonl") if belongs_to(r, product.name)]
    written = [row[product.id_field] for row in records]
    rejected = [r["item_id"] for r in rejects]
    assert len(set(written)) == len(written) and len(set(rejected)) == len(rejected)
    assert not set(written) & set(rejected)
    assert len(written) + len(rejected) == product.items
    assert_raw_replies(rejects, real_model.proxy.replies())
    # every request sent, a timed-out one included (calls_made leaves those out: no reply came back)
    assert real_model.proxy.count == report["llm"]["totals"]["requests"]
    assert real_model.proxy.count >= product.items  # every item was asked at least once


STOP = re.compile(r"stopped: (\d+) of (\d+) items rejected")


def stopped_run(real_model, tmp_path: Path, pinned_reply: str) -> tuple[Path, int]:
    """A time_content_questions run over 2 items (one per conversation) whose every reply is `pinned_reply` (a
    grammar makes the server write exactly that), stopped by a reject limit of 0; returns the kept folder and
    the number of items the stop reason says were given up on."""
    grammar = 'root ::= "' + pinned_reply.replace("\\", "\\\\").replace('"', '\\"') + '"'
    # "off": llama.cpp's server would replace the grammar with its own for a response_format; one request at a
    # time, so the server is not left answering requests the stopped run no longer waits for
    llm = endpoint(real_model, structured_output="off", extra_params={"grammar": grammar}, max_concurrency=1)
    options = {
        "type": "time_content_questions",
        "per_conversation": 1,
        "retries": 0,
        "context_lines": 0,  # shorter prompts; what they say does not matter here
        "max_reject_rate": 0,
    }
    result = gen_run(recipe(tmp_path / "r.yaml", "stops", llm, options), tmp_path / "out", tmp_path / "cache")

    assert result.returncode != 0, result.stdout
    assert not (tmp_path / "out" / "stops").exists()  # a stopped run is never published
    kept = tmp_path / "out" / ".stops.stopped"
    assert (kept / "run.json").is_file() and (kept / "rejects.jsonl").is_file(), result.stderr
    reason = json.loads((kept / "run.json").read_text())["stopped"]["reason"]
    match = STOP.search(reason)
    assert match, reason
    assert real_model.proxy.replies() and set(real_model.proxy.replies()) == {pinned_reply}
    return kept, int(match.group(1))


def test_a_reject_limit_stop_keeps_the_raw_reply_of_every_call_that_failed(real_model, tmp_path):
    # "{}" parses as JSON but has no question: the call fails after its correction round
    kept, given_up = stopped_run(real_model, tmp_path, "{}")

    rejects = [r for r in read_jsonl(kept / "rejects.jsonl") if belongs_to(r, "time_content_questions")]
    assert given_up >= 1 and len(rejects) == given_up
    assert len({r["item_id"] for r in rejects}) == given_up
    assert_raw_replies(rejects, real_model.proxy.replies())


# A well-formed question that names no speaker and no time, so every item fails its checks in round 0, with an
# answer both items' anchors accept (the answer is checked as the reply is parsed): the two anchors, planned with the
# options of stopped_run, are Maya's "... move on to mugs next week ..." and Ruth's "Slugs are the worst ...", so
# each finds one of its two content words, 50%, the least the answer rule allows.
FAILS_ITS_CHECKS = '{"question": "What was that about?", "answer": "Mugs and slugs."}'


def test_a_reject_limit_stop_keeps_the_raw_reply_of_every_item_that_failed_its_checks(real_model, tmp_path):
    kept, given_up = stopped_run(real_model, tmp_path, FAILS_ITS_CHECKS)

    assert given_up == 2  # both items of round 0
    rejects = [r for r in read_jsonl(kept / "rejects.jsonl") if belongs_to(r, "time_content_questions")]
    assert len(rejects) == 2 and len({r["item_id"] for r in rejects}) == 2
    # the product's rejects (their question failed its checks), not the engine's (a reply that did not parse)
    assert all(r.get("product") == "time_content_questions" and r["attempts"] for r in rejects), rejects
    assert_raw_replies(rejects, real_model.proxy.replies())
