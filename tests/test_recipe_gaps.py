"""Bad recipes and bad source data meet `gen validate` as one message (file, record, field, what was expected)
and exit 2, never a traceback: recipe paths that are no text file (8), the recipe and data gaps of issue 11
(9), and LLM settings checked at load (10). Each case runs the command line's main() in this process (the exit
code machinery itself is tested in real processes in test_cli_usage.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from gen.products import registry
from gen.products.base import ConversationProduct, Needs
from gen.recipe import StrictModel
from tests.conftest import locomo_sample, run_cli, write_json, write_recipe

TWO = [
    locomo_sample("c1", ("Ann", "Bob"), [("1:56 pm on 8 May, 2023", ["hi there", "hello"])]),
    locomo_sample("c2", ("Cat", "Dan"), [("9:00 am on 9 May, 2023", ["one", "two three"])]),
]


def recipe_dict(**changes) -> dict:
    recipe = {
        "name": "t",
        "sources": [{"format": "locomo", "path": "convs.json"}],
        "timeline": {"padding": {"mode": "none"}},
        "products": [{"type": "log"}],
    }
    recipe.update(changes)
    return recipe


def with_samples(samples: list[dict], **changes) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        write_json(folder / "convs.json", samples)
        return write_recipe(folder / "r.yaml", recipe_dict(**changes))

    return make


def with_recipe(**changes) -> Callable[[Path], Path]:
    return with_samples(TWO, **changes)


def raw_recipe(content: bytes | None) -> Callable[[Path], Path]:
    def make(folder: Path) -> Path:
        path = folder / "r.yaml"
        if content is None:
            path.mkdir()
        else:
            path.write_bytes(content)
        return path

    return make


def misspelt_sources(folder: Path) -> Path:
    recipe = recipe_dict()
    recipe["source"] = recipe.pop("sources")
    write_json(folder / "convs.json", TWO)
    return write_recipe(folder / "r.yaml", recipe)


def sample_edited(edit: Callable[[dict], None]) -> list[dict]:
    sample = locomo_sample(
        "c1",
        ("Ann", "Bob"),
        [("1:56 pm on 8 May, 2023", ["hi there", "hello"]), ("9:00 am on 9 May, 2023", ["a", "b"])],
    )
    edit(sample["conversation"])
    return [sample, TWO[1]]


def skip_session_2(conversation: dict) -> None:
    conversation["session_3"] = conversation.pop("session_2")
    conversation["session_3_date_time"] = conversation.pop("session_2_date_time")


def cc_without_second_session(folder: Path) -> Path:
    episode = {
        "dataID": "ep1",
        "first_session_dialogue": ["hi", "hello"],
        "first_session_speakers": ["Ann", "Bob"],
        "third_session_dialogue": ["again", "yes"],
        "third_session_speakers": ["Ann", "Bob"],
        "time_interval": ["Start", "A few days after", "A few weeks after"],
    }
    (folder / "cc.jsonl").write_text(json.dumps(episode) + "\n", encoding="utf-8")
    return write_recipe(folder / "r.yaml", recipe_dict(sources=[{"format": "cc", "path": "cc.jsonl"}]))


class AsksOptions(StrictModel):
    endpoint: str = "main"
    judge_endpoint: str = "main"


class Asks(ConversationProduct[AsksOptions]):
    """An LLM product whose options name two endpoints and that checks neither itself."""

    name, description, Options, configs, needs = "asks", "asks", AsksOptions, (), Needs(llm=True)

    def records(self, unit, ctx):
        return iter(())

    def validate(self, unit, records, checks, ctx):
        pass


LLM = {"main": {"model": "gpt-4o-mini", "api_key_env": None}}
TCQ = [{"type": "log"}, {"type": "time_content_questions"}]

# name → (make the files and return the recipe, words the one error line must hold)
CASES: dict[str, tuple[Callable[[Path], Path], list[str]]] = {
    # 8. a recipe path that is not a UTF-8 text file
    "recipe is a folder": (raw_recipe(None), ["r.yaml", "is a folder", "YAML recipe file"]),
    "recipe is binary": (raw_recipe(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"), ["r.yaml", "binary file", "YAML recipe"]),
    "recipe is Latin-1": (
        raw_recipe("name: t\n# café\n".encode("latin-1")),
        ["r.yaml", "line 2", "not UTF-8", "0xe9", "save it as UTF-8"],
    ),
    "recipe is UTF-16": (raw_recipe("name: t\n".encode("utf-16")), ["r.yaml", "UTF-16", "save it as UTF-8"]),
    # 9. recipe gaps
    "misspelt sources": (misspelt_sources, ["r.yaml", "missing key 'sources'", "found 'source'", "did you mean"]),
    "templates_dir missing": (
        with_recipe(templates_dir="my_templates"),
        ["r.yaml", "templates_dir", "folder not found", "my_templates"],
    ),
    "seconds_per_word 1e308": (
        with_recipe(timeline={"seconds_per_word": 1e308}),
        ["r.yaml", "timeline.seconds_per_word", "less than or equal to 60", "1e+308"],
    ),
    "now_offset_minutes infinite": (
        with_recipe(timeline={"now_offset_minutes": float("inf")}),
        ["r.yaml", "timeline.now_offset_minutes", "finite number"],
    ),
    "anchor_start year 999": (
        with_recipe(timeline={"anchor_start": "0999-01-02T10:00:00"}),
        ["r.yaml", "timeline.anchor_start", "four digits", "1000 or later"],
    ),
    "source year 999": (
        with_samples(sample_edited(lambda c: c.update(session_1_date_time="1:56 pm on 8 May, 999"))),
        ["convs.json", "c1, session_1", "session_1_date_time", "999, before 1000", "four-digit year"],
    ),
    "timestamps past 9999": (
        with_samples(
            sample_edited(lambda c: c.update(session_2_date_time="11:59 pm on 31 December, 9999")),
            timeline={"now_offset_minutes": 5, "padding": {"mode": "none"}},
        ),
        ["convs.json", "locomo/c1", "after the year 9999"],
    ),
    "one speaker twice": (
        with_samples(sample_edited(lambda c: c.update(speaker_b="Ann"))),
        ["convs.json", "c1", "speaker_b", "both 'Ann'", "two different speaker names"],
    ),
    "turn id twice": (
        with_samples(sample_edited(lambda c: c["session_2"][1].update(dia_id="D1:2"))),
        ["convs.json", "c1, session_2, turn 2", "dia_id", "'D1:2' is used twice", "session_1, turn 2"],
    ),
    "cc session skipped": (
        cc_without_second_session,
        ["cc.jsonl", "ep1", "second_session_dialogue", "none skipped"],
    ),
    # 10. LLM settings at load
    "endpoint model blank": (
        with_recipe(llm={"main": {"model": " ", "api_key_env": None}}, products=TCQ),
        ["r.yaml", "llm.main.model", "blank"],
    ),
    "endpoint timeout infinite": (
        with_recipe(llm={"main": {**LLM["main"], "timeout_s": float("inf")}}, products=TCQ),
        ["r.yaml", "llm.main.timeout_s", "finite number"],
    ),
    "endpoint price infinite": (
        with_recipe(
            llm={"main": {**LLM["main"], "price": {"input_per_million": float("inf"), "output_per_million": 1}}},
            products=TCQ,
        ),
        ["r.yaml", "llm.main.price.input_per_million", "finite number"],
    ),
    "product endpoint unknown": (
        with_recipe(llm=LLM, products=[{"type": "time_content_questions", "endpoint": "nope"}]),
        ["r.yaml", "products[0].endpoint", "unknown LLM endpoint 'nope'", "(main)"],
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_input_is_one_line_naming_where_and_what(tmp_path, capsys, case):
    make, words = CASES[case]
    code, _, err = run_cli(["validate", make(tmp_path)], capsys)
    assert code == 2, err
    [line] = [line for line in err.splitlines() if line.startswith("error: ")]
    assert "Traceback" not in err
    for word in words:
        assert word in line, word


def test_a_skipped_locomo_session_is_kept_with_a_warning_naming_it(tmp_path, capsys):
    code, _, err = run_cli(["validate", with_samples(sample_edited(skip_session_2))(tmp_path)], capsys)
    assert code == 0, err
    [warning] = [line for line in err.splitlines() if line.startswith("warning:")]
    assert "convs.json" in warning and "c1" in warning and "no session_2" in warning
    assert "session_3 is session 2" in warning


def test_an_endpoint_option_of_any_llm_product_is_checked_at_load(tmp_path, capsys, monkeypatch):
    """The registry checks every `endpoint`/`..._endpoint` option itself: a product need not remember to."""
    monkeypatch.setitem(registry.REGISTRY, Asks.name, Asks)
    recipe = with_recipe(
        llm={"main": {"model": "m", "api_key_env": None}}, products=[{"type": "asks", "judge_endpoint": "judge"}]
    )(tmp_path)
    code, _, err = run_cli(["validate", recipe], capsys)
    assert code == 2, err
    assert "products[0].judge_endpoint: unknown LLM endpoint 'judge'" in err and "(main)" in err
