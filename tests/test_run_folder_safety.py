"""What a run never loses: gen replaces only its own folders, never a recipe's inputs, recovers from a crash
between its two renames, removes its dead temporary folders, and every stop (reject limit, Ctrl-C, error)
keeps the records, rejects and a report. Also: what the run folder tells its users (portable recipe, no
machine paths, the real output folder in the card, every asked test in the summary)."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from gen.folders import recover_and_clean
from tests.conftest import REPO, gen_subprocess, read_jsonl, tcq_recipe, write_json, write_recipe
from tests.fakes.openai_server import FakeOpenAI

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"


def log_recipe(path: Path, name: str, source: Path, **extra) -> Path:
    return write_recipe(
        path,
        {
            "name": name,
            "seed": 1,
            "sources": [{"format": "locomo", "path": str(source)}],
            "timeline": {"padding": {"mode": "none"}},
            "products": [{"type": "log"}],
            **extra,
        },
    )


def tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def sample_turns() -> int:
    """Turns in the bundled sample, counted from the file itself."""
    return sum(
        len(turns)
        for entry in json.loads(SAMPLE.read_text())
        for key, turns in entry["conversation"].items()
        if key.startswith("session_") and isinstance(turns, list)
    )


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# --- 1. only gen's own folders are replaced, and never a recipe's inputs -----------------------------


def test_a_recipe_named_like_its_corpus_folder_leaves_the_corpus_alone(tmp_path):
    corpus = tmp_path / "data" / "corpus"
    corpus.mkdir(parents=True)
    shutil.copy(SAMPLE, corpus / "sample.json")
    before = tree(corpus)
    recipe = log_recipe(tmp_path / "r.yaml", "corpus", corpus / "sample.json")
    done = gen_subprocess("run", recipe, "--output-dir", tmp_path / "data")
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert str(corpus) in done.stderr and "input" in done.stderr
    assert tree(corpus) == before


def test_a_recipe_named_like_its_source_file_leaves_the_file_alone(tmp_path):
    source = tmp_path / "out" / "talks"
    source.parent.mkdir()
    shutil.copy(SAMPLE, source)
    recipe = log_recipe(tmp_path / "r.yaml", "talks", source)
    done = gen_subprocess("run", recipe, "--output-dir", tmp_path / "out")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert source.read_bytes() == SAMPLE.read_bytes()


def test_a_folder_gen_did_not_write_is_refused_and_kept(tmp_path):
    mine = tmp_path / "out" / "notes"
    mine.mkdir(parents=True)
    (mine / "thesis.txt").write_text("years of work")
    recipe = log_recipe(tmp_path / "r.yaml", "notes", SAMPLE)
    done = gen_subprocess("run", recipe, "--output-dir", tmp_path / "out")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "gen did not write" in done.stderr and str(mine) in done.stderr
    assert tree(mine) == {"thesis.txt": b"years of work"}


def test_a_folder_gen_wrote_is_replaced(tmp_path):
    recipe = log_recipe(tmp_path / "r.yaml", "mine", SAMPLE)
    assert gen_subprocess("run", recipe, "--output-dir", tmp_path / "out").returncode == 0
    (tmp_path / "out" / "mine" / "log" / "test.jsonl").write_text("stale\n")
    again = gen_subprocess("run", recipe, "--output-dir", tmp_path / "out")
    assert again.returncode == 0, again.stderr
    assert len(read_jsonl(tmp_path / "out" / "mine" / "log" / "test.jsonl")) == sample_turns()


# --- 2 and 3. a crash at any instant of the replace; dead temporary folders ---------------------------


def gen_marker(path: Path, files: list[str] | None) -> None:
    """gen's marker as gen writes it: files None while a folder is being written, the list once complete."""
    write_json(path / ".gen-files.json", {"written_by": "gen", "files": files})


def gen_folder(path: Path, label: str) -> Path:
    """A complete run folder as gen leaves one (run.json with gen's keys, a card, the marker listing them),
    tagged with `label`."""
    write_json(path / "run.json", {"recipe": {"name": label}, "packages": {}, "configs": {}})
    (path / "README.md").write_text(label)
    gen_marker(path, ["README.md", "run.json"])
    return path


def partial_folder(path: Path) -> Path:
    """A folder gen was still writing when its process died: the marker without a file list, a config folder."""
    (path / "log").mkdir(parents=True)
    gen_marker(path, None)
    return path


@pytest.mark.parametrize(
    ("instant", "expected"),
    [
        ("before the first rename", "old"),  # final = old, the new folder still temporary
        ("between the renames", "new"),  # final gone: old moved aside, new complete but not in place
        ("after the second rename", "new"),  # final = new, the old one not yet removed
    ],
)
def test_a_crash_at_any_instant_of_the_replace_leaves_a_complete_folder(tmp_path, instant, expected, caplog):
    pid, final = dead_pid(), tmp_path / "run"
    old, new = tmp_path / f".run.old-{pid}", tmp_path / f".run.tmp-{pid}"
    if instant == "before the first rename":
        gen_folder(final, "old"), gen_folder(new, "new")
    elif instant == "between the renames":
        gen_folder(old, "old"), gen_folder(new, "new")
    else:
        gen_folder(old, "old"), gen_folder(final, "new")
    with caplog.at_level(logging.INFO, logger="gen"):
        recover_and_clean(tmp_path)
    said = [record.getMessage() for record in caplog.records]
    assert (final / "README.md").read_text() == expected
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert any(line.startswith("recovered") for line in said) == (instant == "between the renames")
    # the one folder left beside it is gen's, and its removal is said
    assert sum(line.startswith("removed") for line in said) == 1


def test_a_crash_before_the_new_folder_was_complete_restores_the_old_one(tmp_path):
    pid, final = dead_pid(), tmp_path / "run"
    gen_folder(tmp_path / f".run.old-{pid}", "old")
    partial_folder(tmp_path / f".run.tmp-{pid}")
    recover_and_clean(tmp_path)
    assert (final / "README.md").read_text() == "old"


def test_the_next_run_recovers_and_says_so_and_removes_dead_temporary_folders(tmp_path):
    out, pid = tmp_path / "out", dead_pid()
    gen_folder(out / f".mine.old-{pid}", "old")
    partial_folder(out / f".other.tmp-{pid}")  # a dead run of another recipe
    alive = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (out / f".busy.tmp-{alive.pid}").mkdir()  # a run still going: left alone
        recipe = log_recipe(tmp_path / "r.yaml", "mine", SAMPLE)
        done = gen_subprocess("run", recipe, "--output-dir", out)
    finally:
        alive.kill()
        alive.wait()
    assert done.returncode == 0, done.stderr
    assert f"recovered {out / 'mine'}" in done.stderr
    assert f"removed {out / f'.other.tmp-{pid}'}, left by an earlier gen process that is gone" in done.stderr
    assert sorted(p.name for p in out.iterdir()) == [f".busy.tmp-{alive.pid}", "mine"]


def test_folders_named_like_gen_s_temporary_ones_but_not_gen_s_are_never_swept(tmp_path):
    """A user's own `.X.tmp-<pid>` / `.X.old-<pid>` of a process that is gone, without gen's marker, survives a
    run into that output folder, byte for byte, and nothing is said about it."""
    out, pid = tmp_path / "out", dead_pid()
    for name in (f".notes.tmp-{pid}", f".mine.old-{pid}"):
        (out / name).mkdir(parents=True)
        (out / name / "diary.txt").write_text("mine\n")
    recipe = log_recipe(tmp_path / "r.yaml", "mine", SAMPLE)
    done = gen_subprocess("run", recipe, "--output-dir", out)
    assert done.returncode == 0, done.stderr
    for name in (f".notes.tmp-{pid}", f".mine.old-{pid}"):
        assert (out / name / "diary.txt").read_text() == "mine\n"
    assert "removed" not in done.stderr and "recovered" not in done.stderr


# --- 4. a reject-limit stop keeps what was made ------------------------------------------------------


def test_a_reject_limit_stop_keeps_the_rejects_with_raw_replies_and_a_report(tmp_path):
    with FakeOpenAI(lambda request: "I am not JSON at all") as server:
        recipe = tcq_recipe(tmp_path / "r.yaml", server.base_url)
        env = {"GEN_TEST_KEY": "sk-test", "GEN_CACHE_DIR": str(tmp_path / "cache")}
        done = gen_subprocess("run", recipe, "--output-dir", tmp_path / "out", env=env)
        calls = server.count
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    kept = tmp_path / "out" / ".tcq.stopped"
    assert str(kept) in done.stderr and "run the same command again" in done.stderr.lower()
    assert not (tmp_path / "out" / "tcq").exists()
    report = json.loads((kept / "run.json").read_text())
    assert "reject" in report["stopped"]["reason"]
    rejects = read_jsonl(kept / "rejects.jsonl")  # failed calls: every reply was unparsable
    assert rejects and all(r["step"] == "time_content_questions" for r in rejects)
    assert all(r["reason"] and r["raw_text"] == "I am not JSON at all" for r in rejects)
    assert len({r["item_id"] for r in rejects}) == len(rejects)  # each rejected item once
    assert len(read_jsonl(kept / "log" / "test.jsonl")) > sample_turns()  # the log (with padding) was finished
    assert calls > 0 and (tmp_path / "cache" / "llm.sqlite").is_file()


# --- 5. Ctrl-C ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("workers", [1, 2])
def test_ctrl_c_exits_130_keeps_the_partial_run_and_says_how_to_resume(tmp_path, workers):
    samples = json.loads(SAMPLE.read_text())
    corpus = write_json(
        tmp_path / "corpus.json",
        [{**s, "sample_id": f"{s['sample_id']}-{k}"} for k in range(40) for s in samples],
    )
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "big",
            "sources": [{"format": "locomo", "path": str(corpus)}],
            "timeline": {"padding": {"mode": "donor", "target_words": 300}},
            "products": [{"type": "log"}, {"type": "time_queries"}],
        },
    )
    out = tmp_path / "out"
    running = subprocess.Popen(
        [sys.executable, "-m", "gen", "run", str(recipe), "--output-dir", str(out), "--workers", str(workers)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        start_new_session=True,  # its own process group, as a terminal's Ctrl-C reaches it
    )
    partial = out / f".big.tmp-{running.pid}" / "time_queries" / "test.jsonl"
    deadline = time.monotonic() + 120
    while not (partial.exists() and partial.stat().st_size > 0) and time.monotonic() < deadline:
        time.sleep(0.005)
    os.killpg(running.pid, signal.SIGINT)
    stderr = running.communicate(timeout=120)[1]
    assert running.returncode == 130, stderr
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    kept = out / ".big.stopped"
    [line] = [line for line in stderr.splitlines() if "interrupted" in line]  # one line says it all
    assert str(kept) in line and "run the same command again" in line
    report = json.loads((kept / "run.json").read_text())
    assert report["stopped"] == {"reason": "interrupted (Ctrl-C)", "exit_code": 130}
    written = (kept / "time_queries" / "test.jsonl").read_bytes()
    assert written and written.endswith(b"\n")  # whole records only
    assert 0 < report["configs"]["time_queries"]["records"] == written.count(b"\n")
    assert not (out / "big").exists() and not list(out.glob(".big.tmp-*"))
    assert sorted(p.name for p in kept.iterdir() if p.name.startswith(".")) == [".gen-files.json"]  # no spool

    # run again (a short run here) and succeed: what the stop kept is superseded, and removed
    again = gen_subprocess("run", recipe, "--output-dir", out, "--limit", "1", "--workers", str(workers))
    assert again.returncode == 0, again.stderr
    assert (out / "big").is_dir() and not kept.exists()


# --- 11 and 12. the run folder names nothing of this machine and rebuilds from anywhere ---------------


def test_the_kept_recipe_rebuilds_the_same_records_from_another_folder(tmp_path):
    first = gen_subprocess("run", REPO / "recipes" / "quickstart.yaml", "--output-dir", tmp_path / "a")
    assert first.returncode == 0, first.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = gen_subprocess("run", tmp_path / "a" / "quickstart" / "recipe.yaml", "--output-dir", "b", cwd=elsewhere)
    assert again.returncode == 0, again.stderr
    a, b = tmp_path / "a" / "quickstart", elsewhere / "b" / "quickstart"
    assert {k: v for k, v in tree(a).items() if k.endswith(".jsonl")} == {
        k: v for k, v in tree(b).items() if k.endswith(".jsonl")
    }
    fingerprint = [json.loads((f / "run.json").read_text())["recipe"]["fingerprint"] for f in (a, b)]
    assert fingerprint[0] == fingerprint[1]


def test_run_json_names_no_folder_of_this_machine_and_the_recipe_no_absolute_path(tmp_path):
    done = gen_subprocess("run", REPO / "recipes" / "quickstart.yaml", "--output-dir", tmp_path / "out")
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "out" / "quickstart"
    text = (folder / "run.json").read_text()
    assert str(REPO) not in text and str(tmp_path) not in text and os.path.expanduser("~") not in text
    assert json.loads(text)["sources"][0]["origin"] == "sample_locomo.json"
    kept = yaml.safe_load((folder / "recipe.yaml").read_text())
    assert not Path(kept["sources"][0]["path"]).is_absolute()


# --- 14. the card's folder and what each test produced ------------------------------------------------


def test_the_card_names_the_output_folder_given_and_empty_tests_are_reported(tmp_path):
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "spans",
            "sources": [{"format": "locomo", "path": str(SAMPLE)}],
            "timeline": {"padding": {"mode": "none"}},
            # the sample has conversations of 6 and 3 sessions: no run of 9 sessions exists
            "products": [{"type": "time_queries", "tests": ["session", "session_span"], "span_length": 9}],
        },
    )
    done = gen_subprocess("run", recipe, "--output-dir", "somewhere/else", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "somewhere" / "else" / "spans"
    assert 'load_dataset("somewhere/else/spans", "time_queries"' in (folder / "README.md").read_text()
    summary = json.loads((folder / "run.json").read_text())["configs"]["time_queries"]["summary"]
    assert summary["by_test"]["session_span"] == {"base_questions": 0, "variants": 0, "conversations": 0}
    assert summary["by_test"]["session"]["base_questions"] == 9  # one per real session: 6 + 3
    assert summary["not_produced"] == ["session_span"]
    assert "no question for session_span: nothing in these conversations fits that test" in done.stderr
    card = (folder / "README.md").read_text()
    assert "| session_span | 0 | 0 | 0 |" in card and "not_produced" not in card


def test_a_symlinked_output_folder_is_refused_and_left_as_it_was(tmp_path):
    """gen neither follows nor replaces a symbolic link at outputs/<name>: one message naming it, the link and
    what it points at unchanged, and no `.old-PID` or temporary folder left beside it."""
    out = tmp_path / "out"
    recipe = log_recipe(tmp_path / "r.yaml", "mine", SAMPLE)
    elsewhere = tmp_path / "elsewhere"
    assert gen_subprocess("run", recipe, "--output-dir", elsewhere).returncode == 0
    before = {p.relative_to(elsewhere).as_posix(): p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()}
    out.mkdir()
    (out / "mine").symlink_to(elsewhere / "mine")
    done = gen_subprocess("run", recipe, "--output-dir", out)
    assert done.returncode == 2 and f"{out / 'mine'}: this is a symbolic link" in done.stderr
    assert "Traceback" not in done.stderr
    assert (out / "mine").is_symlink() and sorted(p.name for p in out.iterdir()) == ["mine"]
    assert {p.relative_to(elsewhere).as_posix(): p.read_bytes() for p in elsewhere.rglob("*") if p.is_file()} == before
