"""Where a run keeps its conversations (gen/sources/store.py): on disk, read back one at a time, the same
conversations whoever reads them, and nothing left in the temporary folder however the run ends."""

from __future__ import annotations

import json
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gen.conversation import Conversation
from gen.errors import GenError
from gen.recipe import TimelineSpec
from gen.sources import locomo
from gen.sources.store import ConversationStore, HeldConversations, SharedConversations, SourcePool, Stored
from gen.timeline import build_timeline
from tests.conftest import REPO, locomo_sample, write_recipe

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"


def fixture_conversations(count: int = 6):
    """Conversations c0…c{count-1} with 1–3 sessions of different lengths, and one with no session."""
    samples = [
        locomo_sample(
            f"c{i}",
            ("Ann", "Bob") if i % 2 else ("Cat", "Dan"),
            [
                (f"1:00 pm on {day} May, 2023", [f"turn {day} of c{i} " * (i + 1), "a reply"])
                for day in range(1, 2 + i % 3)
            ],
        )
        for i in range(count)
    ]
    empty = Conversation("locomo/empty", ("Eve", "Fay"), ())  # e.g. persona pairs have no session
    return [*locomo.parse(samples, "fixture.json"), empty]


def filled_store(conversations) -> ConversationStore:
    store = ConversationStore()
    for conversation in conversations:
        store.add(conversation)
    return store


def read_positions(args: tuple[ConversationStore, list[int]]):
    store, positions = args
    return [store[p] for p in positions]


FORKED_READ = """
import multiprocessing
from tests.test_store import filled_store, fixture_conversations, read_positions

if __name__ == "__main__":
    conversations = fixture_conversations()
    store = filled_store(conversations)
    with multiprocessing.get_context("fork").Pool(2) as pool:  # what --workers N does: fork, then read
        read = pool.map(read_positions, [(store, [5, 1]), (store, [3])])
    print("same" if read == [[conversations[5], conversations[1]], [conversations[3]]] else read)
"""


def read_in_forked_workers() -> str:
    """What workers forked from a fresh interpreter read of its store (forking the test process itself, with the
    threads and connections other tests left, can leave a child waiting on a lock no thread of its own holds)."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", FORKED_READ], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_stored_conversation_reads_back_equal_here_in_a_forked_worker_and_after_pickling():
    conversations = fixture_conversations()
    store = filled_store(conversations)
    assert [store[i] for i in range(len(store))] == conversations
    assert [(s.conversation_id, s.session_count, s.word_count) for s in store.summaries] == [
        (c.conversation_id, len(c.sessions), sum(len(t.text.split()) for s in c.sessions for t in s.turns))
        for c in conversations
    ]
    assert list(Stored(store, [4, 0, 2])) == [conversations[4], conversations[0], conversations[2]]
    assert read_in_forked_workers() == "same"
    elsewhere = pickle.loads(pickle.dumps(store))  # pickled the ordinary way, it carries its bytes
    assert [elsewhere[i] for i in range(len(elsewhere))] == conversations
    buffers: list[pickle.PickleBuffer] = []  # what Ray does: large buffers travel beside the pickle
    small = pickle.dumps(store, protocol=5, buffer_callback=buffers.append)
    assert len(buffers) == 1 and b"turn 1 of c0" in bytes(buffers[0].raw()) and b"turn 1 of c0" not in small
    shared = pickle.loads(small, buffers=buffers)
    assert [shared[i] for i in range(len(shared))] == conversations


def read_shared(pickled: bytes) -> list:
    shared = pickle.loads(pickled)
    return [shared[i] for i in range(len(shared))]


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="sharing a store names its file under /proc (Linux)")
def test_a_shared_store_reads_the_same_conversations_in_a_process_that_did_not_inherit_it():
    """What a local Ray worker does: a fresh interpreter (spawned, not forked) opens the writer's file through
    /proc and reads every conversation back equal, the bytes never sent; the pickle is small."""
    conversations = fixture_conversations()
    store = filled_store(conversations)
    shared = store.shared()
    assert shared is not None
    pickled = pickle.dumps(shared)
    assert b"turn 1 of c0" not in pickled and len(pickled) < 2_000
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        assert pool.apply(read_shared, (pickled,)) == conversations
    assert read_shared(pickle.dumps(shared)) == conversations  # and here, after the first reader opened it


def test_a_shared_store_that_cannot_be_opened_is_one_error_naming_the_executor_option(tmp_path):
    store = filled_store(fixture_conversations(2))
    shared = SharedConversations(str(tmp_path / "gone"), [(0, 1)], store.summaries)
    with pytest.raises(GenError) as raised:
        shared[0]
    assert raised.value.field == "--executor" and "cannot open the run's conversations" in str(raised.value)
    assert "No such file or directory" in str(raised.value) and raised.value.exit_code == 1


def test_padding_from_the_store_is_the_padding_from_conversations_in_memory():
    conversations = fixture_conversations(8)
    store = filled_store(conversations)
    pool = SourcePool(store, range(len(store)))
    assert list(pool.donor_ids()) == sorted(c.conversation_id for c in conversations if c.sessions)
    spec = TimelineSpec.model_validate({"padding": {"mode": "donor", "target_words": 40}})
    for seed in (1, 2, 3):
        for conversation in conversations[:-1]:
            from_store = build_timeline(conversation, spec, pool, seed)
            in_memory = build_timeline(conversation, spec, conversations, seed)
            assert from_store == in_memory
            assert conversation.conversation_id not in from_store.padding_donors
            assert "locomo/empty" not in from_store.padding_donors


def copies_of_the_sample(path: Path, copies: int) -> Path:
    samples = json.loads(SAMPLE.read_text())
    copied = [{**s, "sample_id": f"{s['sample_id']}-{k}"} for k in range(copies) for s in samples]
    path.write_text(json.dumps(copied))
    return path


def test_no_file_is_left_in_the_temporary_folder_after_a_run_or_a_killed_run(tmp_path):
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "copies",
            "seed": 3,
            "sources": [{"format": "locomo", "path": str(copies_of_the_sample(tmp_path / "c.json", 40))}],
            "products": [{"type": "log"}, {"type": "time_queries"}],
        },
    )
    command = [sys.executable, "-m", "gen", "run", str(recipe), "--output-dir", str(tmp_path / "out")]
    env = {**os.environ, "PYTHONPATH": str(REPO), "TMPDIR": str(temporary)}
    finished = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert finished.returncode == 0, finished.stderr
    assert list(temporary.iterdir()) == []

    # again, killed (no chance to clean up) once the run is writing, i.e. after every conversation is stored
    process = subprocess.Popen(
        [*command, "--workers", "2"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # its own process group: the kill reaches the workers too
    )
    out, deadline = tmp_path / "out", time.monotonic() + 120
    while process.poll() is None and time.monotonic() < deadline:
        if out.exists() and any(p.name.startswith(".copies.tmp-") for p in out.iterdir()):
            os.killpg(process.pid, signal.SIGKILL)
            break
        time.sleep(0.01)
    process.wait(timeout=60)
    assert process.returncode == -signal.SIGKILL, "the run ended before it could be killed"
    assert list(temporary.iterdir()) == []


def test_a_shard_reads_exactly_the_conversations_prepared_says_it_reads(tmp_path):
    """`Prepared.reads` tells, from the summaries alone, which conversations a unit reads (its own and its
    padding donors'): a store holding only those builds the same timeline as the whole store."""
    from gen.pipeline.shards import prepare
    from gen.recipe import load_recipe

    recipe = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "donors",
            "seed": 5,
            "sources": [{"format": "locomo", "path": str(copies_of_the_sample(tmp_path / "c.json", 6))}],
            "timeline": {"padding": {"mode": "donor", "target_words": 2500}},
            "products": [{"type": "log"}],
        },
    )
    prepared = prepare(load_recipe(recipe))
    held = prepared.reading(HeldConversations(prepared.conversations.store.summaries))
    store, ids = prepared.conversations.store, [s.conversation_id for s in prepared.conversations.store.summaries]
    several = 0
    for position in range(len(prepared.conversations)):
        timeline = prepared.timeline(position)
        reads = prepared.reads(position)
        assert [ids[at] for at in reads] == [timeline.conversation_id, *timeline.padding_donors]
        several += len(timeline.padding_donors) > 1
        held.conversations.store.hold({at: store.blob(at) for at in reads})
        assert held.timeline(position) == timeline
        held.conversations.store.hold({at: store.blob(at) for at in reads[:-1]})  # one donor short
        with pytest.raises(RuntimeError, match="was not sent with this shard"):
            held.timeline(position)
    assert several  # the target needs more than one donor for some conversations


def test_a_turn_read_back_keeps_every_field_and_its_word_count():
    turn = list(
        locomo.parse([locomo_sample("t", ("Ann", "Bob"), [("1:00 pm on 1 May, 2023", ["three words here"])])], "f")
    )
    [original] = [t for c in turn for s in c.sessions for t in s.turns]
    store = filled_store(turn)
    [again] = [t for s in store[0].sessions for t in s.turns]
    assert (again.speaker, again.text, again.source_turn_id, again.image_caption, again.word_count) == (
        original.speaker,
        "three words here",
        original.source_turn_id,
        None,
        3,
    )
