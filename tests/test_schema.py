"""Config schemas are plain data in the form `datasets` writes into a card's `dataset_info`: every product's
declaration parses with `datasets` and prints back the same, the helpers write what `datasets` writes, the card
reads the plain form, and `gen run` never imports `datasets`."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from gen.export.card import temporal_fields
from gen.export.card_header import local_dataset_info
from gen.products.registry import REGISTRY
from gen.products.schema import (
    BOOL,
    DATE,
    FLOAT64,
    INT64,
    STRING,
    TIMESTAMP,
    as_features,
    feature_type,
    field_names,
    list_item,
    list_of,
    schema,
    struct,
)
from tests.conftest import REPO

EVERY_CONFIG = [(product.name, spec) for product in REGISTRY.values() for spec in product.configs]


@pytest.mark.parametrize("spec", [spec for _, spec in EVERY_CONFIG], ids=[spec.name for _, spec in EVERY_CONFIG])
def test_every_declaration_parses_with_datasets_and_prints_back_the_same(spec):
    parsed = as_features(spec.features)
    assert parsed._to_yaml_list() == spec.features
    assert list(parsed) == field_names(spec.features)


def test_the_helpers_write_what_datasets_writes_for_each_shape():
    from datasets import Features, List, Value

    by_datasets = Features(
        {
            "text": Value("string"),
            "count": Value("int64"),
            "score": Value("float64"),
            "ok": Value("bool"),
            "at": Value("timestamp[s]"),
            "on": Value("date32"),
            "ids": List(Value("int64")),
            "turns": List({"speaker": Value("string"), "when": Value("timestamp[s]")}),
            "groups": List(List(Value("string"))),
            "params": {"day": Value("date32"), "nested": {"n": Value("int64")}},
        }
    )
    declared = schema(
        {
            "text": STRING,
            "count": INT64,
            "score": FLOAT64,
            "ok": BOOL,
            "at": TIMESTAMP,
            "on": DATE,
            "ids": list_of(INT64),
            "turns": list_of(struct({"speaker": STRING, "when": TIMESTAMP})),
            "groups": list_of(list_of(STRING)),
            "params": struct({"day": DATE, "nested": struct({"n": INT64})}),
        }
    )
    assert declared == by_datasets._to_yaml_list()
    assert as_features(declared) == by_datasets


def test_the_form_written_out_by_hand():
    declared = schema({"ids": list_of(INT64), "turns": list_of(struct({"speaker": STRING})), "n": INT64})
    assert declared == [
        {"name": "ids", "list": "int64"},
        {"name": "turns", "list": [{"name": "speaker", "dtype": "string"}]},
        {"name": "n", "dtype": "int64"},
    ]
    assert [list_item(entry) for entry in declared[:2]] == [
        {"dtype": "int64"},
        {"struct": [{"name": "speaker", "dtype": "string"}]},
    ]


def test_a_type_used_twice_dumps_without_yaml_anchors():
    turn = struct({"speaker": STRING, "text": STRING})
    declared = schema({"first": list_of(turn), "second": list_of(turn)})
    dumped = yaml.safe_dump(local_dataset_info({"c": declared}, {}), sort_keys=False)
    assert "&" not in dumped and "*" not in dumped
    assert dumped.count("name: speaker") == 2


def test_the_card_reads_types_and_temporal_fields_from_the_plain_form():
    declared = schema(
        {
            "now": TIMESTAMP,
            "ids": list_of(INT64),
            "turns": list_of(struct({"speaker": STRING, "at": TIMESTAMP})),
            "days": list_of(list_of(DATE)),
            "params": struct({"date": DATE, "month": STRING}),
        }
    )
    assert [feature_type(entry) for entry in declared] == [
        "timestamp[s]",
        "list[int64]",
        "list[{speaker: string, at: timestamp[s]}]",
        "list[list[date32]]",
        "{date: date32, month: string}",
    ]
    assert temporal_fields(declared) == {"datetime": ["now", "turns.at"], "date": ["days", "params.date"]}


def test_local_dataset_info_copies_the_declaration():
    declared = schema({"a": STRING})
    info = local_dataset_info({"c": declared, "absent": None}, {"c": 120})
    assert info == [{"config_name": "c", "features": [{"name": "a", "dtype": "string"}], "download_size": 120}]
    info[0]["features"][0]["dtype"] = "int64"
    assert declared == [{"name": "a", "dtype": "string"}]


def test_gen_run_never_imports_datasets(tmp_path):
    """The quickstart run, in a fresh interpreter: the CLI runs in-process, then the loaded modules are listed."""
    script = (
        "import sys\n"
        "from gen.cli import main\n"
        "sys.argv = ['gen', 'run', sys.argv[1], '--output-dir', sys.argv[2]]\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as stop:\n"
        "    assert not stop.code, stop.code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('datasets', 'pyarrow', 'pandas')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(REPO / "recipes" / "quickstart.yaml"), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "quickstart" / "time_queries" / "test.jsonl").is_file()
    assert done.stdout.strip().splitlines()[-1] == "[]"
