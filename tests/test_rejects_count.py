"""One count of rejected items, the same wherever a run shows it: the progress lines, the final line, run.json
(per step, totals, per product, top level), rejects.jsonl, the card and gen view's overview; and
max_reject_rate as a share of items, whatever the regenerations cost in calls.

The run: time_content_questions over sample-1 of the bundled sample (seed 13, six anchors, one per session,
the speakers alternating Maya, Tomas, Maya, ...: tcq-001 to tcq-006), against the fake OpenAI server. The fake
model names Maya in her questions and never names Tomas in his, so the speaker check fails Tomas's three
questions in every round. Worked out by hand, with retries 2 (three rounds):

    items 6: ok 3 (Maya's, first round), rejected 3 (Tomas's: tcq-002, tcq-004, tcq-006)
    calls 6 + 3 + 3 = 12, every reply parses: calls_ok 12, calls_rejected 0
"""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import REPO, gen_subprocess, read_jsonl, write_recipe
from tests.fakes.openai_server import FakeOpenAI, tcq_question

SPEAKER = re.compile(r"^1\. It asks about what (.+?) said", re.M)
STEP = "time_content_questions"
TOMAS = [f"locomo/sample-1/tcq-{n:03d}" for n in (2, 4, 6)]


def tomas_unnamed(request) -> dict:
    """Maya's questions name her; Tomas's never name him (the speaker check fails them every round)."""
    if SPEAKER.search(request.last_user).group(1) == "Tomas":
        return {**tcq_question(request), "question": "What was talked about back then, in their own words?"}
    return tcq_question(request)


def recipe(path, base_url: str, max_reject_rate: float):
    return write_recipe(
        path,
        {
            "name": "rejects",
            "seed": 13,
            "sources": [
                {"format": "locomo", "path": str(REPO / "gen" / "data" / "sample_locomo.json"), "ids": ["sample-1"]}
            ],
            "timeline": {"padding": {"mode": "donor", "after_minutes": 60, "target_words": 300}},
            "llm": {
                "main": {
                    "model": "fake-model",
                    "base_url": base_url,
                    "api_key_env": None,
                    "seed": 100,
                    "max_retries": 1,
                    "timeout_s": 10,
                    "structured_output": "json_schema",
                }
            },
            "products": [
                {
                    "type": STEP,
                    "per_conversation": 6,
                    "anchor_size": {1: 2, 2: 1},
                    "retries": 2,
                    "max_reject_rate": max_reject_rate,
                }
            ],
        },
    )


def run(tmp_path, max_reject_rate: float):
    with FakeOpenAI(tomas_unnamed) as server:
        path = recipe(tmp_path / "recipe.yaml", server.base_url, max_reject_rate)
        done = gen_subprocess(
            "run", path, "--output-dir", tmp_path / "out", env={"GEN_CACHE_DIR": str(tmp_path / "cache")}
        )
        return done, server.count


def assert_three_of_six(folder):
    """run.json and rejects.jsonl of the run described in the module docstring."""
    report = json.loads((folder / "run.json").read_text())
    llm = report["llm"]
    step = llm["steps"][STEP]
    assert (step["items"], step["ok"], step["rejected"]) == (6, 3, 3)
    assert (step["calls"], step["calls_ok"], step["calls_rejected"]) == (12, 12, 0)
    assert (llm["totals"]["items"], llm["totals"]["ok"], llm["totals"]["rejected"]) == (6, 3, 3)
    assert llm["totals"]["calls"] == 12
    assert llm["products"] == {STEP: {"items": 6, "ok": 3, "rejected": 3}}
    assert report["rejects"] == 3
    rejects = read_jsonl(folder / "rejects.jsonl")
    assert [r["item_id"] for r in rejects] == TOMAS
    assert all(r["reason"].startswith("speaker not named") and len(r["attempts"]) == 3 for r in rejects)


def test_every_report_of_a_run_says_the_same_rejected_items(tmp_path):
    done, requests = run(tmp_path, max_reject_rate=0.5)  # floor(0.5 × 6) = 3 allowed: exactly at the limit
    assert done.returncode == 0, done.stderr
    assert requests == 12
    folder = tmp_path / "out" / "rejects"
    assert_three_of_six(folder)
    assert len(read_jsonl(folder / STEP / "test.jsonl")) == 3

    lines = done.stderr.splitlines()
    progress = [line for line in lines if line.startswith(f"[llm] {STEP}:")]
    # the rounds' lines, then the step's closing line once its last rejects are decided
    assert progress[0] == f"[llm] {STEP}: 6 calls"
    assert "items: 0 ok, 0 rejected of 6" in progress[1]  # round 0 ends before its checks run
    assert progress[-1] == f"[llm] {STEP}: items: 3 ok, 3 rejected of 6 (reasons and raw replies go to rejects.jsonl)"
    passed = next(i for i, line in enumerate(lines) if "validation passed" in line)
    final = [line for line in lines[passed:] if "items rejected" in line]
    assert len(final) == 1 and final[0].endswith(
        f"{STEP}: 3 of 6 items rejected (reasons and raw replies in rejects.jsonl)"
    )

    card = (folder / "README.md").read_text()
    assert "3 items were given up on and left out" in card
    assert f"- `{STEP}`: 3 of 6 items (50.0%): speaker not named (3)" in card


def test_gen_views_overview_shows_the_same_count(tmp_path):
    pytest.importorskip("duckdb")
    from tests.view.viewer import fetch, running_viewer, wait_indexed

    done, _ = run(tmp_path, max_reject_rate=0.5)
    assert done.returncode == 0, done.stderr
    with running_viewer(tmp_path / "out" / "rejects") as url:
        wait_indexed(url)
        status, page = fetch(url + "/")
    assert status == 200
    assert f"Items rejected: 3 of 6 ({STEP}: 3 of 6)." in page


def test_max_reject_rate_is_a_share_of_items_not_of_calls(tmp_path):
    # floor(0.4 × 6 items) = 2 allowed, 3 rejected: the run stops after the last round. Counted over the 12
    # calls, as attempts, 0.4 would have allowed floor(4.8) = 4 and let the run pass.
    done, requests = run(tmp_path, max_reject_rate=0.4)
    assert done.returncode == 1, done.stderr
    assert requests == 12
    assert "stopped: 3 of 6 items rejected, more than max_reject_rate 40% allows; by kind: speaker not named ×3" in (
        done.stderr
    )
    kept = tmp_path / "out" / ".rejects.stopped"
    assert_three_of_six(kept)
    assert not (tmp_path / "out" / "rejects").exists()
