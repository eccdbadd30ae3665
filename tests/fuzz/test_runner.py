"""The fuzz runner's own checks, on outcomes and folders made by hand: each promise it checks is caught when
broken, so a green fuzz run means the promises held, not that nothing was looked at."""

from __future__ import annotations

from tests.fuzz.runner import (
    Case,
    Outcome,
    Screen,
    check_files,
    check_output,
    check_terminal,
    closing_message,
    names_it,
    traceback_shape,
)

CASE = Case("test", ("run", "recipe.yaml"), names=("recipe.yaml",))


def outcome(code: int, stderr: str, rss: float = 100.0) -> Outcome:
    return Outcome(CASE, code, "", stderr, 1.0, rss, False)


def kinds(found) -> list[str]:
    return [violation.kind for violation in found]


def test_a_clean_failure_naming_the_recipe_passes():
    assert check_output(outcome(2, "warning: x\nerror: recipe.yaml: products: not a list\n")) == []


def test_each_broken_promise_of_the_output_is_caught():
    assert kinds(check_output(outcome(3, "error: recipe.yaml: x\n"))) == ["exit-code"]
    assert kinds(check_output(outcome(2, "error: the products are not a list\n"))) == ["names"]
    assert kinds(check_output(outcome(2, "wrote out/x\n"))) == ["message"]
    assert kinds(check_output(outcome(0, "done\n", rss=4000))) == ["memory"]
    traceback = "Traceback (most recent call last):\n  File \"/x/gen/sources/cc.py\", line 3, in parse\nKeyError: 'a'\n"
    assert kinds(check_output(outcome(1, traceback))) == ["traceback"]


def test_a_traceback_is_classed_by_its_type_and_innermost_frame_in_gen():
    plain = (
        'Traceback (most recent call last):\n  File "/r/gen/cli.py", line 9, in main\n'
        '  File "/r/gen/sources/cc.py", line 3, in parse\n  File "/usr/lib/json/x.py", line 1, in f\n'
        "ValueError: bad\n"
    )
    assert traceback_shape(plain) == "ValueError at gen/sources/cc.py:parse"
    rich = "╭── Traceback (most recent call last) ──╮\n│ /r/gen/jsonl.py:80 in encode_lines │\n╰──╯\nTypeError: x\n"
    assert traceback_shape(rich) == "TypeError at gen/jsonl.py:encode_lines"


def test_clicks_choice_list_belongs_to_its_message():
    stderr = "Usage: gen x\n\nError: Missing option '--format'. Choose from:\n\tlocomo,\n\tbeir\n"
    assert closing_message(stderr) == "Error: Missing option '--format'. Choose from:"


def test_each_broken_promise_of_the_files_is_caught():
    before = {"recipe.yaml": "a", "out": "folder", "out/earlier-run": "folder", "out/earlier-run/run.json": "r"}
    assert check_files(CASE, 0, before, dict(before)) == []
    changed_input = {**before, "recipe.yaml": "b"}
    assert kinds(check_files(CASE, 0, before, changed_input)) == ["outside"]
    new_elsewhere = {**before, "home": "folder", "home/.cache": "folder"}
    assert kinds(check_files(CASE, 0, before, new_elsewhere)) == ["outside"]
    earlier = {**before, "out/earlier-run/run.json": "changed"}
    assert kinds(check_files(CASE, 0, before, earlier)) == ["earlier"]
    staging = {**before, "out/.x.tmp-12": "folder", "out/.x.tmp-12/log": "folder"}
    assert kinds(check_files(CASE, 143, before, staging)) == ["partial"]
    assert check_files(CASE, 0, before, staging) == []  # judged only when the run failed
    kept = {**before, "out/.x.stopped": "folder", "out/.x.stopped/run.json": "s", "out/x": "folder"}
    assert check_files(CASE, 1, before, kept) == []
    assert kinds(check_files(CASE, 0, before, {**before, "tmp": "folder", "tmp/left": "t"})) == ["temp"]


def test_a_terminal_left_clean_passes_and_each_way_of_leaving_it_dirty_is_caught():
    """As rich draws a transient display: hide the cursor, draw, erase the row, show the cursor, then the message."""
    clean = "\x1b[?25l\r\x1b[2Kreading chats.csv ━━ 0:00:00\r\x1b[2K\x1b[?25h\rerror: chats.csv: line 2\r\n"
    assert check_terminal(clean) == []
    assert Screen.of(clean).lines == ["error: chats.csv: line 2", ""]
    assert kinds(check_terminal("\x1b[?25l\r\x1b[2Kreading chats.csv ━━\r\n")) == ["terminal"]  # cursor hidden
    assert kinds(check_terminal("\x1b[?25l\rreading chats.csv ━━\x1b[?25h")) == ["terminal"]  # line not ended
    up = "first\r\nsecond\r\n\x1b[1A\x1b[2Kthird\r\n"  # up one row, erased, written over
    assert Screen.of(up).lines == ["first", "third", ""]


def test_a_name_that_does_not_print_counts_only_quoted_or_escaped():
    assert names_it("error: '/w/data/\\x1b[2Jred.jsonl': line 2: x", "\x1b[2Jred.jsonl")
    assert not names_it("error: /w/data/\x1b[2Jred.jsonl: line 2: x", "\x1b[2Jred.jsonl")  # printed raw: unseen
