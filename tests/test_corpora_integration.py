"""Real corpora (GEN_SHARED_DATA): every turn becomes one log record stamped by the rule of docs/timestamps.md.

Expected timestamps are recomputed here with integer arithmetic (words × 46 // 100 for 0.46 s/word) from the
raw files, not from gen's adapters or timeline."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest

from tests.conftest import read_jsonl, require_shared, run_cli, write_recipe

pytestmark = pytest.mark.integration


def run_recipe(tmp_path, capsys, sources: list[dict], timeline: dict | None = None, name: str = "real") -> dict:
    recipe = {"name": name, "seed": 13, "sources": sources, "products": [{"type": "log"}, {"type": "conversations"}]}
    if timeline:
        recipe["timeline"] = timeline
    code, _, err = run_cli(["run", write_recipe(tmp_path / "r.yaml", recipe), "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    folder = tmp_path / "out" / name
    return {
        "log": read_jsonl(folder / "log" / "test.jsonl"),
        "conversations": {c["conversation_id"]: c for c in read_jsonl(folder / "conversations" / "test.jsonl")},
        "folder": folder,
    }


def expected_stamps(start: datetime, texts: list[str]) -> list[str]:
    out, words = [], 0
    for text in texts:
        words += len(text.split())
        out.append((start + timedelta(seconds=words * 46 // 100)).isoformat())
    return out


def by_conversation(rows: list[dict]) -> dict[str, list[dict]]:
    grouped: dict[str, list[dict]] = {}
    for row in rows:
        grouped.setdefault(row["conversation_id"], []).append(row)
    return grouped


def check_padding(rows: list[dict], conversation: dict, last_real: dict, last_real_start: str) -> None:
    padding = [r for r in rows if r["is_padding"]]
    start = max(
        datetime.fromisoformat(last_real_start) + timedelta(minutes=60),
        datetime.fromisoformat(last_real["timestamp"]) + timedelta(minutes=21),
    )
    assert conversation["session_starts"][-1] == start.isoformat()
    assert [r["timestamp"] for r in padding] == expected_stamps(start, [r["text"] for r in padding])
    assert conversation["now"] == (datetime.fromisoformat(rows[-1]["timestamp"]) + timedelta(minutes=50)).isoformat()


def test_locomo10_log(tmp_path, capsys):
    path = require_shared("locomo/locomo10.json")
    out = run_recipe(tmp_path, capsys, [{"format": "locomo", "path": str(path), "longest": 12}])
    raw = json.loads(path.read_text())
    grouped = by_conversation(out["log"])
    assert sum(not r["is_padding"] for r in out["log"]) == 5882
    assert len(grouped) == 10
    for sample in raw:
        conversation = sample["conversation"]
        rows = grouped[f"locomo/{sample['sample_id']}"]
        assert [r["response_index"] for r in rows] == list(range(len(rows)))
        expected, starts = [], []
        for n in range(1, 100):
            if f"session_{n}" not in conversation:
                continue
            start = datetime.strptime(conversation[f"session_{n}_date_time"], "%I:%M %p on %d %B, %Y")
            starts.append(start.isoformat())
            expected += expected_stamps(start, [t["text"] for t in conversation[f"session_{n}"]])
        real = [r for r in rows if not r["is_padding"]]
        assert [r["timestamp"] for r in real] == expected
        words = sum(len(r["text"].split()) for r in rows if r["is_padding"])
        assert words >= 3000
        check_padding(rows, out["conversations"][rows[0]["conversation_id"]], real[-1], starts[-1])
        assert out["conversations"][rows[0]["conversation_id"]]["padding_after_minutes"] == 60


def test_msc_parlai_sample_log(tmp_path, capsys):
    path = require_shared("msc/parlai_msc_v0.1_sample/msc/msc_dialogue/session_3/test.txt")
    out = run_recipe(tmp_path, capsys, [{"format": "msc", "path": str(path)}], {"anchor_start": "2023-01-02T10:00:00"})
    records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    grouped = by_conversation(out["log"])
    assert len(grouped) == len(records) == 20
    units = {"hour": 3600, "hours": 3600, "day": 86400, "days": 86400}
    for record in records:
        rows = grouped[f"msc/{record['metadata']['initial_data_id']}"]
        sessions = [[t["text"] for t in d["dialog"]] for d in record["previous_dialogs"]] + [
            [t["text"] for t in record["dialog"]]
        ]
        start, expected, starts = datetime(2023, 1, 2, 10, 0), [], []
        for k, texts in enumerate(sessions):
            if k:
                gap = record["previous_dialogs"][k - 1]
                start = datetime.fromisoformat(expected[-1]) + timedelta(
                    seconds=gap["time_num"] * units[gap["time_unit"]]
                )
            starts.append(start.isoformat())
            expected += expected_stamps(start, [t.strip() for t in texts])
        real = [r for r in rows if not r["is_padding"]]
        assert [r["timestamp"] for r in real] == expected
        assert {r["speaker"] for r in real} == {"Speaker 1", "Speaker 2"}
        conversation = out["conversations"][rows[0]["conversation_id"]]
        check_padding(rows, conversation, real[-1], starts[-1])
        # the PersonaChat personas the episode began with, as a list like `personas`; nothing left as JSON text
        assert conversation["source_metadata"]["init_personas"] == [
            {"speaker": f"Speaker {n}", "facts": record["init_personas"][n - 1]} for n in (1, 2)
        ]
        assert conversation["source_metadata"]["other_json"] is None


def test_conversation_chronicles_layout_sample_log(tmp_path, capsys):
    path = require_shared("teabag/theanine_sample/sample_dialogue.json")
    out = run_recipe(
        tmp_path,
        capsys,
        [{"format": "cc", "path": str(path), "default_interval": "A few days after"}],
        {"anchor_start": "2023-01-02T10:00:00", "padding": {"mode": "none"}},
    )
    episode = json.loads(path.read_text())[0]
    ordinals = ["first", "second", "third", "fourth", "fifth"]
    start, expected = datetime(2023, 1, 2, 10, 0), []
    for k, ordinal in enumerate(ordinals):
        if k:  # "A few days after" reads as 3 days after the end of the previous session
            start = datetime.fromisoformat(expected[-1]) + timedelta(days=3)
        expected += expected_stamps(start, [t.strip() for t in episode[f"{ordinal}_session_dialogue"]])
    rows = out["log"]
    assert [r["timestamp"] for r in rows] == expected
    assert [r["speaker"] for r in rows] == [s for o in ordinals for s in episode[f"{o}_session_speakers"]]
    conversation = out["conversations"]["cc/msc-episode-30"]
    assert conversation["num_sessions"] == 5
    assert conversation["padding_session"] is None and conversation["padding_after_minutes"] is None
    # this file has CC's session keys but none of relationship / summary / time_interval
    assert "relationship" not in episode and "summary" not in episode and "time_interval" not in episode
    metadata = conversation["source_metadata"]
    assert (metadata["relationship"], metadata["summary"], metadata["other_json"]) == (None, None, None)


def test_msc_persona_pairs_file(tmp_path):
    from gen.recipe import SourceSpec
    from gen.sources import read_source

    path = require_shared("msc/locomo_msc_personas_all.sample.json")
    raw = json.loads(path.read_text())
    conversations = list(read_source(SourceSpec(format="msc_personas", path=path)))
    assert len(conversations) == sum(len(pairs) for pairs in raw.values())
    first = conversations[0]
    assert first.conversation_id == "msc-personas/train-0"
    assert first.personas["Speaker 1"] == raw["train"][0]["Speaker 1"]
