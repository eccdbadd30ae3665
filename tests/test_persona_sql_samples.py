"""persona_sql on the MSC samples in the shared data (GEN_SHARED_DATA; skipped with the reason when absent):
`gen run` against the fake server with scripted labels, then every episode's labels replayed in pair order with
plain sqlite3 from a table seeded here must give every table_after; and `gen plan` over 50 episodes must ask for
one first-round call per pair, counted here straight from the source files.
"""

from __future__ import annotations

import json
import re
import sqlite3
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.conftest import read_jsonl, require_shared, run_cli, write_recipe
from tests.fakes.openai_server import FakeOpenAI

pytestmark = pytest.mark.integration

PERSONAS = "msc/locomo_msc_personas_all.sample.json"
SESSION_3 = "msc/parlai_msc_v0.1_sample/msc/msc_dialogue/session_3/test.txt"
SESSION_2 = "msc/parlai_msc_v0.1_sample/msc/msc_dialogue/session_2/test.txt"
DDL = (ROOT / "templates" / "persona" / "schema.sql.j2").read_text()
DDL = re.sub(r"\{#.*?#\}", "", DDL, flags=re.S)


def sources() -> list[dict]:
    return [
        {"format": "msc_personas", "path": str(require_shared(PERSONAS))},
        {"format": "msc", "path": str(require_shared(SESSION_3))},
        {"format": "msc_self_instruct", "path": str(require_shared(SESSION_2)), "limit": 10},
    ]


def recipe(tmp_path: Path, base_url: str) -> Path:
    return write_recipe(
        tmp_path / "msc-persona.yaml",
        {
            "name": "msc-persona",
            "sources": sources(),
            "llm": {"main": {"model": "fake-model", "base_url": base_url, "api_key_env": None, "max_retries": 1}},
            "products": [{"type": "persona_sql", "max_reject_rate": 1.0}],
        },
    )


def scripted(request) -> str:
    """Appends the line to the speaker's `other` column; every 9th line (by a hash of its text) is answered with
    a DELETE twice, so the replay also crosses rejected pairs."""
    prompt = request.messages[1]["content"]
    speaker, line = re.search(r'^(.*) says: "(.*)"$', prompt, re.M).groups()
    if sum(line.encode()) % 9 == 0:
        return "DELETE FROM persona;"
    quoted = line.replace("'", "''")
    return f"UPDATE persona SET other = COALESCE(other || '; ', '') || '{quoted}' WHERE speaker = '{speaker}';"


def seeded(speakers: list[str]) -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:")
    conn.executescript(DDL)
    for speaker in speakers:
        conn.execute("INSERT INTO persona (speaker) VALUES (?)", (speaker,))
    return conn


def table(conn: sqlite3.Connection) -> list[dict]:
    cursor = conn.execute("SELECT * FROM persona ORDER BY rowid")
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor]


def test_replaying_every_label_in_pair_order_reproduces_every_table(tmp_path, capsys):
    with FakeOpenAI(scripted) as server:
        path = recipe(tmp_path, server.base_url)
        code, _, err = run_cli(
            ["run", path, "--output-dir", tmp_path / "out", "--cache-dir", tmp_path / "cache"], capsys
        )
    assert code == 0, err
    folder = tmp_path / "out" / "msc-persona"
    pairs = read_jsonl(folder / "persona_sql" / "test.jsonl")
    episodes = read_jsonl(folder / "persona_sql_episodes" / "test.jsonl")
    assert len(episodes) == 50
    rejected = 0
    for episode in episodes:
        own = [p for p in pairs if p["episode_id"] == episode["episode_id"]]
        assert [p["pair_index"] for p in own] == list(range(len(episode["lines"]) - 1))
        conn = seeded([persona["speaker"] for persona in episode["personas"]])
        for pair in own:
            assert table(conn) == json.loads(pair["table_before"]), (episode["episode_id"], pair["pair_index"])
            for statement in pair["label_sql"]:
                conn.execute(statement)
            assert table(conn) == json.loads(pair["table_after"]), (episode["episode_id"], pair["pair_index"])
            rejected += pair["label_status"] == "rejected"
        assert table(conn) == json.loads(episode["final_table"])
    rejects = [r for r in read_jsonl(folder / "rejects.jsonl") if r.get("step") == "persona_sql"]
    assert rejected == len(rejects) > 0
    report = json.loads((folder / "run.json").read_text())
    assert report["validation"]["persona_sql"]["passed"]


def first_round_calls_by_hand() -> int:
    """One call per pair: a pseudo-dialogue of n lines has n - 1 pairs, n being both personas' facts."""
    total = 0
    pairs_file = json.loads(require_shared(PERSONAS).read_text())
    for split in pairs_file.values():
        total += sum(len(e["Speaker 1"]) + len(e["Speaker 2"]) - 1 for e in split)
    for relative, limit in ((SESSION_3, None), (SESSION_2, 10)):
        rows = [json.loads(line) for line in require_shared(relative).read_text().splitlines() if line.strip()]
        total += sum(len(r["personas"][0]) + len(r["personas"][1]) - 1 for r in rows[:limit])
    return total


def test_plan_on_50_episodes_asks_one_first_round_call_per_pair(tmp_path, capsys):
    path = recipe(tmp_path, "http://127.0.0.1:9/v1")
    code, out, err = run_cli(["plan", path, "--cache-dir", tmp_path / "cache"], capsys)
    assert code == 0, err
    row = next(line.split() for line in out.splitlines() if line.startswith("persona_sql "))
    items, needed, cached, at_most = (int(v.replace(",", "")) for v in row[1:5])
    expected = first_round_calls_by_hand()
    assert expected == 201 + 179 + 59  # 20 persona pairs, 20 session-3 episodes, 10 session-2 episodes
    assert (items, needed, cached, at_most) == (expected, expected, 0, 2 * expected)
