"""Records are checked against their config's declared features during `gen run`'s validation, a plugin's too,
so that a run that passes always loads with `datasets.load_dataset`: a missing field, an extra field or a value of
the wrong type fails validation naming the config, the record and the field. The same check serves the export."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from gen.products.base import BuildContext, ConfigSpec, ConversationProduct, Record, Records, Unit
from gen.products.checks import Checks
from gen.products.record_check import FITS, RecordCheck
from gen.products.registry import REGISTRY
from gen.products.schema import BOOL, DATE, FLOAT64, INT64, STRING, TIMESTAMP, list_of, schema, struct
from gen.recipe import StrictModel
from tests.conftest import REPO, read_jsonl, run_cli, write_recipe
from tests.test_quality_labels import bag_of_words  # noqa: F401  (the fixture)

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"

FEATURES = schema(
    {
        "question_id": STRING,
        "count": INT64,
        "score": FLOAT64,
        "kept": BOOL,
        "now": TIMESTAMP,
        "day": DATE,
        "indices": list_of(INT64),
        "turns": list_of(struct({"speaker": STRING, "text": STRING})),
        "params": struct({"session": INT64}),
    }
)
GOOD = {
    "question_id": "q1",
    "count": 3,
    "score": 0.5,
    "kept": True,
    "now": "2023-05-08T13:56:04",
    "day": "2023-05-08",
    "indices": [1, 2],
    "turns": [{"speaker": "Ann", "text": "hi"}],
    "params": {"session": 1},
}


@pytest.mark.parametrize(
    ("change", "field", "problem"),
    [
        ({"count": 1.5}, "count", "value 1.5 is not int64"),
        ({"count": 1.0}, "count", "value 1.0 is not int64"),
        ({"count": True}, "count", "value true is not int64"),
        ({"count": "3"}, "count", 'value "3" is not int64'),
        ({"count": 2**63}, "count", "value 9223372036854775808 is not int64"),
        ({"score": "0.5"}, "score", 'value "0.5" is not float64'),
        ({"kept": 1}, "kept", "value 1 is not bool"),
        ({"question_id": 7}, "question_id", "value 7 is not string"),
        ({"now": "2023-05-08 13:56:04"}, "now", 'value "2023-05-08 13:56:04" is not timestamp[s]'),
        ({"day": "08/05/2023"}, "day", 'value "08/05/2023" is not date32'),
        ({"indices": [1, "2"]}, "indices[1]", 'value "2" is not int64'),
        ({"indices": 1}, "indices", "value 1 is not list[int64]"),
        ({"turns": [{"speaker": "Ann", "text": 5}]}, "turns[0].text", "value 5 is not string"),
        ({"turns": [{"speaker": "Ann", "mood": "x"}]}, "turns[0].mood", "not in the schema (keys not in it: mood)"),
        ({"params": [1]}, "params", "value [1] is not {session: int64}"),
    ],
)
def test_a_value_that_does_not_fit_names_its_field(change, field, problem):
    check = RecordCheck(FEATURES)
    found = check.mismatch({**GOOD, **change})
    assert found is not None and (found.field, found.problem) == (field, problem)
    assert not check.all_fit([GOOD, {**GOOD, **change}, GOOD])  # the quick test of many never lets it through


def test_what_fits():
    check = RecordCheck(FEATURES)
    fitting = [
        GOOD,
        {**GOOD, "score": 2},  # JSON has one number type: 2 reads as 2.0
        {**GOOD, "params": {}, "turns": [{"speaker": None}]},  # nested keys may be left out
        dict.fromkeys(GOOD),  # null fits every type
        {**GOOD, "indices": (1, None, 2**63 - 1)},  # a tuple is written as an array; int64's highest
        {**GOOD, "count": -(2**63)},  # int64's lowest (the quick test defers it to the exact one)
    ]
    assert [check.mismatch(record) for record in fitting] == [None] * len(fitting)
    assert check.all_fit(fitting[:5]) and check.all_fit([])


def test_top_level_fields_are_exactly_the_declared_ones():
    check = RecordCheck(FEATURES)
    extra = check.mismatch({**GOOD, "mood": "happy", "tone": 1})
    assert extra is not None and extra.field == "mood" and "not in the schema: mood, tone" in extra.problem
    short = {key: value for key, value in GOOD.items() if key not in ("kept", "day")}
    missing = check.mismatch(short)
    assert missing is not None and missing.field == "kept" and "missing: kept, day" in missing.problem
    assert check.mismatch([GOOD]).problem.startswith("a record is [")  # type: ignore[union-attr]
    assert not check.all_fit([GOOD, {**GOOD, "mood": "happy"}]) and not check.all_fit([GOOD, short])


# --- a plugin product's records, through `gen run` ----------------------------------------------------------

PLUGIN_FEATURES = schema({"question_id": STRING, "conversation_id": STRING, "session_index": INT64})


class FaultyOptions(StrictModel):
    fault: str = "none"


class FaultyQuestions(ConversationProduct[FaultyOptions]):
    """A product as a plugin would add one: one record per session, the second with the fault the recipe names.
    Its own validator checks nothing, so only the features check can fail the run."""

    name = "faulty_questions"
    description = "a test plugin whose records may not fit its features"
    Options = FaultyOptions
    configs = (ConfigSpec("faulty_questions", "test records", PLUGIN_FEATURES),)

    def records(self, unit: Unit, ctx: BuildContext) -> Iterator[tuple[str, Record]]:
        for index in range(1, 4):
            record: dict = {
                "question_id": f"{unit.conversation_id}/faulty/{index}",
                "conversation_id": unit.conversation_id,
                "session_index": index,
            }
            if index == 2:
                fault = self.options.fault
                if fault == "extra":
                    record["mood"] = "happy"
                elif fault == "wrong type":
                    record["session_index"] = "two"
                elif fault == "missing":
                    del record["session_index"]
            yield "faulty_questions", record

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        return None


@pytest.fixture
def plugin(monkeypatch):
    monkeypatch.setitem(REGISTRY, FaultyQuestions.name, FaultyQuestions)


def plugin_recipe(tmp_path: Path, fault: str) -> Path:
    return write_recipe(
        tmp_path / "faulty.yaml",
        {
            "name": "faulty",
            "sources": [{"format": "locomo", "path": str(SAMPLE), "ids": ["sample-1"]}],
            "products": [{"type": "faulty_questions", "fault": fault}],
        },
    )


@pytest.mark.parametrize(
    ("fault", "named"),
    [
        ("extra", "field mood: the record's fields differ from the declared features (not in the schema: mood)"),
        ("wrong type", 'field session_index: value "two" is not int64 (declared int64)'),
        ("missing", "field session_index: the record's fields differ from the declared features (missing: "),
    ],
)
def test_a_plugin_record_that_does_not_fit_fails_the_runs_validation(plugin, tmp_path, capsys, fault, named):
    code, _, err = run_cli(["run", plugin_recipe(tmp_path, fault), "--output-dir", tmp_path / "out"], capsys)
    assert code == 1 and "validation failed for faulty_questions" in err and "Traceback" not in err
    place = "config faulty_questions, record 1 of conversation locomo/sample-1 (question_id"
    assert place in err and named in err
    kept = next((tmp_path / "out").glob(".faulty.failed*"))
    check = json.loads((kept / "run.json").read_text())["validation"]["faulty_questions"]["checks"][FITS]
    assert (check["checked"], check["failed"]) == (3, 1) and named in check["examples"][0]


def test_a_plugin_record_that_fits_passes(plugin, tmp_path, capsys):
    code, _, err = run_cli(["run", plugin_recipe(tmp_path, "none"), "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    report = json.loads((tmp_path / "out" / "faulty" / "run.json").read_text())
    assert report["validation"]["faulty_questions"]["checks"][FITS] == {"checked": 3, "failed": 0}


# --- every config of a finished run loads ---------------------------------------------------------------------


def loads_whole(folder: Path) -> None:
    """gen.load (load_dataset on each config) gives every record of every config, with the declared features."""
    import gen
    from gen.products.registry import config_spec
    from gen.products.schema import as_features

    report = json.loads((folder / "run.json").read_text())
    assert all(result["checks"][FITS]["failed"] == 0 for result in report["validation"].values())
    loaded = gen.load(folder)
    assert sorted(loaded) == sorted(report["configs"])
    for name, dataset in loaded.items():
        assert dataset.num_rows == report["configs"][name]["records"] == len(read_jsonl(folder / name / "test.jsonl"))
        assert dataset.features == as_features(config_spec(name)[1].features)


def test_every_config_of_the_products_without_llm_loads(quickstart):
    report = json.loads((quickstart / "run.json").read_text())
    assert set(report["configs"]) == {"log", "conversations", "time_queries", "ambiguous_time_queries"}
    loads_whole(quickstart)


def test_teabag_configs_load(tmp_path):
    from tests.test_teabag_product import Model, run_folder

    loads_whole(run_folder(tmp_path, Model(), None))


def test_persona_sql_configs_load(tmp_path):
    from gen.llm.config import RunSettings
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from tests.fakes.openai_server import FakeOpenAI
    from tests.test_persona_sql_labels import Model, recipe_for

    with FakeOpenAI(Model()) as server:
        recipe = recipe_for(tmp_path, server.base_url)
        folder = run(
            recipe,
            RunOptions(output_dir=tmp_path / "out", llm=RunSettings(cache_dir=tmp_path / "cache", progress="off")),
        )
    loads_whole(folder)


def test_time_content_questions_configs_load(tmp_path):
    from gen.llm.config import RunSettings
    from gen.pipeline.options import RunOptions
    from gen.pipeline.runner import run
    from tests.fakes.openai_server import FakeOpenAI, tcq_question
    from tests.test_time_content_questions import make_recipe

    with FakeOpenAI(tcq_question) as server:
        recipe = make_recipe(tmp_path, server.base_url, verify="no")
        folder = run(
            recipe,
            RunOptions(output_dir=tmp_path / "out", llm=RunSettings(cache_dir=tmp_path / "cache", progress="off")),
        )
    loads_whole(folder)


def test_quality_labels_configs_load(tmp_path, bag_of_words):  # noqa: F811
    from tests.fakes.openai_server import FakeOpenAI
    from tests.test_quality_backends import quality_recipe, run_once, script

    with FakeOpenAI(script) as server:
        folder = run_once(quality_recipe(tmp_path, server.base_url), tmp_path / "out", tmp_path / "cache")
    loads_whole(folder)
