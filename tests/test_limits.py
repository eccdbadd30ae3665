"""Hostile input never costs memory, time or a traceback: each case runs `gen validate` in a process with a 2 GB
address-space limit and a timeout, so a regression fails here instead of swapping, and the message names the file,
the record and the line and column, worked out by hand from how each file is written."""

from __future__ import annotations

import resource
import subprocess
import sys

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
