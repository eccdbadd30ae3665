"""`gen schema`: the recipe's JSON Schema and the options reference, generated from the models that check a recipe.

The committed recipe.schema.json and docs/recipe-options.md must be what `gen schema` makes now (as llm's docs are
checked by cog): a new option, a new product or a changed description fails here until they are made again with

    gen schema --builtin --output recipe.schema.json
    gen schema --builtin --markdown --output docs/recipe-options.md

Every bundled recipe names the schema on its first line, and it and the fuzzer's valid recipes validate against
it; recipes that gen refuses for a key, a type or a range the schema describes are refused by the schema too.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from gen.errors import GenError
from gen.reading import read_yaml
from gen.recipe import recipe_from_data
from tests.conftest import REPO, run_cli

jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is in the test extra")

SCHEMA = REPO / "recipe.schema.json"
REFERENCE = REPO / "docs" / "recipe-options.md"
RECIPES = sorted((REPO / "recipes").glob("*.yaml"))
SCHEMA_LINE = "# yaml-language-server: $schema=../recipe.schema.json"


@pytest.fixture(scope="module")
def validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def errors(validator, recipe: dict) -> list[str]:
    return [error.message for error in validator.iter_errors(as_json(recipe))]


def as_json(recipe: dict) -> dict:
    """The recipe as an editor's YAML server sees it: JSON values (a date becomes its ISO text)."""
    return json.loads(json.dumps(recipe, default=lambda value: value.isoformat()))


def test_the_committed_schema_is_what_gen_schema_makes(capsys):
    code, out, err = run_cli(["schema", "--builtin"], capsys)
    assert code == 0, err
    assert out == SCHEMA.read_text(encoding="utf-8"), (
        "recipe.schema.json is stale: run gen schema --builtin --output recipe.schema.json"
    )


def test_the_committed_options_reference_is_what_gen_schema_makes(tmp_path, capsys):
    code, _, err = run_cli(["schema", "--builtin", "--markdown", "--output", tmp_path / "options.md"], capsys)
    assert code == 0, err
    assert (tmp_path / "options.md").read_text(encoding="utf-8") == REFERENCE.read_text(encoding="utf-8"), (
        "docs/recipe-options.md is stale: run gen schema --builtin --markdown --output docs/recipe-options.md"
    )


@pytest.mark.parametrize("recipe", RECIPES, ids=lambda path: path.name)
def test_every_bundled_recipe_names_the_schema_and_validates(recipe, validator):
    assert recipe.read_text(encoding="utf-8").splitlines()[0] == SCHEMA_LINE
    assert (recipe.parent / "../recipe.schema.json").resolve() == SCHEMA
    assert errors(validator, read_yaml(recipe, "a recipe")) == []


def test_the_fuzzers_valid_recipes_validate(validator):
    from tests.fuzz.bases import BASES, LLM

    for base in [*BASES.values(), LLM]:
        assert errors(validator, base.recipe) == [], base.name


QUICKSTART = read_yaml(REPO / "recipes" / "quickstart.yaml", "a recipe")


def changed(path: tuple, value) -> dict:
    """The quickstart with one value set (path of keys and list positions into the recipe)."""
    recipe = copy.deepcopy(QUICKSTART)
    place = recipe
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = value
    return recipe


# (what changes, gen's message says) — each refused by gen when the recipe is bound, and by the schema
REFUSED = [
    (changed(("timeline", "seconds_per_wrd"), 0.5), "unknown key 'seconds_per_wrd'"),
    (changed(("timeline", "seconds_per_word"), 0), "greater than 0"),
    (changed(("timeline", "padding", "mode"), "donors"), "'none', 'donor' or 'file'"),
    (changed(("sources", 0, "format"), "lcomo"), "'locomo'"),
    (changed(("products", 2), {"type": "time_queries", "span_length": 1}), "greater than or equal to 2"),
    (changed(("products", 2), {"type": "time_queries", "pairing": "all"}), "unknown key 'pairing'"),
    (changed(("products", 2), {"type": "time_querys"}), "unknown product type 'time_querys'"),
    (changed(("products", 2), {"type": "time_queries", "max_variants_per_group": 0}), "neither a number"),
    (changed(("products",), []), "at least 1 item"),
    (changed(("name",), "has space"), "match pattern"),
    (changed(("sources", 0, "options"), {"speaker_column": "who"}), "unknown key 'speaker_column'"),  # locomo: none
    (changed(("sources", 0), {"format": "csv", "path": "x", "options": {"speaker_col": "who"}}), "'speaker_col'"),
]
ACCEPTED = [
    changed(("products", 3), {"type": "ambiguous_time_queries", "pairing": "all", "max_variants_per_group": "all"}),
    changed(("timeline", "padding"), {"mode": "donor", "after_minutes": {"min": 30, "max": 90}}),
    changed(("timeline", "padding"), {"mode": "none", "after_minutes": [30, 60]}),
    changed(("timeline", "anchor_start"), "2023-05-01T09:00:00"),
    changed(("sources", 0), {"format": "csv", "path": "x", "options": {"speaker": "who", "text": "said"}}),
]


def bind(recipe: dict, tmp_path: Path) -> None:
    from gen.products.registry import bind as bind_products

    data = copy.deepcopy(recipe)
    data["sources"][0]["path"] = str(REPO / "gen" / "data" / "sample_locomo.json")
    bind_products(recipe_from_data(data, tmp_path / "recipe.yaml"))


@pytest.mark.parametrize(("recipe", "said"), REFUSED, ids=[said for _, said in REFUSED])
def test_what_gen_refuses_for_a_key_type_or_range_the_schema_refuses(recipe, said, validator, tmp_path):
    with pytest.raises(GenError, match=said.replace("(", r"\(")):
        bind(recipe, tmp_path)
    assert errors(validator, recipe), "the schema let through a recipe gen refuses"


@pytest.mark.parametrize("recipe", ACCEPTED)
def test_what_gen_accepts_the_schema_accepts(recipe, validator, tmp_path):
    bind(recipe, tmp_path)
    assert errors(validator, recipe) == []


def test_a_products_options_are_checked_against_that_product_only(validator):
    """An option of one product given to another is reported as not allowed there."""
    found = errors(validator, changed(("products", 2), {"type": "time_queries", "pairing": "rotate"}))
    assert found == ["Additional properties are not allowed ('pairing' was unexpected)"]


def test_defaults_made_by_a_factory_are_shown_but_not_one_read_from_the_environment(validator, monkeypatch):
    from gen.recipe_schema import products, recipe_schema, source_formats

    monkeypatch.setenv("OPENAI_BASE_URL", "http://this-machine.invalid/v1")
    definitions = recipe_schema(products(builtin_only=True), source_formats(builtin_only=True))["$defs"]
    assert "default" not in definitions["EndpointConfig"]["properties"]["base_url"]
    time_queries = next(
        entry["then"]
        for entry in definitions["ProductEntry"]["allOf"]
        if entry["if"]["properties"]["type"]["const"] == "time_queries"
    )
    assert time_queries["properties"]["day_spans"]["default"] == [3, 7]
    assert len(time_queries["properties"]["tests"]["default"]) == 11
    assert "this-machine" not in SCHEMA.read_text(encoding="utf-8")


def test_gen_schema_replaces_its_output_whole_and_refuses_a_device(tmp_path, capsys):
    output = tmp_path / "recipe.schema.json"
    output.write_text("an older schema")
    code, _, err = run_cli(["schema", "--builtin", "--output", output], capsys)
    assert code == 0 and err.strip() == f"wrote {output}"
    assert output.read_text(encoding="utf-8") == SCHEMA.read_text(encoding="utf-8")
    assert [path.name for path in tmp_path.iterdir()] == ["recipe.schema.json"]  # no temporary file left
    code, _, err = run_cli(["schema", "--output", "/dev/null"], capsys)
    assert code == 2 and "/dev/null: the output is a character device, not a file" in err


def test_the_schema_lists_every_product_gen_products_lists(validator, capsys):
    code, out, _ = run_cli(["products"], capsys)
    assert code == 0
    listed = validator.schema["$defs"]["ProductEntry"]["properties"]["type"]["enum"]
    assert listed == [line.split()[0] for line in out.splitlines()]
