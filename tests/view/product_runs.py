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


def quality_run(tmp: Path, sample_id: str = "s1") -> Path:
    """The log and quality labels of one two-session dialogue (no padding), built in this process."""
    source = write_json(tmp / "conv.json", [locomo_sample(sample_id, sessions=QUALITY_SESSIONS)])
    recipe = {
        "name": "quality",
        "sources": [{"format": "locomo", "path": str(source)}],
        "timeline": {"padding": {"mode": "none"}},
        "products": [{"type": "log"}, {"type": "quality_labels", "memory_top_k": 2}],
    }
    return run_in_process(tmp, recipe)


def run_in_process(tmp: Path, recipe: dict) -> Path:
    """`gen run` of `recipe` in this process, quality labels' encoder the bag of words (no model to fetch)."""
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from gen.products.quality import vectors
    from gen.recipe import load_recipe
    from tests.test_quality_labels import BagOfWords

    path = write_recipe(tmp / "recipe.yaml", recipe)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(vectors, "model", lambda: BagOfWords())
        patch.setattr("gen.embedding.model_folder", lambda what="": tmp)
        return run(load_recipe(path), RunOptions(output_dir=tmp / "out"))


def labelled_run(tmp: Path, product: str, episode_id: str = "episode-1") -> Path:
    """A TeaBag (episode `episode_id`) or persona SQL run with quality labels over the dialogues it writes (each
    session 6, each persona pseudo-dialogue): quality records whose conversation the run has no log of."""
    if product == "teabag":
        record = {**episode(), "dataID": episode_id}
        sources = [{"format": "cc", "path": str(write_json(tmp / "cc.json", [record]))}]
        products = [{"type": "teabag", "coherence": "lexical", "max_reject_rate": 1.0}]
        dialogues = ["teabag_session6"]
    else:
        sources = [{"format": "msc_personas", "path": str(write_json(tmp / "personas.json", {"train": [PERSONAS]}))}]
        products = [{"type": "persona_sql", "max_reject_rate": 1.0}]
        dialogues = ["persona_dialogues"]
    with FakeOpenAI(both_products(ModelAndJudge())) as server:
        endpoint = {**fake_endpoint(server.base_url), "structured_output": "json_schema"}
        recipe = {
            "name": f"{product}-labelled",
            "seed": 13,
            "sources": sources,
            "llm": {"main": endpoint},
            "products": [*products, {"type": "quality_labels", "memory_top_k": 2, "dialogues": dialogues}],
        }
        return run_in_process(tmp, recipe)


def both_products(teabag_model):
    """Persona SQL's prompts answered by persona_reply, TeaBag's by `teabag_model`."""

    def answer(request):
        prompt = request.messages[1]["content"] if len(request.messages) > 1 else ""
        return persona_reply(request) if re.search(r'^(.*) says: "(.*)"$', prompt, re.M) else teabag_model(request)

    return answer


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
