"""`gen view` on bad input (one message, exit 2, no traceback), without its extra, and on the folders that are
not a finished run: one still being written and a `gen push --export-dir` export. Plain HTTP, no browser; the
counts are the JSON lines' own."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import sys

from tests.conftest import REPO, gen_subprocess, read_jsonl, requires_extra
from tests.view.viewer import VIEW_MODULES, fetch, running_viewer, wait_indexed

needs_view = requires_extra("view", *VIEW_MODULES)


def one_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ")
    return line


def test_without_the_extra_it_says_how_to_install_it(tmp_path):
    # a module set to None in sys.modules is one Python cannot import, whatever this machine has installed
    code = "import sys; sys.modules['duckdb'] = None; sys.argv = ['gen', 'view', sys.argv[1]]; " + (
        "from gen.cli import main; main()"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=REPO, timeout=120
    )
    line = one_error(done)
    assert "duckdb" in line and "pip install 'gen-memory[view]'" in line


@needs_view
def test_a_folder_that_is_not_a_run_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("mine\n")
    line = one_error(gen_subprocess("view", tmp_path, "--port", "0"))
    assert str(tmp_path) in line and "not a run folder" in line


@needs_view
def test_a_port_in_use_is_refused(run_folder):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        line = one_error(gen_subprocess("view", run_folder, "--port", port))
    assert f"port {port}" in line and "in use" in line


@needs_view
def test_a_half_written_config_is_refused(run_folder, tmp_path):
    copy = tmp_path / "half"
    shutil.copytree(run_folder, copy)
    data = copy / "time_queries" / "test.jsonl"
    whole = data.read_bytes()
    data.write_bytes(whole[: len(whole) - 40])  # the last record loses its end
    line = one_error(gen_subprocess("view", copy, "--port", "0"))
    assert str(data) in line and "cut off" in line


@needs_view
def test_a_run_still_being_written_shows_its_whole_records(run_folder, tmp_path):
    writing = tmp_path / ".quickstart.tmp-4242"
    shutil.copytree(run_folder, writing)
    for name in ("run.json", "README.md", "rejects.jsonl"):  # written at the end of a run
        (writing / name).unlink()
    (writing / ".gen-files.json").write_text(json.dumps({"written_by": "gen", "files": None}))
    data = writing / "log" / "test.jsonl"
    whole = data.read_bytes()
    data.write_bytes(whole + whole.splitlines(keepends=True)[0][:50])  # the writer is in the middle of a line
    expected = whole.count(b"\n")
    with running_viewer(writing) as url:
        wait_indexed(url)
        status, page = fetch(url + "/records/log")
        assert status == 200
        assert re.search(r'id="match-count" data-count="(\d+)"', page)[1] == str(expected)  # type: ignore[index]
        assert "still being written" in fetch(url + "/")[1]


@needs_view
def test_an_export_folder_opens_with_its_parquet_records(run_folder, tmp_path):
    export = tmp_path / "export"
    done = gen_subprocess("push", run_folder, "--repo-id", "me/quickstart", "--dry-run", "--export-dir", export)
    assert done.returncode == 0, done.stderr
    expected = len(read_jsonl(run_folder / "time_queries" / "test.jsonl"))
    question = read_jsonl(run_folder / "time_queries" / "test.jsonl")[5]
    with running_viewer(export) as url:
        wait_indexed(url)
        status, page = fetch(url + "/records/time_queries")
        assert status == 200 and "export folder" in page
        assert re.search(r'id="match-count" data-count="(\d+)"', page)[1] == str(expected)  # type: ignore[index]
        status, page = fetch(f"{url}/questions/time_queries/{question['question_id']}")
        assert status == 200
        marked = re.findall(r'class="response relevant[^"]*" data-response-index="(\d+)"', page)
        assert sorted(map(int, marked)) == sorted(question["relevant_response_indices"])


# -- the index: kept between starts, nothing left in TMPDIR ----------------------------------------------------
def writing_copy(run_folder, tmp_path):
    """A copy of the run as gen leaves a folder it is still writing (no run.json, gen's marker)."""
    writing = tmp_path / ".quickstart.tmp-4242"
    shutil.copytree(run_folder, writing)
    for name in ("run.json", "README.md", "rejects.jsonl"):
        (writing / name).unlink()
    (writing / ".gen-files.json").write_text(json.dumps({"written_by": "gen", "files": None}))
    return writing


@needs_view
def test_ctrl_c_leaves_nothing_in_tmpdir_and_keeps_a_finished_runs_index(run_folder, tmp_path):
    tmpdir, cache = tmp_path / "tmp", tmp_path / "cache"
    tmpdir.mkdir()
    env = {"TMPDIR": str(tmpdir), "GEN_CACHE_DIR": str(cache)}
    for folder in (run_folder, writing_copy(run_folder, tmp_path)):
        with running_viewer(folder, env=env) as url:  # stopped with SIGINT, as Ctrl-C does
            wait_indexed(url)
            assert fetch(url + "/records/log?sort=text&desc=1&page=2")[0] == 200
            assert fetch(url + "/records/log?q=marathon")[0] == 200
        assert list(tmpdir.iterdir()) == [], folder
    [entry] = (cache / "view").iterdir()  # the finished run's index, and only its
    kept = sorted(path.name for path in entry.iterdir() if not path.name.startswith("."))
    assert "index.duckdb" in kept and "stamp.json" in kept and "spill" not in kept
    words = [name for name in kept if name.startswith("search-") and name.endswith(".sqlite")]  # and SQLite's logs
    assert len(words) == len(json.loads((run_folder / "run.json").read_text())["configs"])


@needs_view
def test_the_index_is_built_once_per_unchanged_run(run_folder, tmp_path, monkeypatch):
    from gen.view import index as index_module
    from gen.view.folder import open_folder

    monkeypatch.setenv("GEN_CACHE_DIR", str(tmp_path / "cache"))
    copy = tmp_path / "run"
    shutil.copytree(run_folder, copy)
    imported: list[str] = []
    real_import = index_module.import_sql
    monkeypatch.setattr(index_module, "import_sql", lambda config: imported.append(config.name) or real_import(config))

    def start() -> dict[str, int | None]:
        index = index_module.Index(open_folder(copy))
        try:
            index.start()
            index.thread.join(timeout=120)
            return {name: state.rows for name, state in index.states.items()}
        finally:
            index.close()

    first = start()
    assert sorted(imported) == sorted(json.loads((copy / "run.json").read_text())["configs"])
    imported.clear()
    assert start() == first and imported == []  # unchanged: read from the cache
    log = copy / "log" / "test.jsonl"
    log.write_bytes(log.read_bytes())  # the same bytes, written again: a new modification time
    assert start() == first and sorted(imported) == sorted(first.keys() - {"(rejects)"})  # rebuilt
