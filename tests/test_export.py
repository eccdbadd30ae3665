"""The export folder `gen push` commits: parquet per config with explicit features, loadable offline, and the card."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import date, datetime
from pathlib import Path

import pytest
import yaml

from gen.errors import GenError
from gen.export.card import render_card
from gen.export.card_header import split_card
from gen.export.hub_folder import build_export
from gen.pipeline.options import RunOptions
from gen.pipeline.runner import run
from gen.products.schema import as_features
from gen.recipe import load_recipe
from tests.conftest import REPO, locomo_sample, read_jsonl, write_json, write_recipe


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory) -> Path:
    """The run folder of `gen run recipes/quickstart.yaml --output-dir <tmp>`."""
    return run(load_recipe(REPO / "recipes" / "quickstart.yaml"), RunOptions(output_dir=tmp_path_factory.mktemp("out")))


@pytest.fixture(scope="module")
def exported(quickstart, tmp_path_factory):
    return build_export(quickstart, tmp_path_factory.mktemp("export") / "quickstart")


@pytest.fixture
def offline(monkeypatch):
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")


def configs_of(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())["configs"]


def with_nulls(value, feature):
    """A JSONL value as the schema stores it: keys a nested object omits come back as null, and the ISO text of a
    timestamp[s] or date32 field comes back as a datetime or a date."""
    if value is None:
        return None
    if isinstance(feature, dict):
        return {key: with_nulls(value.get(key), sub) for key, sub in feature.items()}
    inner = getattr(feature, "feature", None)
    if inner is not None and isinstance(value, list):
        return [with_nulls(item, inner) for item in value]
    dtype = getattr(feature, "dtype", None)
    if value is not None and dtype == "timestamp[s]":
        return datetime.strptime(value, "%Y-%m-%dT%H:%M:%S")
    if value is not None and dtype == "date32":
        return datetime.strptime(value, "%Y-%m-%d").date()
    return value


def flat(text: str) -> str:
    return " ".join(text.split())


def relative_files(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


# --- layout and loading ---------------------------------------------------------------------------


def test_export_layout_is_parquet_per_config_plus_card_recipe_and_report(quickstart, exported):
    configs = configs_of(quickstart)
    assert set(configs) >= {"log", "conversations"}
    expected = {"README.md", "recipe.yaml", "run.json"} | {
        f"data/{name}/test-00000-of-00001.parquet" for name in configs
    }
    # rejects.jsonl is empty in the quickstart, so left out; gen's marker lists what gen wrote
    assert relative_files(exported.folder) == expected | {".gen-files.json"}
    published = yaml.safe_load((exported.folder / "recipe.yaml").read_text())
    sample = (REPO / "gen" / "data" / "sample_locomo.json").read_bytes()
    # no folder of this machine: the file's name, and its sha256 to find it again
    assert published["sources"] == [
        {"format": "locomo", "path": "sample_locomo.json", "sha256": hashlib.sha256(sample).hexdigest()}
    ]
    assert {k: v for k, v in published.items() if k != "sources"} == {
        k: v for k, v in yaml.safe_load((REPO / "recipes" / "quickstart.yaml").read_text()).items() if k != "sources"
    }


def test_every_config_loads_offline_with_the_jsonl_rows_and_the_declared_features(
    quickstart, exported, offline, tmp_path
):
    import datasets

    from gen.products.registry import config_spec

    for name in configs_of(quickstart):
        features = as_features(config_spec(name)[1].features)
        loaded = datasets.load_dataset(str(exported.folder), name, split="test", cache_dir=str(tmp_path / "cache"))
        rows = read_jsonl(quickstart / name / "test.jsonl")
        assert loaded.features == features, name
        assert loaded.to_list() == [with_nulls(row, dict(features)) for row in rows], name


def test_dates_and_times_are_typed_in_the_export_and_iso_text_in_the_jsonl(quickstart, exported, offline, tmp_path):
    import datasets
    import pyarrow.parquet as pq

    # sample-1's session 1 starts at 4:12 pm on 22 March 2024; its first turn has 18 words: floor(0.46 x 18) = 8 s
    first = read_jsonl(quickstart / "log" / "test.jsonl")[0]
    assert (first["timestamp"], first["date"], first["time"]) == ("2024-03-22T16:12:08", "2024-03-22", "16:12:08")
    log = datasets.load_dataset(str(exported.folder), "log", split="test", cache_dir=str(tmp_path / "cache"))
    assert (log[0]["timestamp"], log[0]["date"]) == (datetime(2024, 3, 22, 16, 12, 8), date(2024, 3, 22))
    assert (log[0]["time"], log[0]["week"]) == ("16:12:08", "2024-W12")  # no date type fits these: text
    schema = pq.read_schema(exported.folder / "data" / "log" / "test-00000-of-00001.parquet")
    assert str(schema.field("date").type) == "date32[day]"
    assert str(schema.field("timestamp").type).startswith("timestamp[")  # parquet has no seconds unit: ms on disk
    conversations = datasets.load_dataset(
        str(exported.folder), "conversations", split="test", cache_dir=str(tmp_path / "cache")
    )
    assert conversations[0]["session_starts"][0] == datetime(2024, 3, 22, 16, 12)
    assert conversations.features["today"].dtype == "date32"
    questions = datasets.load_dataset(
        str(exported.folder), "time_queries", split="test", cache_dir=str(tmp_path / "cache")
    )
    dated = next(row for row in questions if row["test"] == "dates")
    assert isinstance(dated["params"]["date"], date) and isinstance(dated["now"], datetime)


@pytest.mark.parametrize(
    "config, field, text",
    [
        ("log", "timestamp", "2024-03-22 16:12:08"),  # a space for the T
        ("log", "timestamp", "2024-03-22T16:12:08Z"),  # a zone
        ("log", "date", "22/03/2024"),
        ("conversations", "now", "2024-04-24T16:17"),  # no seconds
    ],
)
def test_a_date_or_time_not_in_iso_form_names_file_line_and_field(quickstart, tmp_path, config, field, text):
    folder = copy_run(quickstart, tmp_path)
    rows = read_jsonl(folder / config / "test.jsonl")
    rows[1][field] = text
    (folder / config / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(GenError) as caught:
        build_export(folder, tmp_path / "export")
    message = str(caught.value)
    assert f"{config}/test.jsonl: line 2: {field}:" in message and "(expected an ISO date" in message


def test_a_config_above_the_shard_size_is_split_into_ordered_shards(quickstart, tmp_path, offline):
    import datasets
    import pyarrow.parquet as pq

    export = build_export(quickstart, tmp_path / "export", max_shard_size="30kB")
    shards = sorted(p for p in relative_files(export.folder) if p.startswith("data/log/"))
    count = len(shards)
    assert count > 1
    assert shards == [f"data/log/test-{i:05d}-of-{count:05d}.parquet" for i in range(count)]
    tables = [pq.read_table(export.folder / shard) for shard in shards]
    # streamed: each shard is filled up to the size (in memory, as arrow counts it when writing: a table read
    # back counts its buffers a little differently, hence the 2 %), the next starts where it stopped
    assert all(t.nbytes <= 30_000 * 1.02 for t in tables)
    whole = sum(t.nbytes for t in tables)
    assert math.ceil(whole / 30_600) <= count <= math.ceil(whole / 30_000) + 1
    loaded = datasets.load_dataset(str(export.folder), "log", split="test", cache_dir=str(tmp_path / "cache"))
    assert loaded["response_index"] == [r["response_index"] for r in read_jsonl(quickstart / "log" / "test.jsonl")]


# --- the card -------------------------------------------------------------------------------------


def test_export_card_points_at_the_parquet_and_carries_the_features(quickstart, exported):

    from gen.products.registry import config_spec

    header, body = split_card((exported.folder / "README.md").read_text())
    configs = configs_of(quickstart)
    assert [c["config_name"] for c in header["configs"]] == list(configs)
    assert [c["config_name"] for c in header["configs"] if c.get("default")] == ["time_queries"]  # a question config
    for entry in header["configs"]:
        assert entry["data_files"] == [{"split": "test", "path": f"data/{entry['config_name']}/test-*"}]
    for info in header["dataset_info"]:
        name = info["config_name"]
        assert info["features"] == config_spec(name)[1].features  # the declaration, copied as it is
        assert info["splits"] == [
            {"name": "test", "num_bytes": info["dataset_size"], "num_examples": configs[name]["records"]}
        ]
    assert header["license"] == "mit"  # the quickstart reads gen's own bundled sample, not LoCoMo
    assert header["pretty_name"] == "quickstart"
    for name, info in configs.items():
        assert f"### `{name}`" in body and f"{info['records']:,}" in body
    assert 'load_dataset("outputs/quickstart", "log", split="test")' not in body  # the export names no local path


def test_run_folder_card_points_at_the_jsonl_and_declares_the_features(quickstart):
    """The JSONL keeps dates and times as ISO text; the card declares them timestamp[s] / date32, the types
    datasets' JSON loader gives them, so the run folder loads with the export's types."""

    from gen.products.registry import config_spec

    header, body = split_card((quickstart / "README.md").read_text())
    assert {c["config_name"]: c["data_files"][0]["path"] for c in header["configs"]} == {
        name: f"{name}/test.jsonl" for name in configs_of(quickstart)
    }
    declared = {info["config_name"]: info["features"] for info in header["dataset_info"]}
    assert declared == {name: config_spec(name)[1].features for name in configs_of(quickstart)}
    assert "JSON lines" in body


def report_for(sources: list[dict], configs: dict | None = None) -> dict:
    return {
        "recipe": {"name": "mix", "fingerprint": "f" * 64, "seed": 1},
        "packages": {"gen": "0.1.0"},
        "split": "test",
        "sources": sources,
        "configs": configs or {"log": {"records": 3, "path": "log/test.jsonl", "description": "responses"}},
        "validation": {"log": {"passed": True, "checks": {"a check": {"checked": 3, "failed": 0}}}},
    }


def test_license_and_citations_come_from_the_sources():
    report = report_for(
        [
            {
                "format": "locomo",
                "origin": "/data/locomo10.json",
                "origin_name": "locomo10.json",
                "loaded": 10,
                "selected": 10,
            },
            {
                "format": "cc",
                "origin": "hf:jihyoung/ConversationChronicles",
                "origin_name": "x",
                "loaded": 5,
                "selected": 5,
            },
            {
                "format": "msc",
                "origin": "/data/msc/session_3/test.txt",
                "origin_name": "test.txt",
                "loaded": 2,
                "selected": 2,
            },
        ]
    )
    header, body = split_card(render_card(report))
    body = flat(body)
    assert header["license"] == ["cc-by-nc-4.0", "cc-by-4.0", "unknown"]
    assert "CC BY-NC 4.0" in body and "CC BY 4.0" in body and "ParlAI code is MIT" in body
    assert "non-commercial term of any source applies to the whole" in body
    assert "Maharana" in body and "Jang, Jihyoung" in body and "Beyond Goldfish Memory" in body


def test_a_locomo_layout_run_is_cc_by_nc(tmp_path):
    sample = locomo_sample(
        "conv-1",
        sessions=[
            ("1:56 pm on 8 May, 2023", ["hello there", "hi"]),
            ("2:00 pm on 9 May, 2023", ["again", "yes again"]),
        ],
    )
    source = write_json(tmp_path / "locomo10.json", [sample])
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "nc",
            "sources": [{"format": "locomo", "path": str(source)}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [{"type": "log"}],
        },
    )
    folder = run(load_recipe(recipe), RunOptions(output_dir=tmp_path / "out"))
    header, body = split_card((folder / "README.md").read_text())
    assert header["license"] == "cc-by-nc-4.0"
    assert "LoCoMo" in body and "padding session (taken from another conversation)" not in flat(body)


def test_counts_per_test_models_prompts_and_rejects_are_in_the_card(tmp_path):
    folder = tmp_path / "run"
    write_json(folder / "run.json", {})
    (folder / "time_content_questions").mkdir()
    rows = [
        {"question_id": "a", "model": "gpt-x", "prompt_id": "p111"},
        {"question_id": "b", "model": "gpt-x", "prompt_id": "p111"},
        {"question_id": "c", "model": "gpt-y", "prompt_id": "p222"},
    ]
    (folder / "time_content_questions" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    rejects = [
        {"product": "time_content_questions", "item_id": "x", "reason": "copies the anchor: overlap 0.9"},
        {"product": "time_content_questions", "item_id": "y", "reason": "copies the anchor: overlap 0.8"},
    ]
    (folder / "rejects.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rejects))
    (folder / "recipe.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "mix",
                "llm": {"main": {"model": "gpt-x", "base_url": "https://llm.example.org/v1", "temperature": 0.2}},
            }
        )
    )
    summary = {
        "by_test": {"date": {"base_questions": 2, "variants": 2}, "session": {"base_questions": 1, "variants": 1}},
        "total": {"base_questions": 3, "variants": 3},
    }
    from gen.pipeline.shards import provenance as count_provenance

    assert count_provenance(rows) == {
        ("model", "gpt-x"): 2,
        ("model", "gpt-y"): 1,
        ("prompt", "p111"): 2,
        ("prompt", "p222"): 1,
    }
    provenance = {"models": [["gpt-x", 2], ["gpt-y", 1]], "prompts": [["p111", 2], ["p222", 1]]}  # as in run.json
    report = report_for(
        [],
        {
            "time_content_questions": {
                "records": 3,
                "path": "time_content_questions/test.jsonl",
                "description": "questions",
                "summary": summary,
                "provenance": provenance,
                "questions": {"group_field": "reference_kind", "answer_field": None, "asked_by_speaker_a": False},
            }
        },
    )
    report["validation"] = {}
    card = render_card(report, folder=folder)
    assert "| date | 2 | 2 |" in card and "| session | 1 | 1 |" in card and "| **total** | **3** | **3** |" in card
    assert "`gpt-x` (2 records)" in card and "`gpt-y` (1 records)" in card and "`p111`" in card and "`p222`" in card
    assert "model `gpt-x` at `https://llm.example.org/v1` (temperature 0.2)" in card
    assert "2 items were given up on" in card and "2 of 5 items (40.0%)" in card  # no LLM counts: 2 of 2 + 3
    assert "copies the anchor (2)" in card
    assert "per `reference_kind`" in card  # how to score a time+content config


def test_card_metadata_is_merged_into_an_existing_card():
    report = report_for([{"format": "cc", "origin": "hf:x/y", "origin_name": "y", "loaded": 1, "selected": 1}])
    old = {
        "pretty_name": "My title",
        "tags": ["mine"],
        "license": "apache-2.0",
        "annotations_creators": ["machine"],
        "configs": [{"config_name": "gone", "data_files": "gone/*"}],
    }
    header, body = split_card(render_card(report, existing=[old]))
    assert header["pretty_name"] == "My title" and header["annotations_creators"] == ["machine"]
    assert header["tags"][0] == "mine" and "long-term-memory" in header["tags"]
    assert header["license"] == "cc-by-4.0"  # the license follows the sources, whatever the old card said
    assert [c["config_name"] for c in header["configs"]] == ["log"]
    header, body = split_card(render_card(report, existing=[old], overrides={"license": "other"}))
    assert header["license"] == "other" and "set the license field of this card to `other`" in body


def test_rerunning_keeps_metadata_added_to_the_run_folder_card(tmp_path):
    recipe = load_recipe(REPO / "recipes" / "quickstart.yaml")
    folder = run(recipe, RunOptions(output_dir=tmp_path))
    header, body = split_card((folder / "README.md").read_text())
    header["tags"] = ["my-tag"]
    (folder / "README.md").write_text("---\n" + yaml.safe_dump(header) + "---\n" + body)
    header, _ = split_card((run(recipe, RunOptions(output_dir=tmp_path)) / "README.md").read_text())
    assert header["tags"][0] == "my-tag" and "dialogue" in header["tags"]


def test_the_scoring_recipe_in_the_card_runs(quickstart, exported, offline, tmp_path, capsys):
    """The card's scoring code, run on the export: a perfect retriever scores 1, an empty one 0."""
    import datasets

    if "time_queries" not in configs_of(quickstart):
        pytest.skip("this quickstart recipe builds no time_queries config")
    _, body = split_card(exported.card)
    code = body.split("## Scoring", 1)[1].split("```python\n", 1)[1].split("```", 1)[0]
    code = code.replace('"path/to/this/folder"', repr(str(exported.folder)))
    code = code.replace('split="test")', f'split="test", cache_dir={str(tmp_path / "cache")!r})')
    rows = read_jsonl(quickstart / "time_queries" / "test.jsonl")
    gold = {r["question_id"]: r["relevant_response_indices"] for r in rows}
    one_test = {r["question_id"]: r["relevant_response_indices"] for r in rows if r["test"] == "session"}
    share = 1 / len({r["test"] for r in rows})  # tests weigh the same, however many questions each has
    for predictions, expected in (
        (gold, "recall 1.000  F2 1.000"),
        ({}, "recall 0.000  F2 0.000"),
        (one_test, f"recall {share:.3f}  F2 {share:.3f}"),
    ):
        exec(code.replace("predictions = {}", f"predictions = {predictions!r}"), {"datasets": datasets})
        assert capsys.readouterr().out.strip() == expected


# --- refusals -------------------------------------------------------------------------------------


def copy_run(quickstart: Path, tmp_path: Path) -> Path:
    import shutil

    target = tmp_path / "run"
    shutil.copytree(quickstart, target)
    return target


def test_a_record_with_a_field_outside_the_schema_names_file_line_and_field(quickstart, tmp_path):
    folder = copy_run(quickstart, tmp_path)
    rows = read_jsonl(folder / "conversations" / "test.jsonl")
    rows[1]["mood"] = "happy"
    (folder / "conversations" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(GenError) as caught:
        build_export(folder, tmp_path / "export")
    message = str(caught.value)
    assert "conversations/test.jsonl" in message and "line 2" in message and "not in the schema: mood" in message


def test_a_value_of_the_wrong_type_names_the_field(quickstart, tmp_path):
    folder = copy_run(quickstart, tmp_path)
    rows = read_jsonl(folder / "log" / "test.jsonl")
    rows[4]["session_index"] = "one"
    (folder / "log" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(GenError) as caught:
        build_export(folder, tmp_path / "export")
    assert "line 5: session_index" in str(caught.value) and "int64" in str(caught.value)


def test_a_failed_or_incomplete_run_is_not_exported(quickstart, tmp_path):
    folder = copy_run(quickstart, tmp_path)
    report = json.loads((folder / "run.json").read_text())
    report["validation"]["log"]["passed"] = False
    write_json(folder / "run.json", report)
    with pytest.raises(GenError, match="validation failed for log"):
        build_export(folder, tmp_path / "export")
    with pytest.raises(GenError, match=r"run\.json is missing"):
        build_export(quickstart / "log", tmp_path / "export")
    report["validation"]["log"]["passed"] = True
    report["stopped"] = {"reason": "interrupted (Ctrl-C)", "exit_code": 130}
    write_json(folder / "run.json", report)
    with pytest.raises(GenError, match=r"stopped before its end \(interrupted"):
        build_export(folder, tmp_path / "export")


def test_the_export_never_overwrites_an_unrelated_folder(quickstart, tmp_path):
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(GenError, match="a folder gen did not write is in the way"):
        build_export(quickstart, precious)
    with pytest.raises(GenError, match=r"lies inside the input run_folder \(the run folder\)"):  # from Python
        build_export(quickstart, quickstart / "export")
    assert (precious / "notes.txt").read_text() == "keep me"


def test_the_recipe_export_section_is_checked(tmp_path):
    base = {
        "name": "x",
        "sources": [{"format": "locomo", "path": str(REPO / "gen" / "data" / "sample_locomo.json")}],
        "products": [{"type": "log"}],
    }
    recipe = load_recipe(write_recipe(tmp_path / "ok.yaml", {**base, "export": {"hub": {"repo_id": "me/x"}}}))
    assert recipe.export.hub.repo_id == "me/x" and recipe.export.hub.private is True
    cases = [
        ({"hub": {"repo_id": "me/x", "token": "hf_abc"}}, "never holds a Hub token"),
        ({"hub": {"repo_id": "me/x", "max_shard_size": "lots"}}, "not a size"),
        ({"hub": {"repo_id": "me/x", "card": {"configs": []}}}, "written by gen"),
        ({"hub": {"repo_id": "no-slash"}}, "export.hub.repo_id"),
        ({"hubb": {}}, "did you mean 'hub'"),
    ]
    for index, (export, expected) in enumerate(cases):
        with pytest.raises(GenError) as caught:
            load_recipe(write_recipe(tmp_path / f"bad{index}.yaml", {**base, "export": export}))
        assert expected in str(caught.value)
        assert "hf_abc" not in str(caught.value)
