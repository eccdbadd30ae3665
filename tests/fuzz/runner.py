"""The one place that runs gen on a fuzzed case and checks the promises every run keeps.

Every subprocess surface (recipes, source files, LLM replies, predictions, templates, command-line values,
signals) goes through `execute`, so the promises are written once, here:

- the exit code is 0, 1, 2, 130 (Ctrl-C), 143 (SIGTERM) or 129 (SIGHUP); a process killed by signal N counts
  as 128+N, as a shell shows it;
- no Python traceback on the terminal;
- a failed run ends with one message line (``error: ...``, ``stopped: ...``, click's ``Error: ...``,
  ``interrupted...``) that, for input errors, names an input file or option of the case;
- the run ends within the wall timeout, under an address-space and CPU rlimit, with its peak RSS bounded,
  and leaves no process behind;
- nothing is written outside the declared outputs (inputs are byte-identical, no new files elsewhere, the
  temp folder is left empty), an earlier run's folder in the output folder is byte-identical, and a failed run
  leaves no new output except a kept ``.<name>.stopped`` folder.

gen runs as a user runs it: ``python -m gen ARGS`` with PYTHONPATH at this checkout (as tests/conftest.py's
gen_subprocess does), in a fresh temporary folder that holds the case's files.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import re
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]

ALLOWED_EXITS = {0, 1, 2, 129, 130, 143}
SIGNAL_EXITS = {129, 130, 143}
# the first words of the line gen (or click, for usage errors) ends a failed run with; gen/cli/main.py main
MESSAGE_STARTS = ("error:", "stopped:", "Error:", "interrupted", "aborted")
ADDRESS_SPACE_BYTES = 3 * 1024**3  # RLIMIT_AS: gen with pyarrow and pandas loaded maps well under 1 GB
PEAK_RSS_MB = 1500  # a small input must never need more
FILE_SIZE_BYTES = 512 * 1024**2  # RLIMIT_FSIZE: a run that tries to write more is stopped by SIGXFSZ
DEFAULT_TIMEOUT_S = 60.0

# the run folder of an earlier, unrelated run in the output folder: every run must leave it byte-identical
EARLIER_RUN = {
    "out/earlier-run/run.json": b'{"name": "earlier-run", "note": "written by an earlier run"}\n',
    "out/earlier-run/log/test.jsonl": b'{"response_index": 0, "text": "kept"}\n',
}
BASE_URL = "{BASE_URL}"  # replaced in a case's files and arguments by the fake server's address


@dataclass(frozen=True, repr=False)
class Case:
    """One fuzzed run: the files it lays out, the command line, and what is allowed to change.

    `args` follow ``python -m gen`` and are relative to the work folder (the process's cwd). `outputs` are
    the paths (files or folders) the run may create or change; everything else must stay byte-identical.
    `names` are the strings of which a failure's message must hold one (the inputs and options it can blame).
    """

    surface: str
    args: tuple[str, ...]
    files: dict[str, bytes] = field(default_factory=dict)
    fifos: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()  # (path, target) symlinks
    outputs: tuple[str, ...] = ("out", "cache")
    names: tuple[str, ...] = ()
    signal_at: tuple[int, float] | None = None  # (signal number, seconds after the start)
    replies: tuple = ()  # the fake server's reply plan (tests/fuzz/server.py), empty for no server
    what: str = ""  # one line: how this case differs from a valid input
    timeout_s: float = DEFAULT_TIMEOUT_S
    terminal: bool = False  # stderr on a pseudo-terminal (progress displays drawn), as a user's shell runs it
    # the module run as `python -m MODULE ARGS`: gen's program, or tests/fuzz/api_call.py, which calls one function
    # of gen's Python API and ends as the program does (the same checks hold for both)
    module: str = "gen"

    def command_line(self) -> str:
        program = "gen" if self.module == "gen" else f"python -m {self.module}"
        return f"{program} " + " ".join(shell_quote(arg) for arg in self.args)

    def __repr__(self) -> str:  # what Hypothesis prints for a failing case: the files are too long to show
        return f"Case({self.surface}: {self.what[:300]} | {self.command_line()[:200]})"

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis's pretty printer asks for this first
        printer.text(repr(self))


def shell_quote(text: str) -> str:
    return text if re.fullmatch(r"[\w./:=@%+,-]+", text) else "'" + text.replace("'", "'\\''") + "'"


@dataclass(frozen=True)
class Violation:
    kind: str  # exit-code, traceback, message, names, hang, memory, outside, earlier, partial, temp, process
    detail: str
    shape: str  # what makes two violations of one kind the same failure class


@dataclass
class Outcome:
    case: Case
    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    peak_rss_mb: float
    timed_out: bool
    violations: list[Violation] = field(default_factory=list)

    def classes(self) -> list[str]:
        """One key per distinct failure class: surface + violation kind + exit code + its shape."""
        return sorted({f"{self.case.surface} | {v.kind} | exit {self.exit_code} | {v.shape}" for v in self.violations})

    def report(self) -> str:
        tail = "\n".join(self.stderr.strip().splitlines()[-12:])
        found = "\n".join(f"  - {v.kind}: {v.detail}" for v in self.violations)
        return (
            f"{self.case.surface}: {self.case.what}\n  {self.case.command_line()}\n  exit {self.exit_code} after "
            f"{self.seconds:.1f}s, peak RSS {self.peak_rss_mb:.0f} MB\n{found}\n  stderr (last lines):\n{tail}"
        )


def assert_promises_kept(outcome: Outcome) -> None:
    """The pytest form of the check: fail with the case, its command line and every broken promise."""
    assert not outcome.violations, outcome.report()


def execute(case: Case) -> Outcome:
    """Run the case in a fresh temporary folder (with the fake server it asks for) and check every promise."""
    from tests.fuzz.server import serving

    with tempfile.TemporaryDirectory(prefix="gen-fuzz-") as tmp, serving(case.replies) as base_url:
        work = Path(tmp)
        lay_out(case, work, base_url)
        before = snapshot(work)
        outcome = run_process(case, work, base_url)
        after = snapshot(work)
        outcome.violations += check_output(outcome) + check_files(case, outcome.exit_code, before, after)
        return outcome


def execute_in_process(case: Case) -> Outcome:
    """The same case and checks with gen's command line called in this process (gen.cli.main), for the cheap
    surfaces (source readers) where a process per example would spend its time importing gen. No rlimits
    here: only cases whose inputs are small go this way. An exception escaping main counts as the traceback a
    user would have seen."""
    import io

    if case.module != "gen":  # another program: only a process of its own runs it as its user would
        return execute(case)

    from tests.fuzz.server import serving

    with tempfile.TemporaryDirectory(prefix="gen-fuzz-") as tmp, serving(case.replies) as base_url:
        work = Path(tmp)
        lay_out(case, work, base_url)
        before = snapshot(work)
        out, err = io.StringIO(), io.StringIO()
        start = time.monotonic()
        with in_folder(work), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code, timed_out = call_main([arg.replace(BASE_URL, base_url) for arg in case.args], case.timeout_s)
        outcome = Outcome(case, code, out.getvalue(), err.getvalue(), time.monotonic() - start, 0.0, timed_out)
        if timed_out:
            outcome.violations.append(Violation("hang", f"still running after {case.timeout_s:g}s", "timeout"))
        after = snapshot(work)
        outcome.violations += check_output(outcome) + check_files(case, outcome.exit_code, before, after)
        return outcome


class TimedOut(BaseException):
    """Raised by the in-process run's alarm (a BaseException: gen's `except Exception` must not swallow it)."""


def call_main(args: list[str], timeout_s: float) -> tuple[int, bool]:
    """gen.cli.main with `args`: (exit code, timed out). An escaping exception is exit code 1 with its
    traceback on stderr, as Python ends a process with it."""
    import traceback

    from gen.cli import main

    def alarm(signum, frame):
        raise TimedOut

    previous_handler = signal.signal(signal.SIGALRM, alarm)
    signal.setitimer(signal.ITIMER_REAL, timeout_s)
    argv = sys.argv
    sys.argv = ["gen", *args]
    try:
        main()
        return 0, False
    except SystemExit as exc:
        return (exc.code if isinstance(exc.code, int) else 1), False
    except TimedOut:
        return -1, True
    except Exception:
        sys.stderr.write(traceback.format_exc())
        return 1, False
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous_handler)
        sys.argv = argv


@contextlib.contextmanager
def in_folder(work: Path) -> Iterator[None]:
    """cwd and gen's environment (cache, home, temp) set to `work` for the block, then put back."""
    previous_cwd, previous_env = os.getcwd(), dict(os.environ)
    os.chdir(work)
    os.environ.update({name: value for name, value in environment(work).items() if name != "PATH"})
    tempfile.tempdir = None  # so tempfile reads the new TMPDIR
    try:
        yield
    finally:
        os.chdir(previous_cwd)
        os.environ.clear()
        os.environ.update(previous_env)
        tempfile.tempdir = None


def lay_out(case: Case, work: Path, base_url: str) -> None:
    for relative, content in {**EARLIER_RUN, **case.files}.items():
        path = work / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.replace(BASE_URL.encode(), base_url.encode()))
    for relative in case.fifos:
        (work / relative).parent.mkdir(parents=True, exist_ok=True)
        os.mkfifo(work / relative)
    for relative, target in case.links:
        (work / relative).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, work / relative)
    (work / "tmp").mkdir(exist_ok=True)
    (work / "home").mkdir(exist_ok=True)


def limit_resources(cpu_seconds: int) -> None:
    """In the child before exec: the rlimits a hostile input must stay under, and no core files."""
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 5))
    resource.setrlimit(resource.RLIMIT_FSIZE, (FILE_SIZE_BYTES, FILE_SIZE_BYTES))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def environment(work: Path, terminal: bool = False) -> dict[str, str]:
    """gen's environment: this checkout on PYTHONPATH, and every place it may write by default inside `work`
    (the cache under the declared output `cache`, home and temp files in folders that are checked)."""
    keep = {name: value for name, value in os.environ.items() if name in ("PATH", "LANG", "LC_ALL", "SYSTEMROOT")}
    if terminal:
        keep["TERM"] = "xterm-256color"
    return {
        **keep,
        "PYTHONPATH": str(REPO),
        "GEN_CACHE_DIR": str(work / "cache"),
        "HOME": str(work / "home"),
        "TMPDIR": str(work / "tmp"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "HF_HOME": str(work / "cache" / "hf"),
        "NO_COLOR": "1",
        "COLUMNS": "200",
        "GEN_FUZZ_KEY": "sk-fuzz-SECRET-5f3a9c",
    }


def run_process(case: Case, work: Path, base_url: str) -> Outcome:
    """`python -m gen ARGS` in its own process group, under the rlimits; sends the case's signal at its
    instant; kills the group at the wall timeout. Peak RSS comes from wait4's rusage of the process."""
    args = [arg.replace(BASE_URL, base_url) for arg in case.args]
    out_path, err_path = work / "tmp" / ".fuzz-stdout", work / "tmp" / ".fuzz-stderr"
    start = time.monotonic()
    with out_path.open("wb") as out, err_path.open("wb") as err, stderr_for(case, err) as (stderr_to, drawn):
        process = subprocess.Popen(
            [sys.executable, "-m", case.module, *args],
            cwd=work,
            env=environment(work, case.terminal),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=stderr_to,
            start_new_session=True,
            preexec_fn=lambda: limit_resources(int(case.timeout_s) + 5),
        )
        status, usage, timed_out = wait_for(process, case, start)
    seconds = time.monotonic() - start
    stdout = out_path.read_text(encoding="utf-8", errors="replace")
    stderr = err_path.read_text(encoding="utf-8", errors="replace")
    out_path.unlink()
    err_path.unlink()
    code = os.waitstatus_to_exitcode(status)
    if case.terminal:
        stderr = bytes(drawn).decode("utf-8", errors="replace")
    outcome = Outcome(
        case, 128 - code if code < 0 else code, stdout, stderr, seconds, usage.ru_maxrss / 1024, timed_out
    )
    if case.terminal:
        outcome.violations += check_terminal(stderr)
        outcome.stderr = "\n".join(Screen.of(stderr).lines)  # what the user sees: the checks read that
    if timed_out:
        outcome.violations.append(Violation("hang", f"still running after {case.timeout_s:g}s", "timeout"))
    if left_behind(process.pid):
        outcome.violations.append(Violation("process", "processes of the run were still alive after it ended", ""))
    return outcome


@contextlib.contextmanager
def stderr_for(case: Case, err: Any) -> Iterator[tuple[Any, bytearray]]:
    """Where the run's stderr goes: the file `err`, or for a terminal case a pseudo-terminal of 200 columns,
    whose output a thread gathers while the run goes on (a full terminal would block the writer)."""
    drawn = bytearray()
    if not case.terminal:
        yield err, drawn
        return
    master, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 200, 0, 0))

    def gather() -> None:
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: every end of the terminal closed
                return
            if not chunk:
                return
            drawn.extend(chunk)

    reader = threading.Thread(target=gather, daemon=True)
    reader.start()
    try:
        yield follower, drawn
    finally:
        os.close(follower)
        reader.join(timeout=10)
        os.close(master)


def wait_for(process: subprocess.Popen, case: Case, start: float) -> tuple[int, resource.struct_rusage, bool]:
    sent = case.signal_at is None
    while True:
        pid, status, usage = os.wait4(process.pid, os.WNOHANG)
        if pid:
            process.returncode = os.waitstatus_to_exitcode(status)  # so Popen does not wait for it again
            return status, usage, False
        elapsed = time.monotonic() - start
        if not sent and case.signal_at is not None and elapsed >= case.signal_at[1] and catches_stops(process.pid):
            send(process.pid, case.signal_at[0])
            sent = True
        if elapsed > case.timeout_s:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            _, status, usage = os.wait4(process.pid, 0)
            process.returncode = os.waitstatus_to_exitcode(status)
            return status, usage, True
        time.sleep(0.01)


def catches_stops(pid: int) -> bool:
    """Whether gen's process has taken SIGTERM yet (gen/program.py takes the stop signals on its first line). No
    program can answer a signal that arrives before its code runs: on a loaded machine the interpreter may still
    be starting at `signal_at`, and a signal then ends it with no word, which says nothing about gen."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return True  # gone already, or no /proc: send, and let the outcome say what happened
    caught = next((line.split()[1] for line in status.splitlines() if line.startswith("SigCgt:")), None)
    return caught is None or bool(int(caught, 16) >> (signal.SIGTERM - 1) & 1)


def send(pid: int, signum: int) -> None:
    """Ctrl-C reaches the whole foreground process group, as a terminal sends it; SIGTERM and SIGHUP go to
    gen's process, as `kill` and a closed terminal send them."""
    with contextlib.suppress(ProcessLookupError):
        if signum == signal.SIGINT:
            os.killpg(pid, signum)
        else:
            os.kill(pid, signum)


def left_behind(group: int) -> bool:
    """Whether a process of the run's group outlived it (a worker or server gen started and did not end);
    they are killed either way, after a short grace for ones already on their way out."""
    for _ in range(50):
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        time.sleep(0.02)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGKILL)
    return True


TRACEBACK = "Traceback (most recent call last)"  # both in Python's and in rich's drawing of one
# a frame in gen's code, as Python prints it or as rich (typer's pretty tracebacks) draws it
FRAME = re.compile(r'File "[^"]*/(gen/[^"]+\.py)", line \d+, in (\S+)|/(gen/[\w/]+\.py):\d+ in (\S+)')
EXCEPTION_LINE = re.compile(r"^(\w+(?:\.\w+)*(?:Error|Exception|Interrupt|Exit|Warning))(?:: ?(.*))?$")


def check_output(outcome: Outcome) -> list[Violation]:
    """Exit code, no traceback, the one closing message, the peak memory."""
    found: list[Violation] = []
    code, stderr = outcome.exit_code, outcome.stderr
    if code not in ALLOWED_EXITS and not outcome.timed_out:  # a hang is reported as one, not as its kill
        found.append(Violation("exit-code", f"exit code {code}", f"exit {code}"))
    for stream in (stderr, outcome.stdout):
        if TRACEBACK in stream:
            found.append(Violation("traceback", last_line(stream), traceback_shape(stream)))
            break
    if code != 0 and not outcome.timed_out and TRACEBACK not in stderr:
        found += check_message(outcome)
    if outcome.peak_rss_mb > PEAK_RSS_MB:
        found.append(Violation("memory", f"peak RSS {outcome.peak_rss_mb:.0f} MB", "peak RSS"))
    return found


def check_message(outcome: Outcome) -> list[Violation]:
    message = closing_message(outcome.stderr)
    if not message.startswith(MESSAGE_STARTS):
        # one class whatever the last line happens to be (a progress line, nothing): the message is missing
        return [Violation("message", f"the last line is {message[:200]!r}", "no closing message")]
    if outcome.exit_code in SIGNAL_EXITS or message.startswith("Error:"):
        return []  # a signal's message names no input; click's usage error names the option under its usage line
    if outcome.case.names and not any(names_it(message, name) for name in outcome.case.names):
        return [
            Violation("names", f"{message[:200]!r} names none of {list(outcome.case.names)}", message_shape(message))
        ]
    return []


def names_it(message: str, name: str) -> bool:
    """Whether `name` stands in the message as a whole token (so "1" is named by "error: 1: no such file" but
    not by "line 12"), or quoted as Python writes it (a name of blanks, or with a character that does not print,
    counts only so: printed bare, nobody can see it)."""
    if repr(name) in message or (not name.isprintable() and repr(name)[1:-1] in message):
        return True  # quoted, or escaped inside a quoted path ('/tmp/.../data/\x1b[2Jred.jsonl')
    if not name.strip() or not name.isprintable():
        return False
    return re.search(rf"(?<![\w.-]){re.escape(name)}(?![\w-])", message) is not None


def closing_message(stderr: str) -> str:
    """The message a failed run ends with: its last line, or the line that an indented list continues (click's
    "Choose from:" and its choices, one per line)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    while len(lines) > 1 and lines[-1][:1].isspace() and not lines[-1].lstrip().startswith(MESSAGE_STARTS):
        lines.pop()
    return lines[-1].strip() if lines else ""


def last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def traceback_shape(text: str) -> str:
    """The exception's type and the innermost frame in gen's code: two tracebacks with these alike are one
    failure class, whatever the input that raised them."""
    tail = text[text.rindex(TRACEBACK) :]
    frames = [(plain or rich, function or drawn) for plain, function, rich, drawn in FRAME.findall(tail)]
    frames = [frame for frame in frames if not frame[1].startswith("<")]  # <listcomp>, <module>: say little
    where = f" at {frames[-1][0]}:{frames[-1][1]}" if frames else ""
    exception = next(
        (match[1] for line in reversed(tail.splitlines()) if (match := EXCEPTION_LINE.match(line.strip()))), "?"
    )
    return f"{exception}{where}"


def message_shape(message: str) -> str:
    """A message with its particulars (quoted values, paths, numbers) blanked, cut to its first words."""
    text = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", message)
    text = re.sub(r"(/[^\s:]+)+", "PATH", text)
    text = re.sub(r"\d+(\.\d+)?", "N", text)
    return " ".join(text.split()[:9])


# -- a terminal's screen ----------------------------------------------------------------------------------------
CONTROL = re.compile(r"\x1b\[([0-9;?]*)([A-Za-z])|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[()][A-Z0-9]|\x1b.|[\r\n\x08]")
HIDE_CURSOR, SHOW_CURSOR = "\x1b[?25l", "\x1b[?25h"


@dataclass
class Screen:
    """The lines a terminal shows after `text` was written to it (the moves rich's display makes: carriage
    return, line feed, cursor up, erase line), and where the cursor is left."""

    lines: list[str] = field(default_factory=lambda: [""])
    row: int = 0
    column: int = 0

    @classmethod
    def of(cls, text: str) -> Screen:
        screen = cls()
        position = 0
        for match in CONTROL.finditer(text):
            screen.write(text[position : match.start()])
            screen.control(match)
            position = match.end()
        screen.write(text[position:])
        return screen

    def write(self, text: str) -> None:
        if text:
            line = self.lines[self.row].ljust(self.column)
            self.lines[self.row] = line[: self.column] + text + line[self.column + len(text) :]
            self.column += len(text)

    def control(self, match: re.Match) -> None:
        token, final = match.group(0), match.group(2)
        if token == "\r":
            self.column = 0
        elif token == "\n":
            self.row += 1
            if self.row == len(self.lines):
                self.lines.append("")
        elif token == "\x08":
            self.column = max(0, self.column - 1)
        elif final == "A":
            self.row = max(0, self.row - int(match.group(1) or 1))
        elif final == "K":
            keep = 0 if match.group(1) == "2" else self.column
            self.lines[self.row] = self.lines[self.row][:keep]


def check_terminal(drawn: str) -> list[Violation]:
    """A run on a terminal leaves it clean: the cursor shown again if it was hidden, and the cursor at the start
    of a line (the last line ended, a display erased)."""
    found = []
    if HIDE_CURSOR in drawn and drawn.rfind(SHOW_CURSOR) < drawn.rfind(HIDE_CURSOR):
        found.append(Violation("terminal", "the cursor is left hidden", "cursor hidden"))
    screen = Screen.of(drawn)
    if screen.column != 0:
        tail = screen.lines[screen.row][-80:]
        found.append(Violation("terminal", f"the last line is not ended: {tail!r}", "line not ended"))
    return found


# -- the files ------------------------------------------------------------------------------------------------
def snapshot(work: Path) -> dict[str, str]:
    """Every path under `work` → a digest of its bytes (a folder, a FIFO or a link: its kind)."""
    found: dict[str, str] = {}
    for path in walk(work):
        relative = path.relative_to(work).as_posix()
        if path.is_symlink():
            found[relative] = "link:" + os.readlink(path)
        elif path.is_dir():
            found[relative] = "folder"
        elif path.is_file():
            found[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            found[relative] = "special"
    return found


def walk(folder: Path) -> Iterator[Path]:
    for path in sorted(folder.iterdir()):
        yield path
        if path.is_dir() and not path.is_symlink():
            yield from walk(path)


def under(relative: str, roots: tuple[str, ...]) -> bool:
    """Whether `relative` is one of `roots` or inside one (roots as given: "out/", "./out"; "." is the work folder,
    the place a case that names it as an output may write anywhere)."""
    normal = [os.path.normpath(root) for root in roots]
    return any(root == "." or relative == root or relative.startswith(root + "/") for root in normal)


def check_files(case: Case, code: int, before: dict[str, str], after: dict[str, str]) -> list[Violation]:
    """Nothing outside the declared outputs changed; the earlier run is intact; the temp folder is empty; a
    failed run left no new output but a kept `.<name>.stopped` folder."""
    found: list[Violation] = []
    changed = {path for path in before.keys() | after.keys() if before.get(path) != after.get(path)}
    earlier = sorted(path for path in changed if under(path, ("out/earlier-run",)))
    if earlier:
        found.append(Violation("earlier", f"an earlier run's files changed: {earlier[:5]}", ""))
    temp = sorted(path for path in changed if under(path, ("tmp",)) and path in after)
    if temp:
        found.append(Violation("temp", f"files left in TMPDIR: {temp[:5]}", ""))
    outside = sorted(
        path
        for path in changed
        if not under(path, (*case.outputs, "tmp", "out/earlier-run")) and not made_for(path, case.outputs, after)
    )
    if outside:
        found.append(Violation("outside", f"changed outside the outputs: {outside[:5]}", outside_shape(outside)))
    if code != 0:
        new = sorted(path for path in changed - before.keys() if unfinished(path, case.outputs, after))
        if new:
            found.append(Violation("partial", f"a failed run left new output: {new[:5]}", ""))
    return found


def made_for(path: str, outputs: tuple[str, ...], after: dict[str, str]) -> bool:
    """A new folder on the way to a declared output (`--output a/b/c` makes `a` and `a/b`, as mkdir -p would)."""
    return after.get(path) == "folder" and any(output.startswith(path.rstrip("/") + "/") for output in outputs)


def unfinished(path: str, outputs: tuple[str, ...], after: dict[str, str]) -> bool:
    """Whether a path that a failed run created is output it did not finish: a staging sibling
    (`.<name>.tmp-<pid>`, `.<name>.old-<pid>`, gen/folders.py) or a new file. A new visible folder is complete
    (gen renames a folder into place only once it is written); the cache and a kept `.<name>.stopped` folder
    are left on purpose."""
    if not under(path, outputs) or under(path, ("cache",)) or kept_stop(path) or "llm.sqlite" in path:
        return False  # the LLM cache (in `cache`, or where --cache-dir put it) keeps what was asked, on purpose
    top = next((root for root in outputs if under(path, (root,))), "")
    if path != top and "/" in path[len(top) + 1 :]:
        return False  # judged by its top entry in the output folder
    name = path.rsplit("/", 1)[-1]
    if re.search(r"\.(tmp|old)-\d+$|\.tmp$|partial", name):
        return True
    return after.get(path) != "folder"


def kept_stop(path: str) -> bool:
    """A path inside the `.<name>.stopped` folder a stopped run keeps on purpose (gen/pipeline/runner.py)."""
    return any(part.startswith(".") and part.endswith(".stopped") for part in path.split("/"))


def outside_shape(paths: list[str]) -> str:
    return ", ".join(sorted({path.split("/")[0] for path in paths}))
