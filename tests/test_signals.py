"""Stopping gen from outside: Ctrl-C, SIGTERM and SIGHUP stop any command promptly, the same way (a run keeps
what it made and says which signal stopped it; exit 130, 143, 129), and leave no worker process behind. And a
defect: one line on the terminal, its traceback in a file.

The commands run as real processes, in their own process group as a terminal's job is; the LLM endpoint is the
fake server on 127.0.0.1, made to never answer. The time limits are hang guards (the promise is 2 s)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli, write_json, write_recipe
from tests.fakes.openai_server import FakeOpenAI, Reply

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"
PROMPT = 5.0  # seconds: a stop promised within 2 s that takes longer than this is a hang
SIGNALS = {"SIGINT": (signal.SIGINT, 130, "Ctrl-C"), "SIGTERM": (signal.SIGTERM, 143, "SIGTERM")}
SIGNALS["SIGHUP"] = (signal.SIGHUP, 129, "SIGHUP")


def start_gen(*args, cwd: Path | None = None, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gen", *map(str, args)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})},
        start_new_session=True,  # its own process group, as a terminal's job: Ctrl-C and SIGHUP reach all of it
    )


def wait_until(condition: Callable[[], bool], running: subprocess.Popen, what: str) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        if running.poll() is not None or time.monotonic() > deadline:
            running.kill()
            raise AssertionError(f"gen never got to {what}: {running.communicate()[1]}")
        time.sleep(0.01)


def stop(running: subprocess.Popen, signum: int, *, group: bool = True) -> tuple[int, str, float]:
    """Send `signum` (to the process group, or to gen alone) and wait: (exit code, stderr, seconds taken)."""
    sent = time.monotonic()
    if group:
        os.killpg(running.pid, signum)
    else:
        os.kill(running.pid, signum)
    try:
        stderr = running.communicate(timeout=60)[1]
    except subprocess.TimeoutExpired:
        os.killpg(running.pid, signal.SIGKILL)
        raise AssertionError(f"gen did not stop: {running.communicate()[1]}") from None
    return running.returncode, stderr, time.monotonic() - sent


def children(pid: int) -> list[int]:
    """The processes whose parent is `pid` (from /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def running_pids(pids: list[int]) -> list[int]:
    """Those of `pids` still running a short while later (a zombie has ended)."""
    deadline = time.monotonic() + PROMPT
    while True:
        alive = []
        for pid in pids:
            try:
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z":
                alive.append(pid)
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.05)


def llm_recipe(tmp_path: Path, base_url: str, **endpoint) -> Path:
    """The log and one question per conversation of the sample, from an endpoint at `base_url`."""
    llm = {"model": "fake-model", "base_url": base_url, "api_key_env": None, **endpoint}
    return write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "stopme",
            "sources": [{"format": "locomo", "path": str(SAMPLE)}],
            "timeline": {"padding": {"mode": "none"}},
            "llm": {"main": llm},
            "products": [{"type": "log"}, {"type": "time_content_questions", "per_conversation": 1}],
        },
    )


def assert_kept(out: Path, stderr: str, name: str, signal_name: str) -> dict:
    """One line says the run stopped, which signal, and where it is kept; that folder's run.json says it too."""
    kept = out / ".stopme.stopped"
    [line] = stderr.strip().splitlines()[-1:]
    assert line.startswith(f"stopped: interrupted ({signal_name}); kept the records so far"), stderr
    assert str(kept) in line and "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    report = json.loads((kept / "run.json").read_text())
    assert not (out / name).exists() and not list(out.glob(f".{name}.tmp-*"))
    return report


def assert_cache_opens(cache_dir: Path) -> None:
    with sqlite3.connect(cache_dir / "llm.sqlite") as db:
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)


# --- gen run: each stop signal, at each place a run waits --------------------------------------------------


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_stop_during_the_structured_output_probe_is_prompt_and_keeps_the_run(tmp_path, name):
    """The probe's one request never gets an answer (its timeout is 30 s): the stop cancels it."""
    signum, code, shown = SIGNALS[name]
    with FakeOpenAI(lambda request: Reply(hang=True)) as server:
        recipe = llm_recipe(tmp_path, server.base_url, structured_output="auto")
        running = start_gen("run", recipe, "--output-dir", tmp_path / "out", "--cache-dir", tmp_path / "cache")
        wait_until(lambda: server.count >= 1, running, "the probe's request")
        exit_code, stderr, seconds = stop(running, signum)
    assert exit_code == code, stderr
    assert seconds < PROMPT
    report = assert_kept(tmp_path / "out", stderr, "stopme", shown)
    assert report["stopped"] == {"reason": f"interrupted ({shown})", "exit_code": code}
    assert server.requests[0].response_format is not None  # it was the probe that was waited on
    assert_cache_opens(tmp_path / "cache")


@pytest.mark.parametrize("group", [True, False], ids=["process-group", "gen-alone"])
def test_sigterm_during_a_hung_request_stops_the_request_processes_too(tmp_path, group):
    """Two request processes each hold a request the server never answers. SIGTERM to the whole group (as a job
    scheduler sends it) or to gen alone (`kill PID`): gen reports once, and no request process is left."""
    with FakeOpenAI(lambda request: Reply(hang=True)) as server:
        recipe = llm_recipe(tmp_path, server.base_url, structured_output="json_object", max_concurrency=2)
        out, cache = tmp_path / "out", tmp_path / "cache"
        running = start_gen("run", recipe, "--output-dir", out, "--cache-dir", cache, "--request-processes", 2)
        wait_until(lambda: server.count >= 2, running, "two requests in flight")
        senders = children(running.pid)
        exit_code, stderr, seconds = stop(running, signal.SIGTERM, group=group)
    assert exit_code == 143, stderr
    assert seconds < PROMPT
    report = assert_kept(out, stderr, "stopme", "SIGTERM")
    assert report["stopped"] == {"reason": "interrupted (SIGTERM)", "exit_code": 143}
    log = (out / ".stopme.stopped" / "log" / "test.jsonl").read_bytes()
    assert report["configs"]["log"]["records"] == log.count(b"\n")  # the counts are those of the files kept
    assert len(senders) == 2 and running_pids(senders) == []
    assert_cache_opens(cache)


def test_sighup_while_polling_a_batch_keeps_the_run_and_its_batch_for_the_resume(tmp_path):
    with FakeOpenAI(lambda request: {"question": "q"}) as server:
        server.batch_api.hold = True  # the batch never ends: gen polls it, and sleeps between polls
        recipe = llm_recipe(tmp_path, server.base_url, structured_output="json_object", mode="batch", batch_poll_s=1.0)
        out, cache = tmp_path / "out", tmp_path / "cache"
        running = start_gen("run", recipe, "--output-dir", out, "--cache-dir", cache)
        wait_until(lambda: server.batch_api.creates >= 1, running, "a batch sent")
        time.sleep(0.3)  # inside the wait between two polls
        exit_code, stderr, seconds = stop(running, signal.SIGHUP)
        server.batch_api.hold = False
    assert exit_code == 129, stderr
    assert seconds < PROMPT
    report = assert_kept(out, stderr, "stopme", "SIGHUP")
    assert report["stopped"]["reason"] == "interrupted (SIGHUP)"
    assert_cache_opens(cache)


def test_sigterm_while_the_pool_writes_keeps_whole_records_and_leaves_no_worker(tmp_path):
    samples = json.loads(SAMPLE.read_text())
    corpus = tmp_path / "corpus.json"
    corpus.write_text(json.dumps([{**s, "sample_id": f"{s['sample_id']}-{k}"} for k in range(40) for s in samples]))
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "stopme",
            "sources": [{"format": "locomo", "path": str(corpus)}],
            "timeline": {"padding": {"mode": "donor", "target_words": 300}},
            "products": [{"type": "log"}, {"type": "time_queries"}],
        },
    )
    out = tmp_path / "out"
    running = start_gen("run", recipe, "--output-dir", out, "--workers", 2)
    partial = out / f".stopme.tmp-{running.pid}" / "time_queries" / "test.jsonl"
    wait_until(lambda: partial.exists() and partial.stat().st_size > 0, running, "writing records")
    workers = children(running.pid)
    exit_code, stderr, seconds = stop(running, signal.SIGTERM)
    assert exit_code == 143, stderr
    assert seconds < PROMPT
    report = assert_kept(out, stderr, "stopme", "SIGTERM")
    written = (out / ".stopme.stopped" / "time_queries" / "test.jsonl").read_bytes()
    assert written.endswith(b"\n") and report["configs"]["time_queries"]["records"] == written.count(b"\n")
    assert workers and running_pids(workers) == []


def test_sigterm_while_a_source_is_read_writes_nothing(tmp_path):
    """The source is a large file that gen has open and is part way through reading when the signal comes."""
    samples = json.loads(SAMPLE.read_text())
    source = write_json(
        tmp_path / "corpus.json", [{**s, "sample_id": f"{s['sample_id']}-{k}"} for k in range(600) for s in samples]
    )
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {"name": "stopme", "sources": [{"format": "locomo", "path": str(source)}], "products": [{"type": "log"}]},
    )
    running = start_gen("run", recipe, "--output-dir", tmp_path / "out")
    wait_until_open(source, running)
    exit_code, stderr, seconds = stop(running, signal.SIGTERM)
    assert (exit_code, stderr.strip()) == (143, "interrupted (SIGTERM); nothing was written")
    assert seconds < PROMPT
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def wait_until_open(path: Path, running: subprocess.Popen) -> None:
    """Wait until gen has `path` open (its /proc/PID/fd links name it)."""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and running.poll() is None:
        with contextlib.suppress(OSError):
            if any(os.readlink(link) == str(path) for link in Path(f"/proc/{running.pid}/fd").iterdir()):
                return
        time.sleep(0.005)
    raise AssertionError(f"gen never opened {path}: {running.communicate()}")


# --- other commands ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_judge_stopped_during_a_hung_request_writes_no_verdicts(tmp_path, name):
    from tests.test_judge import KEY, answers_file, run_folder

    signum, code, shown = SIGNALS[name]
    with FakeOpenAI(lambda request: Reply(hang=True)) as server:
        folder, answers = run_folder(tmp_path / "run", server.base_url), answers_file(tmp_path / "mine.jsonl")
        env = {"GEN_TEST_KEY": KEY, "GEN_CACHE_DIR": str(tmp_path / "cache")}
        running = start_gen("judge", folder, "--answers", answers, env=env)
        wait_until(lambda: server.count >= 1, running, "a request to the judge")
        exit_code, stderr, seconds = stop(running, signum)
    assert (exit_code, stderr.strip().splitlines()[-1]) == (code, f"interrupted ({shown}); nothing was written")
    assert seconds < PROMPT and "Traceback" not in stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache", "mine.jsonl", "run"]  # no verdicts file
    assert_cache_opens(tmp_path / "cache")


# --- a defect: one line, the traceback in a file -------------------------------------------------------------


class Exploding(dict):
    def items(self):
        raise RuntimeError(f"boom with {os.environ['GEN_TEST_SECRET_KEY']} inside")


def test_a_defect_prints_one_line_and_leaves_its_traceback_in_the_state_folder(tmp_path, capsys, monkeypatch):
    from gen.products import registry

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("GEN_TEST_SECRET_KEY", "sk-very-secret-0123456789")
    monkeypatch.setattr(registry, "REGISTRY", Exploding(one=None))
    code, out, err = run_cli(["products"], capsys)
    assert code == 1 and out == ""
    [line] = err.strip().splitlines()
    [crash] = (tmp_path / "state" / "gen" / "crashes").iterdir()
    assert line.startswith("error: a bug in gen (or in a plugin it loaded) stopped this command: RuntimeError: boom")
    assert f"its traceback is in {crash}" in line and "Traceback" not in err
    logged = crash.read_text()
    assert "Traceback (most recent call last)" in logged and "in items" in logged and "command: gen products" in logged
    assert "sk-very-secret" not in logged + err and "boom with *** inside" in logged


def test_with_debug_a_defect_shows_its_traceback(tmp_path, capsys, monkeypatch):
    from gen.products import registry

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("GEN_TEST_SECRET_KEY", "sk-very-secret-0123456789")
    monkeypatch.setattr(registry, "REGISTRY", Exploding(one=None))
    with pytest.raises(RuntimeError, match="boom"):
        run_cli(["--debug", "products"], capsys)
    assert not (tmp_path / "state").exists()


def test_without_a_state_folder_the_traceback_goes_to_the_temp_folder(tmp_path, capsys, monkeypatch):
    from gen.products import registry

    (tmp_path / "state").write_text("a file where the folder would go")
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("GEN_TEST_SECRET_KEY", "sk-very-secret-0123456789")
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "temp"))
    (tmp_path / "temp").mkdir()
    monkeypatch.setattr(registry, "REGISTRY", Exploding(one=None))
    code, _, err = run_cli(["products"], capsys)
    [crash] = (tmp_path / "temp").iterdir()
    assert code == 1 and f"its traceback is in {crash}" in err and crash.name.startswith("crash-")


BROKEN_PRODUCT = '''
import sys
from gen.products.base import ConfigSpec, ConversationProduct
from gen.products.schema import STRING, schema
from gen.products.registry import register
from gen.recipe import StrictModel
from gen.cli import main


class Broken(ConversationProduct[StrictModel]):
    """A product with a bug: it fails on its second conversation."""

    name = "broken"
    description = "raises on its second conversation"
    Options = StrictModel
    configs = (ConfigSpec("broken", "one row", schema({"conversation_id": STRING})),)
    seen = []

    def records(self, unit, ctx):
        self.seen.append(unit)
        if len(self.seen) > 1:
            raise ZeroDivisionError("a plugin divided by zero")
        yield "broken", {"conversation_id": unit.conversation.conversation_id}

    def validate(self, unit, records, checks, ctx):
        pass


register(Broken)
sys.argv[0] = "gen"
main()
'''


def test_a_defect_in_a_run_keeps_the_run_and_says_where_in_the_same_line(tmp_path):
    driver = tmp_path / "gen_with_broken.py"
    driver.write_text(BROKEN_PRODUCT, encoding="utf-8")
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {"name": "stopme", "sources": [{"format": "locomo", "path": str(SAMPLE)}], "products": [{"type": "broken"}]},
    )
    done = subprocess.run(
        [sys.executable, str(driver), "run", recipe, "--output-dir", tmp_path / "out"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO), "XDG_STATE_HOME": str(tmp_path / "state")},
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    [crash] = (tmp_path / "state" / "gen" / "crashes").iterdir()
    last = done.stderr.strip().splitlines()[-1]
    assert "ZeroDivisionError: a plugin divided by zero" in last and str(crash) in last
    assert str(tmp_path / "out" / ".stopme.stopped") in last and "Traceback" not in done.stderr
    report = json.loads((tmp_path / "out" / ".stopme.stopped" / "run.json").read_text())
    assert report["stopped"]["reason"] == "internal error: ZeroDivisionError: a plugin divided by zero"
    assert "in records" in crash.read_text()


def test_a_stop_that_comes_once_the_run_is_in_place_does_not_undo_or_misreport_it(tmp_path, capsys, monkeypatch):
    """The folder is the command's result: a SIGTERM during or after its swap into place changes nothing, and the
    command says what it wrote rather than "nothing was written"."""
    from gen import folders

    real_swap = folders.swap_into_place

    def swap_then_signal(new, target):
        os.kill(os.getpid(), signal.SIGTERM)  # while the folder goes in place
        real_swap(new, target)
        os.kill(os.getpid(), signal.SIGTERM)  # and once it is there

    monkeypatch.setattr(folders, "swap_into_place", swap_then_signal)
    recipe = write_recipe(
        tmp_path / "r.yaml",
        {"name": "late", "sources": [{"format": "locomo", "path": str(SAMPLE)}], "products": [{"type": "log"}]},
    )
    code, _, err = run_cli(["run", recipe, "--output-dir", tmp_path / "out"], capsys)
    assert code == 0, err
    assert "nothing was written" not in err and (tmp_path / "out" / "late" / "log" / "test.jsonl").is_file()
    assert signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN  # the CLI's handlers are undone afterwards
