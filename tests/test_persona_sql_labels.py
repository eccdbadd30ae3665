"""persona_sql: the sandbox, the label checks, and labelling through the real engine and `openai` client against
the fake server, one case per way a label can go wrong; replay of every label on the MSC samples; gen plan's
count of first-round calls.

The episode the fake-server tests use is written out below; its pseudo-dialogue and pairs are worked out by hand:
lines 0 S1 "My name is Ann.", 1 S2 "I live in Oslo.", 2 S1 "I have two cats.", 3 S2 "I love chess.", 4 S1 "I work
as a nurse.", 5 S2 "I am allergic to nuts.", 6 S1 "I grew up in Bergen." — six pairs, targets S2 S1 S2 S1 S2 S1.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from gen.errors import GenError
from gen.llm.config import RunSettings
from gen.products.checks import Checks
from gen.products.persona import labels
from gen.products.persona.dialogue import Line, pairs, pseudo_dialogue
from gen.products.persona.sandbox import Sandbox, SandboxError, TableSchema, seeded_rows, undump
from gen.products.registry import REGISTRY, load
from gen.templating import Templates
from tests.conftest import write_json, write_recipe
from tests.fakes.openai_server import FakeOpenAI
from tests.harness import Harness

S1, S2 = "Speaker 1", "Speaker 2"
EPISODE = {
    S1: ["My name is Ann.", "I have two cats.", "I work as a nurse.", "I grew up in Bergen."],
    S2: ["I live in Oslo.", "I love chess.", "I am allergic to nuts."],
}
# What a careful model writes for each line (the "correct label" of every pair).
GOOD = {
    "I live in Oslo.": "UPDATE persona SET location = 'Oslo' WHERE speaker = 'Speaker 2';",
    "I have two cats.": (
        "UPDATE persona SET pets = COALESCE(pets || '; ', '') || 'two cats' WHERE speaker = 'Speaker 1';"
    ),
    "I love chess.": "UPDATE persona SET hobbies = 'chess' WHERE speaker = 'Speaker 2';",
    "I work as a nurse.": "```sql\nUPDATE persona SET occupation = 'nurse' WHERE speaker = 'Speaker 1';\n```",
    "I am allergic to nuts.": "UPDATE persona SET health = 'allergic to nuts' WHERE speaker = 'Speaker 2';",
    "I grew up in Bergen.": (
        "UPDATE persona SET location = 'grew up in Bergen', other = 'Ann' WHERE speaker = 'Speaker 1';"
    ),
}
CATS = "I have two cats."  # pair 1, target Speaker 1: the pair every case scripts
DDL = (
    "CREATE TABLE persona (speaker TEXT PRIMARY KEY, name TEXT, age TEXT, location TEXT, occupation TEXT, "
    "education TEXT, family TEXT, pets TEXT, hobbies TEXT, likes TEXT, dislikes TEXT, health TEXT, other TEXT);"
)
SCHEMA = TableSchema(DDL, "persona", ("speaker", "pets"), "speaker")


class Model:
    """The fake model: answers each pair from `GOOD`, except the lines in `bad` (line → [first reply, reply to
    the correction round])."""

    def __init__(self, bad: dict[str, list[str]] | None = None) -> None:
        self.bad = bad or {}
        self.corrections: list[str] = []  # the correction messages it was sent

    def __call__(self, request) -> str:
        prompt = request.messages[1]["content"]
        line = re.search(r'^.* says: "(.*)"$', prompt, re.M).group(1)
        if request.is_correction:
            self.corrections.append(request.last_user)
        replies = self.bad.get(line)
        if replies is None:
            return GOOD[line]
        return replies[1 if request.is_correction else 0]


def recipe_for(tmp_path: Path, base_url: str, source: dict | None = None, **options):
    if source is None:
        path = write_json(tmp_path / "personas.json", {"train": [EPISODE]})
        source = {"format": "msc_personas", "path": str(path)}
    data = {
        "name": "persona-test",
        "sources": [source],
        "llm": {"main": {"model": "fake-model", "base_url": base_url, "api_key_env": None, "max_retries": 1}},
        "products": [{"type": "persona_sql", "max_reject_rate": 1.0, **options}],
    }
    return load(write_recipe(tmp_path / "recipe.yaml", data))[0]


def run(tmp_path: Path, model: Model, **options):
    """Label the episode against the fake server: (pair records, episode record, engine rejects, checks)."""
    from gen.llm.engine import Engine

    with FakeOpenAI(model) as server:
        recipe = recipe_for(tmp_path, server.base_url, **options)
        engine = Engine(recipe.llm, RunSettings(cache_dir=tmp_path / "cache", progress="off"))
        harness = Harness.from_recipe(recipe, engine=engine)
        built = harness.build_all("persona_sql")
        engine.close()
    product = harness.product("persona_sql")
    checks = Checks()
    for unit, records in zip(harness.inputs(product), built):
        product.validate(unit, records, checks, harness.ctx)
    assert harness.rejects == []  # failed labels are the engine's rejects, listed once
    return built[0]["persona_sql"], built[0]["persona_sql_episodes"][0], engine.rejects, checks


def table(record_field: str) -> dict[str, dict]:
    return {row["speaker"]: row for row in undump(record_field)}


def assert_rejected_pair(pairs_out, episode, rejects, reason: str, raw: str):
    """Pair 1 rejected as specified: in the rejects with the reason and the raw reply of the correction round,
    its record says so and leaves the table as it was, and the episode went on."""
    assert [r["item_id"] for r in rejects] == ["msc-personas/train-0/pair-001"]
    assert rejects[0]["reason"].startswith(reason) and "after one correction round" in rejects[0]["reason"]
    assert rejects[0]["raw_text"] == raw
    rejected = pairs_out[1]
    assert rejected["label_status"] == "rejected" and rejected["label_sql"] == []
    assert rejected["reject_reason"] == rejects[0]["reason"]
    assert rejected["table_after"] == rejected["table_before"]
    assert [p["label_status"] for p in pairs_out] == ["stored", "rejected", "stored", "stored", "stored", "stored"]
    assert episode["rejected_pairs"] == [1] and episode["pairs"] == 6
    final = table(episode["final_table"])
    assert final[S1]["pets"] is None  # the cats were never stored
    assert final[S1]["occupation"] == "nurse" and final[S2]["health"] == "allergic to nuts"


# --- the pseudo-dialogue --------------------------------------------------------------------------------


def test_pseudo_dialogue_alternates_and_the_longer_persona_runs_on():
    lines = pseudo_dialogue((S1, S2), {S1: ["a1"], S2: ["b1", "b2", "b3"]})
    assert lines == [Line(S1, "a1"), Line(S2, "b1"), Line(S2, "b2"), Line(S2, "b3")]
    assert [(a.text, b.text) for a, b in pairs(lines)] == [("a1", "b1"), ("b1", "b2"), ("b2", "b3")]
    assert pairs(pseudo_dialogue((S1, S2), {S1: ["only"], S2: []})) == []


# --- the sandbox: refused whatever the parser let through ----------------------------------------------


@pytest.mark.parametrize(
    "statement, refused",
    [
        ("DROP TABLE persona", "changing the schema"),
        ("DELETE FROM persona", "DELETE persona"),
        ("ATTACH DATABASE 'x.db' AS x", "ATTACH"),
        ("PRAGMA table_info(persona)", "PRAGMA"),
        ("CREATE TABLE notes (x TEXT)", "changing the schema"),
        ("INSERT INTO persona (speaker) SELECT name FROM sqlite_master", "reading the table sqlite_master"),
        ("UPDATE persona SET pets = load_extension('x')", "the function load_extension()"),
        ("UPDATE persona SET pets = random()", "the function random()"),
        ("UPDATE persona SET pets = date('now')", "the function date()"),
        ("BEGIN", "TRANSACTION"),
    ],
)
def test_the_authorizer_refuses(statement, refused, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Sandbox(SCHEMA_FULL(), seeded_rows(SCHEMA_FULL(), (S1, S2), True), 1.0) as sandbox:
        with pytest.raises(SandboxError) as caught:
            sandbox.execute(statement)
        assert caught.value.code == "not allowed" and refused in caught.value.detail
        assert sandbox.rows() == seeded_rows(SCHEMA_FULL(), (S1, S2), True)
    assert list(tmp_path.iterdir()) == []  # nothing was written to the file system


def SCHEMA_FULL() -> TableSchema:
    return labels.load_schema(DDL, "speaker", "test")


def test_a_statement_past_its_time_limit_is_stopped():
    # with a limit of 0 the first progress callback (every 1000 instructions) stops it; 2^8 joined rows need more
    joins = ", ".join(f"persona p{i}" for i in range(8))
    schema = SCHEMA_FULL()
    with (
        Sandbox(schema, seeded_rows(schema, (S1, S2), True), 0.0) as sandbox,
        pytest.raises(SandboxError, match="time limit"),
    ):
        sandbox.execute(f"UPDATE persona SET pets = (SELECT count(*) FROM {joins}) WHERE speaker = 'Speaker 1'")


def test_a_reply_sqlglot_cannot_even_tokenize_is_a_syntax_error():
    # what SmolLM2 once wrote: an unterminated string, which sqlglot's tokenizer (not its parser) refuses
    with pytest.raises(labels.LabelError) as caught:
        labels.store("UPDATE persona SET likes = 'hiking WHERE speaker = 'Speaker 1", SCHEMA_FULL(), [], S1, 1.0, 6)
    assert caught.value.code == "syntax error"


def test_the_schema_must_be_one_create_table_with_the_speaker_column():
    with pytest.raises(GenError, match="no column 'who'"):
        labels.load_schema(DDL, "who", "s.sql")
    with pytest.raises(GenError, match="exactly one CREATE TABLE"):
        labels.load_schema(DDL + " DROP TABLE x;", "speaker", "s.sql")


# --- labelling against the fake server, one case each ---------------------------------------------------


def test_a_correct_label_is_stored_and_the_table_carries_on(tmp_path):
    model = Model()
    pairs_out, episode, rejects, checks = run(tmp_path, model)

    assert checks.passed, checks.report()
    assert rejects == [] and model.corrections == []
    assert [p["target_speaker"] for p in pairs_out] == [S2, S1, S2, S1, S2, S1]
    assert pairs_out[1]["turns"] == [{"speaker": S2, "text": "I live in Oslo."}, {"speaker": S1, "text": CATS}]
    assert pairs_out[1]["label_sql"] == [
        "UPDATE persona SET pets = COALESCE(pets || '; ', '') || 'two cats' WHERE speaker = 'Speaker 1'"
    ]
    assert table(pairs_out[1]["table_before"])[S2]["location"] == "Oslo"
    after = table(pairs_out[1]["table_after"])
    assert after[S1]["pets"] == "two cats" and after[S2]["location"] == "Oslo"
    final = table(episode["final_table"])
    assert final[S1] == {
        **{column: None for column in final[S1]},
        "speaker": S1,
        "pets": "two cats",
        "occupation": "nurse",
        "location": "grew up in Bergen",
        "other": "Ann",
    }
    assert final[S2]["location"] == "Oslo" and final[S2]["hobbies"] == "chess"
    assert episode["rejected_pairs"] == [] and episode["retrieval_status"] == "none"
    assert [line["text"] for line in episode["lines"]] == [
        "My name is Ann.",
        "I live in Oslo.",
        CATS,
        "I love chess.",
        "I work as a nurse.",
        "I am allergic to nuts.",
        "I grew up in Bergen.",
    ]


def test_a_label_for_the_wrong_speaker_gets_a_correction_round_and_is_stored_once_corrected(tmp_path):
    wrong = "UPDATE persona SET pets = 'two cats' WHERE speaker = 'Speaker 2';"
    model = Model({CATS: [wrong, GOOD[CATS]]})
    pairs_out, _, rejects, checks = run(tmp_path, model)

    assert checks.passed, checks.report()
    assert len(model.corrections) == 1
    assert "wrong speaker: Speaker 2's row changed" in model.corrections[0]
    assert rejects == []
    assert pairs_out[1]["label_status"] == "stored"
    assert table(pairs_out[1]["table_after"])[S1]["pets"] == "two cats"
    assert table(pairs_out[1]["table_after"])[S2]["pets"] is None


def test_a_label_for_the_wrong_speaker_twice_is_rejected(tmp_path):
    wrong = "UPDATE persona SET pets = 'two cats' WHERE speaker = 'Speaker 2';"
    pairs_out, episode, rejects, checks = run(tmp_path, Model({CATS: [wrong, wrong]}))

    assert checks.passed, checks.report()
    assert_rejected_pair(pairs_out, episode, rejects, "wrong speaker", wrong)


def test_a_label_that_drops_the_table_is_rejected_and_the_episode_goes_on(tmp_path):
    drop = "DROP TABLE persona;"
    model = Model({CATS: [drop, drop]})
    pairs_out, episode, rejects, checks = run(tmp_path, model)

    assert checks.passed, checks.report()
    assert "not allowed: statement 1 is DROP" in model.corrections[0]
    assert_rejected_pair(pairs_out, episode, rejects, "not allowed", drop)


def test_a_label_with_a_syntax_error_is_rejected(tmp_path):
    broken = "UPDATE persona SET pets = WHERE speaker = 'Speaker 1';"
    broken_again = "UPDATE persona pets = 'two cats' WHERE speaker = 'Speaker 1';"
    model = Model({CATS: [broken, broken_again]})
    pairs_out, episode, rejects, checks = run(tmp_path, model)

    assert checks.passed, checks.report()
    assert model.corrections[0].startswith("Your previous reply could not be used: syntax error")
    assert_rejected_pair(pairs_out, episode, rejects, "syntax error", broken_again)


def test_a_label_that_writes_nothing_is_rejected(tmp_path):
    idle = "UPDATE persona SET pets = pets WHERE speaker = 'Speaker 1';"
    model = Model({CATS: [idle, idle]})
    pairs_out, episode, rejects, checks = run(tmp_path, model)

    assert checks.passed, checks.report()
    assert "nothing stored: the row of Speaker 1 did not change" in model.corrections[0]
    assert_rejected_pair(pairs_out, episode, rejects, "nothing stored", idle)
    # a SELECT writes nothing either: it is refused before it runs
    looks = "SELECT * FROM persona;"
    pairs_out, episode, rejects, checks = run(tmp_path / "again", Model({CATS: [looks, looks]}))
    assert checks.passed, checks.report()
    assert_rejected_pair(pairs_out, episode, rejects, "not allowed: statement 1 is SELECT", looks)


def test_a_label_that_tries_attach_is_rejected_and_no_file_appears(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    attach = "ATTACH DATABASE 'stolen.db' AS stolen; " + GOOD[CATS]
    pairs_out, episode, rejects, checks = run(tmp_path / "run", Model({CATS: [attach, attach]}))

    assert checks.passed, checks.report()
    assert_rejected_pair(pairs_out, episode, rejects, "not allowed", attach)
    assert not list(tmp_path.rglob("stolen.db"))


def test_the_validator_catches_a_tampered_table(tmp_path):
    pairs_out, episode, _, checks = run(tmp_path, Model())
    assert checks.passed
    tampered = [dict(p) for p in pairs_out]
    after = undump(tampered[2]["table_after"])
    after[0]["pets"] = "a dog"  # Speaker 1's row changed by a label meant for Speaker 2
    tampered[2]["table_after"] = json.dumps(after)
    product_cls = REGISTRY["persona_sql"]
    recipe = recipe_for(tmp_path / "v", "http://127.0.0.1:9/v1")
    harness = Harness.from_recipe(recipe)
    product = product_cls(product_cls.Options.model_validate({"max_reject_rate": 1.0}))
    checks = Checks()
    unit = harness.units[0]
    product.validate(unit, {"persona_sql": tampered, "persona_sql_episodes": [episode]}, checks, harness.ctx)
    failed = {name for name, result in checks.report().items() if result["failed"]}
    assert failed == {"replaying the label gives table_after", "table_before is the previous table_after"}


def test_retrieval_labels_for_self_instruct_episodes(tmp_path):
    record = {
        "personas": [EPISODE[S1], EPISODE[S2]],
        "dialog": [{"id": S1, "text": "Hi."}, {"id": S2, "text": "Hello."}],
        "metadata": {"initial_data_id": "si_0", "session_id": 4},
        "self_instruct": {"B": "Where does my friend live?", "A": "Oslo."},
    }
    path = tmp_path / "si.jsonl"
    path.write_text(json.dumps(record) + "\n")
    select = "SELECT location FROM persona WHERE speaker = 'Speaker 2';"

    def model(request):
        if "Question:" in request.messages[1]["content"]:
            return select
        return Model()(request)

    from gen.llm.engine import Engine

    with FakeOpenAI(model) as server:
        recipe = recipe_for(
            tmp_path,
            server.base_url,
            source={"format": "msc_self_instruct", "path": str(path)},
            retrieval_labels=True,
            retrieval_min_fields=1,
            retrieval_max_fields=2,
        )
        engine = Engine(recipe.llm, RunSettings(cache_dir=tmp_path / "cache", progress="off"))
        harness = Harness.from_recipe(recipe, engine=engine)
        built = harness.build_all("persona_sql")
        engine.close()
    episode = built[0]["persona_sql_episodes"][0]
    assert episode["memory_question"] == "Where does my friend live?" and episode["gold_answer"] == "Oslo."
    assert episode["retrieval_status"] == "stored"
    assert episode["retrieval_sql"] == "SELECT location FROM persona WHERE speaker = 'Speaker 2'"
    assert json.loads(episode["retrieved"]) == {"columns": ["location"], "rows": [["Oslo"]]}
    assert episode["retrieved_fields"] == 1 and episode["retrieval_in_target"] is True
    assert (episode["retrieval_target_min"], episode["retrieval_target_max"]) == (1, 2)
    product = harness.product("persona_sql")
    checks = Checks()
    product.validate(harness.inputs(product)[0], built[0], checks, harness.ctx)
    assert checks.passed, checks.report()


def test_options_are_checked_at_load(tmp_path):
    with pytest.raises(GenError, match="unknown_key"):
        recipe_for(tmp_path, "http://127.0.0.1:9/v1", unknown_key=1)
    with pytest.raises(GenError, match="retrieval_min_fields"):
        recipe_for(tmp_path, "http://127.0.0.1:9/v1", retrieval_min_fields=5, retrieval_max_fields=2)
    (tmp_path / "t").mkdir()
    (tmp_path / "t" / "mine.sql.j2").write_text("CREATE TABLE facts (who TEXT, fact TEXT);")
    with pytest.raises(GenError, match="no column 'speaker'"):
        load(
            write_recipe(
                tmp_path / "r2.yaml",
                {
                    "name": "x",
                    "templates_dir": str(tmp_path / "t"),
                    "sources": [{"format": "msc_personas", "path": str(write_json(tmp_path / "p.json", []))}],
                    "llm": {"main": {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": None}},
                    "products": [{"type": "persona_sql", "schema": "mine.sql.j2"}],
                },
            )
        )


def test_a_source_without_personas_is_one_clear_error(tmp_path):
    sample = ROOT / "gen" / "data" / "sample_locomo.json"
    recipe = recipe_for(tmp_path, "http://127.0.0.1:9/v1", source={"format": "locomo", "path": str(sample)})
    harness = Harness.from_recipe(recipe)
    from gen.products.persona.steps import episode_of, load_schema

    product = harness.product("persona_sql")
    with pytest.raises(GenError) as caught:
        episode_of(harness.units[0], product.options, load_schema(product.options, Templates()))
    assert caught.value.field == "personas" and caught.value.record == "locomo/sample-1"
    assert "sample_locomo.json" in str(caught.value.file)


# --- size and time: a label cannot build a huge value ---------------------------------------------------------

GROW = "UPDATE persona SET pets = replace(printf('%.*c', 90000, 'x'), 'x', 'xx') WHERE speaker = 'Speaker 1';"
BOMB = "UPDATE persona SET pets = printf('%.*c', 50000000, 'x') WHERE speaker = 'Speaker 1';"


def test_a_value_past_the_size_limit_fails_inside_sqlite():
    """90,000 characters doubled is 180,000, past the 100,000-byte limit on any value: SQLite refuses to build it
    (instead of allocating it, as it would a 50,000,000-character printf) and the reason says which limit."""
    schema = SCHEMA_FULL()
    with Sandbox(schema, seeded_rows(schema, (S1, S2), True), 1.0) as sandbox:
        with pytest.raises(SandboxError, match=r"failed: it builds a value or is longer than the limit \(100,000"):
            sandbox.execute(GROW)
        with pytest.raises(SandboxError, match="longer than the limit"):
            sandbox.execute("UPDATE persona SET pets = '" + "y" * 100_001 + "' WHERE speaker = 'Speaker 1';")
        sandbox.execute(BOMB)  # SQLite's printf gives NULL past the limit: nothing big is ever held
        assert max(len(str(value)) for row in sandbox.rows() for value in row.values()) < 100


@pytest.mark.parametrize(("reply", "reason"), [(GROW, "failed"), (BOMB, "nothing stored")])
def test_a_label_that_builds_a_huge_value_is_rejected(tmp_path, reply, reason):
    model = Model({CATS: [reply, reply]})
    pairs_out, episode, rejects, checks = run(tmp_path, model)
    assert checks.passed, checks.report()
    assert_rejected_pair(pairs_out, episode, rejects, reason, reply)
    assert all(len(record["table_after"]) < 10_000 for record in pairs_out)


# --- hostile replies: every one ends as a record or a reject with the reason ----------------------------------

NESTED = "UPDATE persona SET pets = " + "(" * 5000 + "'x'" + ")" * 5000 + " WHERE speaker = 'Speaker 1';"
HOSTILE_REPLIES = [
    (NESTED, "too deeply nested"),
    ("UPDATE persona SET pets = '" + "y" * 10_000_000 + "' WHERE speaker = 'Speaker 1';", "too long"),
    ("UPDATE persona SET pets = 'a\x00b' WHERE speaker = 'Speaker 1';", ""),
    ("UPDATE persona SET pets = '\udcff' WHERE speaker = 'Speaker 1';", ""),  # a lone surrogate: invalid UTF-8
]


@pytest.mark.parametrize(("reply", "reason"), HOSTILE_REPLIES, ids=["nesting", "10 MB", "NUL", "bad UTF-8"])
def test_a_hostile_sql_reply_is_a_label_error_never_a_crash(reply, reason):
    with pytest.raises(labels.LabelError) as error:
        labels.store(reply, SCHEMA_FULL(), seeded_rows(SCHEMA_FULL(), (S1, S2), True), S1, 1.0, 5)
    assert str(error.value).startswith(reason)


def test_a_cached_deeply_nested_reply_is_rejected_on_every_run(tmp_path):
    """The reply is cached, so a crash would repeat on every re-run: it is a reject, the second run too."""
    for _ in range(2):
        model = Model({CATS: [NESTED, NESTED]})
        pairs_out, episode, rejects, checks = run(tmp_path, model)
        assert checks.passed, checks.report()
        assert_rejected_pair(pairs_out, episode, rejects, "too deeply nested", NESTED)
