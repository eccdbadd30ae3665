"""Progress displays (gen/progress.py): drawn for every long step on a terminal, never under -q, into a pipe or
by a program calling gen's functions; the LLM steps' bars share the one display; a stop leaves the terminal
clean. The commands run under a real pseudo-terminal (os.openpty) as a user's shell gives them one."""

from __future__ import annotations

import fcntl
import io
import os
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest

from gen import progress
from gen.llm.accounts.progress import LiveReporter, NullReporter, PlainReporter, make_reporter
from tests.conftest import REPO, gen_subprocess, tcq_recipe
from tests.fakes.openai_server import FakeOpenAI, tcq_question

QUICKSTART = REPO / "recipes" / "quickstart.yaml"
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"
# what rich reads to decide on colours and terminal-ness: a CI's setting must not change what the test sees
RICH_VARIABLES = ("NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "COLUMNS", "LINES")
# the rows each step shows in the display, by command (for the quickstart run of the bundled sample)
RUN_STEPS = [
    "reading sample_locomo.json",
    "building log",
    "building conversations",
    "building time_queries",
    "building ambiguous_time_queries",
    "writing run.json, rejects.jsonl and README.md",
]


class Terminal(io.StringIO):
    """A stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def enabled():
    """Displays on, as the command line turns them on; off again afterwards."""
    progress.enable()
    yield
    progress.disable()


# --- the rule ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("enabled_", "terminal", "same_process", "drawn"),
    [
        (True, True, True, True),  # the command line, on a terminal: the only case that draws
        (False, True, True, False),  # -q, or a program calling gen's functions
        (True, False, True, False),  # piped or redirected
        (True, True, False, False),  # a worker process forked from the one that asked
        (False, False, False, False),
    ],
)
def test_a_display_is_drawn_only_when_asked_for_on_a_terminal_by_the_asking_process(
    enabled_, terminal, same_process, drawn
):
    assert progress.decide(enabled=enabled_, terminal=terminal, same_process=same_process) is drawn


def test_library_callers_get_no_display_and_no_llm_lines():
    progress.disable()
    assert progress.llm_mode("auto", Terminal()) == "off"
    assert isinstance(make_reporter("auto", stream=Terminal()), NullReporter)
    with progress.task("reading", 3) as bar:
        bar.advance()
        assert not bar.shown


def test_the_llm_lines_follow_the_rule_and_an_explicit_mode_is_kept(enabled):
    assert progress.llm_mode("auto", Terminal()) == "live"
    assert progress.llm_mode("auto", io.StringIO()) == "plain"  # a log of a long run says how far it got
    assert isinstance(make_reporter("auto", stream=io.StringIO()), PlainReporter)
    assert isinstance(make_reporter("auto", stream=Terminal()), LiveReporter)
    progress.enable(False)  # -q
    assert progress.llm_mode("auto", Terminal()) == "off"
    assert [progress.llm_mode(mode, Terminal()) for mode in ("live", "plain", "off")] == ["live", "plain", "off"]


def python_says(script: str) -> list[str]:
    """The words a script prints, run by a fresh interpreter with this checkout's gen."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


FORKED_WORKER = """
import multiprocessing
from gen import progress
from tests.test_progress import Terminal

def llm_mode_in_worker():
    return progress.llm_mode("auto", Terminal())

if __name__ == "__main__":
    progress.enable()
    with multiprocessing.get_context("fork").Pool(1) as pool:
        print(pool.apply(llm_mode_in_worker), llm_mode_in_worker())
"""


def test_a_forked_worker_never_draws():
    # In a fresh interpreter: forking the test process itself, whose other tests leave threads behind, can
    # deadlock the child on a lock one of them held
    assert python_says(FORKED_WORKER) == ["off", "live"]  # the worker draws nothing; the process that asked would


# --- under a pseudo-terminal -----------------------------------------------------------------------------


def on_terminal(*args, env: dict | None = None, stop_on: str | None = None, timeout: float = 120) -> tuple[int, str]:
    """`python -m gen ARGS` with stdout and stderr on a pseudo-terminal (200 columns); returns its exit code and
    everything it wrote there. `stop_on`: send SIGTERM once that text has appeared."""
    master, slave = os.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))
    environment = {key: value for key, value in os.environ.items() if key not in RICH_VARIABLES}
    environment |= {"PYTHONPATH": str(REPO), "TERM": "xterm-256color", **(env or {})}
    command = [sys.executable, "-m", "gen", *map(str, args)]
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=environment)
    os.close(slave)
    seen, deadline = b"", time.monotonic() + timeout  # a hang guard, not a measurement
    try:
        while time.monotonic() < deadline:
            if stop_on is not None and stop_on.encode() in seen:
                process.send_signal(signal.SIGTERM)
                stop_on = None
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every end of the terminal closed, the command has ended
                break
            if not chunk:
                break
            seen += chunk
        return process.wait(timeout=30), seen.decode("utf-8", "replace")
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)


def quickstart_run(tmp_path: Path) -> Path:
    done = gen_subprocess("run", QUICKSTART, "--output-dir", tmp_path / "out", env=cache_env(tmp_path))
    assert done.returncode == 0, done.stderr
    return tmp_path / "out" / "quickstart"


def cache_env(tmp_path: Path) -> dict[str, str]:
    return {"GEN_CACHE_DIR": str(tmp_path / "cache")}


def plain(text: str) -> str:
    """The text without its control codes (colours, cursor moves)."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


def assert_left_clean(text: str) -> None:
    """The cursor, hidden while the display was shown, is shown again after, and the display is gone."""
    assert HIDE_CURSOR in text
    assert text.rindex(SHOW_CURSOR) > text.rindex(HIDE_CURSOR)


def test_gen_run_on_a_terminal_shows_each_step_and_leaves_the_terminal_clean(tmp_path):
    code, text = on_terminal("run", QUICKSTART, "--output-dir", tmp_path / "out", env=cache_env(tmp_path))
    assert code == 0, text
    for step in RUN_STEPS:
        assert step in text
    assert "2/2 conversations" in plain(text)  # the products count the sample's two conversations
    assert_left_clean(text)
    assert text.rstrip().endswith(f"wrote {tmp_path / 'out' / 'quickstart'}")  # the last line, on a line of its own


def test_gen_run_piped_or_quiet_shows_no_display(tmp_path):
    piped = gen_subprocess("run", QUICKSTART, "--output-dir", tmp_path / "out", env=cache_env(tmp_path))
    assert piped.returncode == 0, piped.stderr
    code, quiet = on_terminal("-q", "run", QUICKSTART, "--output-dir", tmp_path / "out", env=cache_env(tmp_path))
    assert code == 0, quiet
    for shown in (piped.stderr, quiet):
        assert "\x1b[" not in shown  # no control code at all
        assert not [step for step in RUN_STEPS if step in shown]
    assert quiet == ""  # -q: warnings and errors only, and there are none


@pytest.mark.parametrize(
    ("command", "steps"),
    [
        (["export", "{run}", "--format", "locomo", "--output", "{tmp}/export"], ["exporting for locomo"]),
        (["push", "{run}", "--dry-run", "--export-dir", "{tmp}/hub"], ["writing parquet"]),
        (["baseline", "recent", "{run}", "--output", "{tmp}/recent.jsonl"], ["recent ranking time_queries"]),
        (
            ["validate", str(QUICKSTART)],
            ["reading sample_locomo.json", "placing conversations on the clock", "rendering the LLM prompts"],
        ),
    ],
    ids=["export", "push", "baseline", "validate"],
)
def test_the_other_long_commands_show_their_steps_on_a_terminal_only(tmp_path, command, steps):
    run = quickstart_run(tmp_path)
    args = [part.format(run=run, tmp=tmp_path) for part in command]
    code, text = on_terminal(*args, env=cache_env(tmp_path))
    assert code == 0, text
    for step in steps:
        assert step in text
    assert_left_clean(text)
    args = [part.format(run=run, tmp=tmp_path / "again") for part in command]  # the same command, piped
    (tmp_path / "again").mkdir()
    piped = gen_subprocess(*args, env=cache_env(tmp_path))
    assert piped.returncode == 0, piped.stderr
    assert "\x1b[" not in piped.stderr and not [step for step in steps if step in piped.stderr]


def test_gen_eval_shows_reading_the_questions_and_predictions(tmp_path):
    run = quickstart_run(tmp_path)
    predictions = tmp_path / "recent.jsonl"
    made = gen_subprocess("baseline", "recent", run, "--output", predictions)
    assert made.returncode == 0, made.stderr
    code, text = on_terminal("eval", run, "--predictions", predictions)
    assert code == 0, text
    assert "reading the questions" in text and "reading recent.jsonl" in text
    assert "mean over tests" in text  # the scores themselves, after the display
    assert_left_clean(text)


def test_llm_steps_share_the_display_and_quiet_silences_them(tmp_path):
    with FakeOpenAI(tcq_question) as server:
        recipe = tcq_recipe(tmp_path / "recipe.yaml", server.base_url)
        env = {"GEN_TEST_KEY": "k", **cache_env(tmp_path)}
        code, text = on_terminal("run", recipe, "--output-dir", tmp_path / "out", env=env)
        assert code == 0, text
        # the step's last line stays printed above the display once its bar has gone (4 questions: 2 per conversation)
        assert "[llm] time_content_questions: 4/4 calls done, 0 cached" in text
        assert "building time_content_questions" in text
        assert_left_clean(text)
        env["GEN_CACHE_DIR"] = str(tmp_path / "another cache")  # the calls are made again
        code, quiet = on_terminal("-q", "run", recipe, "--output-dir", tmp_path / "quiet", env=env)
    assert code == 0, quiet
    assert quiet == ""  # neither a bar nor an [llm] line


def test_a_stop_leaves_the_terminal_clean(tmp_path):
    with FakeOpenAI(tcq_question, delay=60) as server:  # the LLM step waits: the stop comes during it
        recipe = tcq_recipe(tmp_path / "recipe.yaml", server.base_url)
        env = {"GEN_TEST_KEY": "k", **cache_env(tmp_path)}
        code, text = on_terminal("run", recipe, "--output-dir", tmp_path / "out", env=env, stop_on="0/4", timeout=60)
    assert code == 143, text  # 128 + SIGTERM
    assert_left_clean(text)
    last = text[text.rindex(SHOW_CURSOR) :]
    assert "stopped: interrupted (SIGTERM)" in last  # the message comes after the display is gone


FORK_WHILE_DRAWING = """
import os, threading, time
from gen import progress
from tests.test_progress import Terminal

progress.enable()
progress._real_stderr = lambda: Terminal()  # a terminal, so the display is drawn and its thread runs
with progress.task("drawing", 10) as bar:
    display = progress._Display.progress
    drawing = threading.Event()

    def draw():  # the display's thread, caught in the middle of a refresh
        with display.live._lock:
            drawing.set()
            time.sleep(0.5)

    threading.Thread(target=draw).start()
    drawing.wait()
    pid = os.fork()  # waits for the refresh to end
    if pid == 0:
        os._exit(0 if display.live._lock.acquire(timeout=3) else 3)  # else the lock of a thread the child lacks
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), display.live._lock.acquire(timeout=3))
"""


def test_a_fork_waits_for_the_display_to_finish_drawing_so_the_child_gets_its_locks_free():
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", FORK_WHILE_DRAWING], capture_output=True, text=True, env=env, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["0", "True"]


# --- the Python API: each call follows its own options --------------------------------------------------------


def test_each_api_call_follows_its_own_progress_setting_and_leaves_nothing_behind(tmp_path, monkeypatch):
    import gen
    from gen.llm.config import RunSettings

    for name in RICH_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GEN_CACHE_DIR", str(tmp_path / "cache"))

    def shown(name: str, mode: str) -> str:
        terminal = Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        gen.run(QUICKSTART, gen.RunOptions(output_dir=tmp_path / name, llm=RunSettings(progress=mode)))
        monkeypatch.setattr(sys, "stderr", sys.__stderr__)
        return terminal.getvalue()

    progress.enable(False)  # what `gen -q` sets while it runs: a call that asks for a display still gets one
    try:
        live = shown("live", "live")
        assert all(step in live for step in RUN_STEPS) and HIDE_CURSOR in live
        assert progress.asked() == (None, False)  # the call's choice ended with it
        assert shown("auto", "auto") == ""  # a program that chooses nothing: silence, whatever came before
        progress.enable()  # a command line without -q, still running: a call that says off is silent
        assert shown("off", "off") == ""
        assert progress.asked() == ("live", True)  # and the command line's own choice is as it was
    finally:
        progress.disable()


# every other API function that shows progress, each with the step its display names; `call(mode, folder, tmp)`
# makes one call with options whose `progress` is `mode`, on the quickstart run `folder`
def _predictions(folder: Path, tmp: Path) -> Path:
    import gen

    written = tmp / "recent.jsonl"
    if not written.exists():
        gen.baseline("recent", folder, written, gen.BaselineOptions(progress="off"))
    return written


def _tcq(tmp: Path) -> Path:
    return tcq_recipe(tmp / "tcq.yaml", "http://127.0.0.1:9/v1")  # planned only: nothing is sent


API_STEPS = {
    "plan": (lambda gen, mode, folder, tmp: gen.plan(QUICKSTART, gen.PlanOptions(progress=mode)), "reading sample"),
    "validate": (
        lambda gen, mode, folder, tmp: gen.validate(QUICKSTART, gen.ValidateOptions(progress=mode)),
        "placing conversations on the clock",
    ),
    "preview": (
        lambda gen, mode, folder, tmp: gen.preview(
            _tcq(tmp), "time_content_questions", 0, gen.PlanOptions(progress=mode)
        ),
        "rendering the LLM prompts",
    ),
    "push": (
        lambda gen, mode, folder, tmp: gen.push(
            folder,
            gen.PushOptions(repo_id="me/x", dry_run=True, export_dir=tmp / f"hub-{mode}", progress=mode),
            out=lambda line: None,
        ),
        "writing parquet",
    ),
    "export": (
        lambda gen, mode, folder, tmp: gen.export_harness(
            folder, "locomo", tmp / f"export-{mode}", gen.ExportOptions(progress=mode)
        ),
        "exporting for locomo",
    ),
    "baseline": (
        lambda gen, mode, folder, tmp: gen.baseline(
            "recent", folder, tmp / f"{mode}.jsonl", gen.BaselineOptions(progress=mode)
        ),
        "recent ranking time_queries",
    ),
    "evaluate": (
        lambda gen, mode, folder, tmp: gen.evaluate(
            folder, _predictions(folder, tmp), options=gen.EvalOptions(progress=mode)
        ),
        "reading the questions",
    ),
}  # fmt: skip


@pytest.fixture
def terminal_stderr(monkeypatch):
    """Runs a function with stderr a terminal and returns what it drew there."""
    for name in RICH_VARIABLES:
        monkeypatch.delenv(name, raising=False)

    def shown(function) -> str:
        terminal = Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        try:
            function()
        finally:
            monkeypatch.setattr(sys, "stderr", sys.__stderr__)
        return terminal.getvalue()

    return shown


@pytest.mark.parametrize("kind", sorted(API_STEPS))
def test_each_api_function_follows_its_own_options_progress_for_that_call_only(
    kind, quickstart, tmp_path, terminal_stderr
):
    import gen

    call, step = API_STEPS[kind]
    progress.enable(False)  # as under `gen -q`: a call that asks for a display still gets one
    try:
        live = terminal_stderr(lambda: call(gen, "live", quickstart, tmp_path))
        assert step in live and HIDE_CURSOR in live
        assert progress.asked() == (None, False)  # the call's choice ended with it
        assert terminal_stderr(lambda: call(gen, "auto", quickstart, tmp_path)) == ""  # nothing chosen: silence
        progress.enable()  # a command line that asked for displays: a call that says off is silent
        assert terminal_stderr(lambda: call(gen, "off", quickstart, tmp_path)) == ""
        assert progress.asked() == ("live", True)  # and the command line's own choice is as it was
    finally:
        progress.disable()


def test_judge_and_view_do_their_work_under_their_own_progress_choice(quickstart, monkeypatch):
    """Their displays come from the work they call (the judge's LLM steps, the viewer's indexing): that work
    runs under the call's choice. What each sees is recorded where the work starts."""
    import gen
    import gen.eval.dataset
    import gen.view.command
    from gen.errors import GenError

    seen: list[tuple] = []

    def record(*_, **__):
        seen.append(progress.asked())
        raise GenError("recorded")

    monkeypatch.setattr(gen.eval.dataset, "open_dataset", record)
    monkeypatch.setattr(gen.view.command, "require_view_extra", lambda: None)
    monkeypatch.setattr(gen.view.command, "serve", record)
    for mode in ("live", "off"):
        with pytest.raises(GenError, match="recorded"):
            gen.judge(quickstart, "answers.jsonl", gen.JudgeOptions(progress=mode))
        with pytest.raises(GenError, match="recorded"):
            gen.view_folder(quickstart, gen.ViewOptions(progress=mode))
    assert seen == [("live", True), ("live", True), (None, True), (None, True)]
    assert progress.asked() == (None, False)
