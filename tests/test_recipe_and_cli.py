"""Recipes are validated before anything runs; user errors are one line, exit code 2, no traceback."""

from __future__ import annotations

import pytest

from gen.errors import GenError
from gen.products.registry import load
from gen.recipe import load_recipe
from tests.conftest import REPO, locomo_sample, run_cli, write_json, write_recipe

TWO_SAMPLES = [
    locomo_sample("c1", ("Ann", "Bob"), [("1:56 pm on 8 May, 2023", ["hi there", "hello"])]),
    locomo_sample("c2", ("Cat", "Dan"), [("9:00 am on 9 May, 2023", ["one", "two three"])]),
]


def recipe_dict(**changes) -> dict:
    recipe = {"name": "t", "sources": [{"format": "locomo", "path": "data/convs.json"}], "products": [{"type": "log"}]}
    recipe.update(changes)
    return recipe


@pytest.fixture
def folder(tmp_path):
    write_json(tmp_path / "data" / "convs.json", TWO_SAMPLES)
    return tmp_path


def test_relative_paths_resolve_against_the_recipe_folder(folder, monkeypatch):
    monkeypatch.chdir("/")
    recipe = load_recipe(write_recipe(folder / "r.yaml", recipe_dict()))
    assert recipe.sources[0].path == (folder / "data" / "convs.json").resolve()


@pytest.mark.parametrize(
    "change, field, message",
    [
        ({"products": [{"type": "log"}, {"type": "log", "test": 1}]}, "products[1].test", "unknown key 'test'"),
        ({"timeline": {"seconds_per_wrd": 0.5}}, "timeline.seconds_per_wrd", "did you mean 'seconds_per_word'?"),
        (
            {"sources": [{"format": "locomo", "path": "data/convs.json", "longst": 2}]},
            "sources[0].longst",
            "did you mean 'longest'?",
        ),
        ({"timeline": {"seconds_per_word": "fast"}}, "timeline.seconds_per_word", "valid number"),
        ({"seed": [1]}, "seed", "valid integer"),
        ({"sources": [{"format": "locomo", "path": "data/missing.json"}]}, "sources[0].path", "file not found"),
        ({"sources": [{"format": "lokomo", "path": "data/convs.json"}]}, "sources[0].format", "'locomo'"),
        ({"products": [{"type": "logs"}]}, "products[0].type", "did you mean 'log'?"),
    ],
)
def test_bad_recipes_name_the_key_path(folder, change, field, message):
    with pytest.raises(GenError) as error:
        load(write_recipe(folder / "r.yaml", recipe_dict(**change)))
    assert error.value.field == field
    assert message in str(error.value)
    assert str(error.value).startswith(str(folder / "r.yaml"))


def test_unknown_key_message_reads_as_the_issue_shows(folder):
    with pytest.raises(GenError) as error:
        load(write_recipe(folder / "r.yaml", recipe_dict(products=[{"type": "log"}, {"type": "log", "tset": 1}])))
    assert str(error.value) == f"{folder / 'r.yaml'}: products[1].tset: unknown key 'tset'"


def test_cli_user_error_is_one_line_without_traceback(folder, capsys):
    recipe = write_recipe(folder / "r.yaml", recipe_dict(timeline={"seconds_per_wrd": 1}))
    code, _, err = run_cli(["run", recipe, "--output-dir", folder / "out"], capsys)
    assert code == 2
    assert err.strip() == (
        f"error: {recipe}: timeline.seconds_per_wrd: unknown key 'seconds_per_wrd'; did you mean 'seconds_per_word'?"
    )
    assert "Traceback" not in err and not (folder / "out").exists()


def test_cli_bad_source_data_names_file_record_field(folder, capsys):
    bad = [
        locomo_sample(
            "c1", ("Ann", "Bob"), [("1:56 pm on 8 May, 2023", ["hi", "there"]), ("25:00 on 9 May, 2023", ["x", "y"])]
        )
    ]
    write_json(folder / "data" / "convs.json", bad)
    code, _, err = run_cli(["validate", write_recipe(folder / "r.yaml", recipe_dict())], capsys)
    assert code == 2
    assert "convs.json: c1, session_2: session_2_date_time: cannot parse date '25:00 on 9 May, 2023'" in err


def test_cli_validate_checks_without_writing(folder, capsys, monkeypatch):
    monkeypatch.chdir(folder)
    code, _, err = run_cli(["validate", write_recipe(folder / "r.yaml", recipe_dict())], capsys)
    assert code == 0, err
    assert "recipe t is valid: 2 conversations" in err
    assert not (folder / "outputs").exists()


def test_cli_products_lists_the_registry(capsys):
    code, out, _ = run_cli(["products"], capsys)
    assert code == 0
    names = [line.split()[0] for line in out.splitlines()]
    assert "log" in names and "conversations" in names


@pytest.mark.parametrize("command", ["run", "validate", "products"])
def test_every_command_has_help_with_an_example(command, capsys):
    code, out, _ = run_cli([command, "--help"], capsys)
    assert code == 0 and "Example: gen " in out


def test_shipped_recipes_are_valid_apart_from_user_data_paths():
    for path in sorted((REPO / "recipes").glob("*.yaml")):
        try:
            load(path)
        except GenError as error:  # recipes for the real corpora point at data the user downloads
            assert error.field and error.field.endswith(".path"), f"{path.name}: {error}"


def test_cli_limit_caps_conversations_per_source(folder, capsys):
    recipe = write_recipe(folder / "r.yaml", recipe_dict(timeline={"padding": {"mode": "none"}}))
    code, _, err = run_cli(["run", recipe, "--output-dir", folder / "out", "--limit", "1"], capsys)
    assert code == 0, err
    rows = (folder / "out" / "t" / "conversations" / "test.jsonl").read_text().splitlines()
    assert len(rows) == 1 and '"locomo/c1"' in rows[0]
