"""Small runs of the products that have a page of their own in the viewer (persona SQL, TeaBag, quality labels),
each made by the real `gen run` against the fake OpenAI-compatible server (quality labels in this process, with
the bag-of-words encoder of tests/test_quality_labels.py standing in for MiniLM). Each run holds one word of
LONG_WORD's length, which no page may let widen it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import gen_subprocess, locomo_sample, read_jsonl, write_json, write_recipe
from tests.fakes.openai_server import FakeOpenAI
from tests.test_judge_teabag import RIGHT, WRONG, ModelAndJudge
from tests.test_teabag_product import episode, recipe_for

LONG_WORD = "w" * 6000
S1, S2 = "Speaker 1", "Speaker 2"
PERSONAS = {
    S1: ["My name is Ann.", "I have two cats.", f"I like {LONG_WORD}.", "I grew up in Bergen."],
    S2: ["I live in Oslo.", "I love chess.", "I am allergic to nuts."],
}
REJECTED_LINE = "I love chess."  # answered with a label that empties the table, twice: the pair is rejected


def persona_reply(request) -> str:
    """Appends each line to its speaker's `other` column (so the table before and after differ in one cell)."""
    prompt = request.messages[1]["content"]
    speaker, line = re.search(r'^(.*) says: "(.*)"$', prompt, re.M).groups()
    if line == REJECTED_LINE:
        return "DELETE FROM persona;"
    quoted = line.replace("'", "''")
    return f"UPDATE persona SET other = COALESCE(other || '; ', '') || '{quoted}' WHERE speaker = '{speaker}';"


def fake_endpoint(base_url: str) -> dict:
    return {"model": "fake-model", "base_url": base_url, "api_key_env": None, "max_retries": 1}


def persona_run(tmp: Path) -> Path:
    source = write_json(tmp / "personas.json", {"train": [PERSONAS]})
    with FakeOpenAI(persona_reply) as server:
        recipe = write_recipe(
            tmp / "persona.yaml",
            {
                "name": "persona",
                "sources": [{"format": "msc_personas", "path": str(source)}],
                "llm": {"main": fake_endpoint(server.base_url)},
                "products": [{"type": "persona_sql", "max_reject_rate": 1.0}],
            },
        )
        done = gen_subprocess("run", recipe, "--output-dir", tmp / "out", "--cache-dir", tmp / "cache")
    assert done.returncode == 0, done.stderr
    return tmp / "out" / "persona"


def teabag_run(tmp: Path) -> tuple[Path, Path]:
    """The run, and the verdicts file `gen judge` wrote for it (Ann's question answered right, Bob's wrong)."""
    record = episode()
    record["first_session_dialogue"][0] += f" {LONG_WORD}"
    source = write_json(tmp / "cc.json", [record])
    with FakeOpenAI(ModelAndJudge()) as server:
        recipe_for(tmp, server.base_url, [{"format": "cc", "path": str(source)}])  # writes tmp/recipe.yaml
        done = gen_subprocess("run", tmp / "recipe.yaml", "--output-dir", tmp / "out", "--cache-dir", tmp / "cache")
        assert done.returncode == 0, done.stderr
        folder = tmp / "out" / "teabag-test"
        asked = {row["asker"]: row["question_id"] for row in read_jsonl(folder / "teabag" / "test.jsonl")}
        answers = tmp / "answers.jsonl"
        answers.write_text(
            json.dumps({"question_id": asked["Ann"], "answer": RIGHT})
            + "\n"
            + json.dumps({"question_id": asked["Bob"], "answer": WRONG})
            + "\n"
        )
        done = gen_subprocess("judge", folder, "--answers", answers, "--cache-dir", tmp / "cache")
        assert done.returncode == 0, done.stderr
    return folder, tmp / "answers.verdicts.json"


QUALITY_SESSIONS = [
    (
        "1:00 pm on 8 May, 2023",
        [
            "I adopted a puppy named Rex",
            "What breed is Rex",
            "Thanks for asking, Rex is a beagle puppy",
            "Great, thanks",
        ],
    ),
    (
        "2:00 pm on 9 May, 2023",
        ["Do you remember my puppy", "Yes your cat", "Wrong, not what I asked, Rex is a beagle", f"Sorry {LONG_WORD}"],
    ),
]


def quality_run(tmp: Path) -> Path:
    """The log and quality labels of one two-session dialogue (no padding), built in this process."""
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from gen.products.quality import vectors
    from gen.recipe import load_recipe
    from tests.test_quality_labels import BagOfWords

    source = write_json(tmp / "conv.json", [locomo_sample("s1", sessions=QUALITY_SESSIONS)])
    recipe = write_recipe(
        tmp / "quality.yaml",
        {
            "name": "quality",
            "sources": [{"format": "locomo", "path": str(source)}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [{"type": "log"}, {"type": "quality_labels", "memory_top_k": 2}],
        },
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vectors, "model", lambda: BagOfWords())
        patch.setattr("gen.embedding.model_folder", lambda what="": tmp)
        return run(load_recipe(recipe), RunOptions(output_dir=tmp / "out"))


# -- fixtures (made once for the package: tests/view/conftest.py imports them) --------------------------------
@pytest.fixture(scope="package")
def persona_folder(tmp_path_factory) -> Path:
    return persona_run(tmp_path_factory.mktemp("persona"))


@pytest.fixture(scope="package")
def teabag_folders(tmp_path_factory) -> tuple[Path, Path]:
    return teabag_run(tmp_path_factory.mktemp("teabag"))


@pytest.fixture(scope="package")
def quality_folder(tmp_path_factory) -> Path:
    return quality_run(tmp_path_factory.mktemp("quality"))
