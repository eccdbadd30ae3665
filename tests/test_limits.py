"""Hostile input never costs memory, time or a traceback: each case runs `gen validate` in a process with a 2 GB
address-space limit and a timeout, so a regression fails here instead of swapping, and the message names the file,
the record and the line and column, worked out by hand from how each file is written."""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, write_recipe

MEMORY_LIMIT = 2 * 1024**3


def limited(*args: str, cwd) -> subprocess.CompletedProcess[str]:
    def cap_memory() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))

    return subprocess.run(
        [sys.executable, "-m", "gen", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        preexec_fn=cap_memory,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )


def validate(tmp_path, name: str, text: str, source_format: str = "locomo") -> subprocess.CompletedProcess[str]:
    (tmp_path / name).write_text(text, encoding="utf-8")
    recipe = {"name": "hostile", "sources": [{"format": source_format, "path": name}], "products": [{"type": "log"}]}
    write_recipe(tmp_path / "r.yaml", recipe)
    return limited("validate", "r.yaml", cwd=tmp_path)


CASES = [
    # 100,000 "[": the list's own "[" is column 1, its item starts at column 2, and the item's 65th level opens
    # at column 2 + 64 = 66
    ("deep.json", "[" * 100_000, "locomo", "item 0, line 1, column 66: nested more than 64 levels deep"),
    # '{"a":' repeated: five characters a level, so the 65th "{" is at offset 64 * 5 = 320, column 321
    ("chain.json", '{"a":' * 20_000, "locomo", "line 1, column 321: nested more than 64 levels deep"),
    # JSON lines: the first line is the chain again
    ("deep.jsonl", '{"a":' * 20_000 + "\n{}\n", "cc", "line 1, column 321: nested more than 64 levels deep"),
    # a key twice in one object
    (
        "twice.json",
        '[{"sample_id": "a", "sample_id": "b", "conversation": {}}]',
        "locomo",
        "item 0: the key 'sample_id' appears twice in one object",
    ),
    # NaN on line 3, after two spaces of indent and '"speaker_a": '
    (
        "nan.json",
        '[\n {"conversation": {\n  "speaker_a": NaN}}]',
        "locomo",
        "item 0, line 3, column 16: NaN is not a JSON number",
    ),
    ("inf.json", '{"speaker_a": -Infinity}', "locomo", "line 1, column 15: -Infinity is not a JSON number"),
]


@pytest.mark.parametrize(("name", "text", "source_format", "said"), CASES, ids=[case[0] for case in CASES])
def test_hostile_json_is_refused_at_once_with_its_place(tmp_path, name, text, source_format, said):
    done = validate(tmp_path, name, text, source_format)
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"error: {tmp_path / name}: {said}"), done.stderr
    assert "Traceback" not in done.stderr


def test_nesting_of_64_levels_is_accepted(tmp_path):
    """The limit is on depth past 64: a sample with a field 63 levels deep (64 with the sample) is read."""
    sample = '{"sample_id": "s", "deep": ' + "[" * 63 + "]" * 63 + ', "conversation": {"speaker_a": "A", '
    sample += '"speaker_b": "B", "session_1_date_time": "1:56 pm on 8 May, 2023", "session_1": ['
    sample += '{"speaker": "A", "dia_id": "D1:1", "text": "hi"}]}}'
    done = validate(tmp_path, "ok.json", f"[{sample}]")
    assert "1 of 1 conversations" in done.stderr and "nested" not in done.stderr, done.stderr


# --- the locale of the program gen runs in changes nothing --------------------------------------------------


@pytest.fixture(scope="module")
def german(tmp_path_factory):
    """A German locale compiled into a temporary folder (LOCPATH), so no system change is needed; skipped where
    the machine has no localedef or no locale sources."""
    import shutil

    if shutil.which("localedef") is None or not Path("/usr/share/i18n/locales/de_DE").exists():
        pytest.skip("no localedef or no de_DE locale source on this machine to build a non-English locale from")
    folder = tmp_path_factory.mktemp("locales")
    made = subprocess.run(["localedef", "-i", "de_DE", "-f", "UTF-8", str(folder / "de_DE.UTF-8")], capture_output=True)
    if made.returncode not in (0, 1):  # 1: warnings only
        pytest.skip(f"localedef could not build de_DE.UTF-8: {made.stderr.decode()[:200]}")
    return {"LOCPATH": str(folder), "LC_ALL": "de_DE.UTF-8"}


EMBEDDED = """
import datetime, locale, sys
locale.setlocale(locale.LC_ALL, "")  # as a program that embeds gen may do
print(datetime.date(2023, 5, 8).strftime("%A %B"), file=sys.stderr)
from gen.cli import main
sys.argv = ["gen", "run", sys.argv[1], "--output-dir", "out"]
main()
"""


def test_the_quickstart_is_the_same_bytes_under_a_german_locale(tmp_path, german):
    runs = {}
    for name, env in (("german", german), ("plain", {"LC_ALL": "C"})):
        folder = tmp_path / name
        folder.mkdir()
        done = subprocess.run(
            [sys.executable, "-c", EMBEDDED, str(REPO / "recipes" / "quickstart.yaml")],
            capture_output=True,
            text=True,
            cwd=folder,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", **env},
            timeout=300,
        )
        assert done.returncode == 0, done.stderr
        runs[name] = {p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
        report = json.loads(runs[name]["out/quickstart/run.json"])
        report.pop("timings_s")  # how long each step took: the one thing two runs never share
        runs[name]["out/quickstart/run.json"] = json.dumps(report).encode()
        runs[name + " weekday"] = done.stderr.splitlines()[0]
    assert runs["german weekday"] == "Montag Mai" and runs["plain weekday"] == "Monday May"  # the locale took effect
    assert runs["german"].keys() == runs["plain"].keys()
    different = [path for path in runs["plain"] if runs["german"][path] != runs["plain"][path]]
    assert different == []


# --- a URL's secrets never reach a message --------------------------------------------------------------------


@pytest.mark.parametrize(
    "base_url",
    [
        "https://user:s3cret-pass@llm.example.org/v1",
        "https://llm.example.org/v1?api_key=s3cret-pass",
        "ftp://s3cret-pass@x/",
    ],
)
def test_a_refused_base_url_is_quoted_without_its_secrets(tmp_path, base_url):
    recipe = {
        "name": "creds",
        "sources": [{"format": "locomo", "path": str(REPO / "gen" / "data" / "sample_locomo.json")}],
        "llm": {"main": {"model": "m", "base_url": base_url}},
        "products": [{"type": "log"}],
    }
    write_recipe(tmp_path / "r.yaml", recipe)
    done = limited("validate", "r.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "llm.main.base_url" in done.stderr
    assert "s3cret-pass" not in done.stdout + done.stderr and "***" in done.stderr


# --- a recipe's own templates: bounded in size and time, errors named with file and line ----------------------

TEMPLATE_CASES = [
    ("{% for i in range(10**9) %}x{% endfor %}", "OverflowError"),
    ("{% for i in range(20000) %}x{% endfor %}", "a range of 20,000 items, more than 10,000"),
    ('{{ "".__class__.__mro__ }}', "SecurityError: access to attribute '__class__'"),
    ('{% for i in range(9000) %}{{ "x" * 9000 }}{% endfor %}', "the output passed 5,000,000 characters"),
    ("{{ 1 / 0 }}", "ZeroDivisionError"),
    # three nested loops of 9,000 print nothing for hours: stopped by the time limit
    (
        "{% for i in range(9000) %}{% for j in range(9000) %}{% for k in range(9000) %}{% endfor %}{% endfor %}"
        "{% endfor %}",
        "it ran past 10 s",
    ),
]


@pytest.mark.parametrize(("body", "said"), TEMPLATE_CASES, ids=[said.split(":")[0][:24] for _, said in TEMPLATE_CASES])
def test_a_hostile_template_is_one_error_with_its_file_and_line(tmp_path, body, said):
    frames = tmp_path / "mine" / "time_queries" / "frames.j2"
    frames.parent.mkdir(parents=True)
    frames.write_text("What did we discuss {{ time }}?\n" + body + "\n")  # the hostile line is line 2
    recipe = {
        "name": "templated",
        "templates_dir": "mine",
        "sources": [{"format": "locomo", "path": str(REPO / "gen" / "data" / "sample_locomo.json")}],
        "products": [{"type": "time_queries", "tests": ["session"]}],
    }
    write_recipe(tmp_path / "r.yaml", recipe)
    done = limited("run", "r.yaml", "--output-dir", "out", cwd=tmp_path)
    assert done.returncode == 2, done.stderr
    assert f"{frames}: " in done.stderr and said in done.stderr and "Traceback" not in done.stderr
    if "output passed" not in said:  # the output limit is met between chunks, not on a line
        assert f"{frames}: line 2: the template could not be rendered" in done.stderr


def test_a_recipe_nested_past_64_levels_is_refused_with_its_place(tmp_path):
    # "a: " then 100 flow lists: the 65th collection (the mapping is the first) opens at column 4 + 63 = 67
    (tmp_path / "r.yaml").write_text("a: " + "[" * 100 + "]" * 100 + "\n")
    done = limited("validate", "r.yaml", cwd=tmp_path)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "r.yaml: line 1, column 67: nested deeper than 64 lists or mappings" in done.stderr
