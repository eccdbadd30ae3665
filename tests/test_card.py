"""The dataset card a Hub reader expects: header fields, the config the viewer opens on, sources' papers and
licenses, an example record per config, how indices count, Uses and Limitations."""

from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from gen.export.card import render_card, shorten
from gen.export.card_header import merge_metadata, split_card
from gen.pipeline.options import RunOptions
from gen.pipeline.runner import run
from gen.recipe import load_recipe
from tests.conftest import REPO, read_jsonl


@pytest.fixture(scope="module")
def quickstart(tmp_path_factory) -> Path:
    return run(load_recipe(REPO / "recipes" / "quickstart.yaml"), RunOptions(output_dir=tmp_path_factory.mktemp("out")))


@pytest.fixture(scope="module")
def card(quickstart) -> tuple[dict, str]:
    return split_card((quickstart / "README.md").read_text())


def source(fmt: str, name: str) -> dict:
    return {"format": fmt, "origin": f"/data/{name}", "origin_name": name, "loaded": 1, "selected": 1}


def report_for(sources: list[dict], configs: list[str]) -> dict:
    return {
        "recipe": {"name": "mix", "fingerprint": "f" * 64, "seed": 1},
        "packages": {"gen": "0.1.0"},
        "split": "test",
        "sources": sources,
        "configs": {name: {"records": 1, "path": f"{name}/test.jsonl", "description": name} for name in configs},
        "validation": {},
    }


def example_of(body: str, config: str) -> dict:
    """The JSON block of a config's section."""
    section = body.split(f"### `{config}`", 1)[1].split("\n### ", 1)[0]
    return json.loads(section.split("```json\n", 1)[1].split("\n```", 1)[0])


def section(body: str, title: str) -> str:
    return body.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]


# --- header ---------------------------------------------------------------------------------------


def test_the_viewer_and_load_dataset_open_on_the_time_queries(quickstart, card, monkeypatch, tmp_path):
    from datasets import load_dataset

    header, _ = card
    defaults = [entry["config_name"] for entry in header["configs"] if entry.get("default")]
    assert defaults == ["time_queries"]
    assert header["configs"][0]["config_name"] == "log"  # the order stays the recipe's
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    loaded = load_dataset(str(quickstart), split="test", cache_dir=str(tmp_path))  # no config name
    assert (
        loaded.to_list()[0]["question_id"] == read_jsonl(quickstart / "time_queries" / "test.jsonl")[0]["question_id"]
    )
    assert len(loaded) == json.loads((quickstart / "run.json").read_text())["configs"]["time_queries"]["records"]


@pytest.mark.parametrize(
    ("configs", "default"),
    [
        (["log", "conversations"], "log"),  # no question config: the first one
        (["log", "ambiguous_time_queries", "time_content_questions"], "time_content_questions"),
        (["persona_sql", "persona_sql_episodes"], "persona_sql_episodes"),
    ],
)
def test_the_default_config_is_the_most_question_like_one(configs, default):
    header, body = split_card(render_card(report_for([source("locomo", "locomo10.json")], configs)))
    assert [entry["config_name"] for entry in header["configs"] if entry.get("default")] == [default]
    assert f"Without a config name, `load_dataset` gives `{default}`" in body


def test_the_header_says_how_the_data_was_made_and_what_it_is_for(card):
    header, _ = card
    assert header["pretty_name"] == "quickstart"
    assert header["annotations_creators"] == ["machine-generated"]
    assert header["source_datasets"] == ["original"]  # gen's own sample, not a corpus
    assert header["task_categories"] == ["question-answering", "text-retrieval"]
    assert header["task_ids"] == ["closed-domain-qa", "utterance-retrieval"]
    assert header["license"] == "mit"


def test_each_source_brings_its_papers_license_and_source_dataset():
    sources = [source("locomo", "locomo10.json"), source("cc", "test.jsonl"), source("msc", "test.txt")]
    header, body = split_card(render_card(report_for(sources, ["log", "time_queries"])))
    assert header["source_datasets"] == [
        "extended|other-locomo",
        "extended|jihyoung/ConversationChronicles",
        "extended|other-msc",
    ]
    assert header["license"] == ["cc-by-nc-4.0", "cc-by-4.0", "unknown"]
    sources_text = section(body, "How it was made").split("### Recipe")[0]
    entries = {
        name: next(entry for entry in sources_text.split("\n- ") if name in entry)
        for name in ("LoCoMo", "Conversation Chronicles", "Multi-Session Chat")
    }
    assert "[arXiv:2402.17753](https://arxiv.org/abs/2402.17753)" in entries["LoCoMo"]
    assert "CC BY-NC 4.0" in entries["LoCoMo"]
    assert "[arXiv:2310.13420](https://arxiv.org/abs/2310.13420)" in entries["Conversation Chronicles"]
    assert "CC BY 4.0" in entries["Conversation Chronicles"]
    assert "[arXiv:2107.07567](https://arxiv.org/abs/2107.07567)" in entries["Multi-Session Chat"]
    assert "ParlAI code is MIT" in entries["Multi-Session Chat"]
    assert "[arXiv:2406.00057](https://arxiv.org/abs/2406.00057)" in body  # the method paper of time_queries
    limitations = section(body, "Limitations")
    assert "LoCoMo: written by two language-model agents" in limitations
    assert "Non-commercial" in limitations  # LoCoMo is CC BY-NC
    assert "Non-commercial" not in section(
        split_card(render_card(report_for([source("cc", "test.jsonl")], ["log"])))[1], "Limitations"
    )


def test_an_older_card_s_data_keys_never_survive_but_the_publisher_s_statements_do():
    generated = {"annotations_creators": ["machine-generated"], "source_datasets": ["original"], "configs": [1]}
    existing = {
        "annotations_creators": ["expert-generated"],
        "source_datasets": ["extended|other-msc"],  # from a run of another corpus
        "dataset_info": [{"config_name": "gone"}],
        "tags": ["mine"],
    }
    merged = merge_metadata(existing, generated)
    assert merged == {
        "annotations_creators": ["expert-generated"],
        "source_datasets": ["original"],
        "tags": ["mine"],
        "configs": [1],
    }


# --- body -----------------------------------------------------------------------------------------


def test_every_config_shows_its_first_record_shortened(quickstart, card):
    _, body = card
    configs = json.loads((quickstart / "run.json").read_text())["configs"]
    for name, info in configs.items():
        first = read_jsonl(quickstart / info["path"])[0]
        shown = example_of(body, name)
        assert list(shown) == list(first), name
        for key, value in first.items():
            if isinstance(value, list) and len(value) > 4:
                assert shown[key] == [*value[:4], f"\u2026 {len(value) - 4} more"], (name, key)
            elif isinstance(value, str) and len(value) > 200:
                assert shown[key] == value[:199].rstrip() + "\u2026", (name, key)
            elif not isinstance(value, (list, dict)):
                assert shown[key] == value, (name, key)
    log_first = read_jsonl(quickstart / "log" / "test.jsonl")[0]
    assert example_of(body, "log") == log_first  # nothing to cut: shown whole
    queries = read_jsonl(quickstart / "time_queries" / "test.jsonl")[0]
    assert len(queries["relevant_response_indices"]) > 4  # so the quickstart does exercise the cut
    assert "shortened: a list shows its first 4 items" in body.split("### `time_queries`")[1].split("### ")[0]


def test_shorten_cuts_lists_and_texts_at_any_depth():
    long_text = "word " * 60  # 300 characters
    value = {"a": [1, 2, 3, 4, 5, 6], "b": {"c": long_text, "d": [[1, 2, 3, 4, 5]]}, "e": "short"}
    short, cut = shorten(value)
    assert cut is True
    assert short["a"] == [1, 2, 3, 4, "\u2026 2 more"]
    assert short["b"]["c"] == long_text[:199].rstrip() + "\u2026" and len(short["b"]["c"]) == 200
    assert short["b"]["d"] == [[1, 2, 3, 4, "\u2026 1 more"]]
    assert short["e"] == "short"
    assert shorten({"a": [1, 2, 3, 4], "t": "x" * 200}) == ({"a": [1, 2, 3, 4], "t": "x" * 200}, False)


def counting_rows(body: str) -> dict[str, str]:
    """field name → first value, from the Counting table."""
    rows = {}
    for line in section(body, "Counting").splitlines():
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            for name in re.findall(r"`([^`]+)`", cells[0]):
                rows[name] = cells[1]
    return rows


def test_the_counting_table_is_true_of_the_data(quickstart, card):
    """Each index the card says starts at 0 or 1 does, in the quickstart's records."""
    _, body = card
    rows = counting_rows(body)
    assert rows["response_index"] == "0" and rows["turn_index"] == "0" and rows["session_index"] == "1"
    assert rows["current_session"] == "1" and rows["params.session"] == "1" and rows["params.days_ago"] == "0"
    log = read_jsonl(quickstart / "log" / "test.jsonl")
    by_conversation, by_session = defaultdict(list), defaultdict(list)
    for row in log:
        by_conversation[row["conversation_id"]].append(row)
        by_session[row["conversation_id"], row["session_index"]].append(row["turn_index"])
    for rows_ in by_conversation.values():
        assert [r["response_index"] for r in rows_] == list(range(len(rows_)))
        assert min(r["session_index"] for r in rows_) == 1
    assert all(turns == list(range(len(turns))) for turns in by_session.values())
    for record in read_jsonl(quickstart / "conversations" / "test.jsonl"):
        sessions = by_conversation[record["conversation_id"]]
        firsts = {}
        for row in sessions:
            firsts.setdefault(row["session_index"], row["timestamp"])
        starts = record["session_starts"]  # position k - 1 holds session k's start: at or before its first response,
        for k, first in firsts.items():  # and after the previous session's first response
            assert starts[k - 1] <= first and (k == 1 or firsts[k - 1] < starts[k - 1]), (record["conversation_id"], k)
        assert record["current_session"] == max(r["session_index"] for r in sessions) + 1
    queries = read_jsonl(quickstart / "time_queries" / "test.jsonl")
    for query in queries:
        if "sessions_ago" in query["params"]:
            assert query["params"]["sessions_ago"] == query["current_session"] - query["params"]["session"]


def test_uses_and_limitations_follow_the_configs(card):
    _, body = card
    uses, limitations = section(body, "Uses"), section(body, "Limitations")
    assert "`time_queries` or `ambiguous_time_queries`" in uses and "Query rewriting" in uses
    assert "storage model" not in uses  # no persona_sql in the quickstart
    assert "padding session is borrowed" in limitations  # the quickstart pads with a donor
    assert "Time questions are templated" in limitations and "written by a language model" not in limitations
    _, body = split_card(render_card(report_for([source("msc_personas", "p.json")], ["persona_sql"])))
    assert "storage model" in section(body, "Uses") and "SQL labels were written" in section(body, "Limitations")
    assert "## Counting" in body and "`pair_index`" in section(body, "Counting")
    assert "`response_index`" not in section(body, "Counting")


def test_the_loading_section_names_the_typed_fields(card):
    _, body = card
    loading = section(body, "Loading")
    assert "`dataset_info` in this card's header declares every config's features" in loading
    assert "`timestamp`" in loading.split("load as `datetime.datetime`")[0]
    assert "`today`" in loading.split("load as `datetime.date`")[0].split("Dates (")[1]


def test_a_counterfactual_build_gets_its_own_uses_counting_and_limitations():
    _, body = split_card(render_card(report_for([source("cc", "test.jsonl")], ["teabag", "teabag_summaries"])))
    assert "false premise" in section(body, "Uses")
    counting = counting_rows(body)
    assert counting["session"] == "1" and counting["question_sample"] == "0" and "response_index" not in counting
    limitations = section(body, "Limitations")
    assert "Counterfactual questions, their answers and the new session" in limitations
    assert "clock is simulated" not in limitations and "Scores depend on `now`" not in limitations
    assert "Conversation Chronicles: written by a language model" in limitations


def test_the_card_names_no_folder_and_no_local_server_of_this_machine(quickstart, tmp_path):
    """An absolute output folder is named by its own name in the snippets, and an endpoint on a loopback address
    is "a local endpoint" in "Models and prompts", as run.json has it."""
    import json

    folder = tmp_path / "copy"
    shutil.copytree(quickstart, folder)
    recipe = (folder / "recipe.yaml").read_text()
    (folder / "recipe.yaml").write_text(
        recipe + "llm:\n  main: {model: tiny, base_url: 'http://127.0.0.1:8123/v1', api_key_env: null}\n"
    )
    report = json.loads((folder / "run.json").read_text())
    card = render_card(report, folder=folder, target=tmp_path / "deep" / "quickstart")
    assert str(tmp_path) not in card and 'load_dataset("quickstart", "log"' in card
    assert "127.0.0.1" not in card and "model `tiny` at `a local endpoint`" in card
