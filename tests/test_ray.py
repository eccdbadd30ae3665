"""`gen run --executor ray`: the stage that needs no LLM as Ray tasks on a local Ray instance writes the
bytes `--executor local` writes, and the LLM stage stays in the driver (the same calls, one engine).

Each Ray test starts a local instance (a few seconds). Skipped, saying why, when `ray` cannot be imported
(`pip install -e '.[ray]'`; .ci/run installs it)."""

from __future__ import annotations

import contextlib
import json
import os
import sys
from pathlib import Path

import pytest

from gen.pipeline.executors import RayConnection, ray_shard_size
from tests.conftest import REPO, run_cli, write_recipe
from tests.fakes.openai_server import FakeOpenAI
from tests.test_llm_commands import KEY, plain_question, tcq_recipe
from tests.test_seam import run_folder_bytes

try:
    import ray
except ImportError as error:  # any failure to import is a reason to skip, and says which
    ray = None
    NO_RAY = f"ray cannot be imported ({error}); install it with pip install -e '.[ray]'"
else:
    NO_RAY = ""

needs_ray = pytest.mark.skipif(ray is None, reason=NO_RAY)
pytestmark = pytest.mark.ray


def comparable(folder: Path) -> dict[str, bytes]:
    """Every file of a run folder; run.json without timings and package versions (it names no cache path)."""
    files = run_folder_bytes(folder)  # drops run.json's timings_s and the recipe quoted in the card
    report = json.loads(files["run.json"])
    report.pop("packages")
    if "llm" in report:
        assert "path" not in report["llm"]["cache"]
        for step in report["llm"]["steps"].values():
            step.pop("seconds")
    files["run.json"] = json.dumps(report, sort_keys=True).encode()
    return files


@needs_ray
def test_the_quickstart_on_ray_writes_the_bytes_of_the_local_executor(tmp_path, monkeypatch, capsys):
    assert not ray.is_initialized()
    outputs = {}
    for executor in ("local", "ray"):
        if executor == "ray":  # from here on a shard run in this process fails: Ray's workers must run them
            monkeypatch.setattr(
                "gen.pipeline.executors.process_shard", lambda *_: pytest.fail("a shard ran in the driver")
            )
        code, _, err = run_cli(
            [
                "run",
                REPO / "recipes" / "quickstart.yaml",
                "--output-dir",
                tmp_path / executor,
                "--executor",
                executor,
                "--workers",
                "2",
            ],
            capsys,
        )
        assert code == 0, err
        outputs[executor] = comparable(tmp_path / executor / "quickstart")
    assert not ray.is_initialized()  # gen started its own instance, and shut it down
    assert outputs["ray"].keys() == outputs["local"].keys()
    for path in outputs["local"]:
        assert outputs["ray"][path] == outputs["local"][path], path
    assert len(outputs["ray"]["time_queries/test.jsonl"].splitlines()) > 100  # real work was done, not an empty run


def descendants_command_lines(pid: int) -> list[str]:
    """The command lines of every process below `pid`, read from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    lines, todo = [], list(children.get(pid, []))
    while todo:
        child = todo.pop()
        with contextlib.suppress(OSError):
            lines.append((Path("/proc") / str(child) / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        todo.extend(children.get(child, []))
    return lines


@needs_ray
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads the processes from /proc (Linux)")
def test_gens_own_ray_runs_without_the_autoscaler_and_log_monitors():
    connection = RayConnection(workers=1)
    try:
        running = descendants_command_lines(os.getpid())
    finally:
        connection.close()
    assert any("raylet" in line for line in running), running  # a real instance was started
    assert any("gcs_server" in line for line in running), running
    assert not [line for line in running if "monitor.py" in line]  # neither monitor.py nor log_monitor.py
    assert not ray.is_initialized()


@needs_ray
def test_gens_own_ray_declares_no_more_cpus_than_the_machine_has():
    connection = RayConnection(workers=256)
    try:
        declared = ray.cluster_resources().get("CPU")
    finally:
        connection.close()
    assert declared == os.cpu_count() and connection.workers == os.cpu_count()


@pytest.fixture
def ray_already_running():
    """A Ray instance started by the caller (as in a notebook): gen uses it and leaves it running."""
    assert not ray.is_initialized()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        yield
    finally:
        ray.shutdown()


@needs_ray
def test_with_ray_the_llm_stage_makes_the_calls_of_the_local_executor(
    ray_already_running, tmp_path, monkeypatch, capsys
):
    monkeypatch.setenv("GEN_TEST_KEY", KEY)
    with FakeOpenAI(plain_question) as server:
        recipe = tcq_recipe(tmp_path / "r.yaml", server.base_url)
        calls, outputs = {}, {}
        for executor in ("local", "ray"):
            first = server.count
            code, _, err = run_cli(
                [
                    "run",
                    recipe,
                    "--output-dir",
                    tmp_path / executor,
                    "--cache-dir",
                    tmp_path / f"cache-{executor}",  # an empty cache each: both runs make their calls
                    "--executor",
                    executor,
                ],
                capsys,
            )
            assert code == 0, err
            calls[executor] = sorted(request.key for request in server.requests[first:])
            outputs[executor] = comparable(tmp_path / executor / "tcq")
    assert ray.is_initialized()  # the caller's instance: gen used it and left it running
    # 2 conversations × 4 questions, each made once by the driver's engine, and the one structured-output probe
    assert len(calls["local"]) == 9
    assert calls["ray"] == calls["local"]
    assert outputs["ray"] == outputs["local"]
    report = json.loads((tmp_path / "ray" / "tcq" / "run.json").read_text())
    assert report["llm"]["steps"]["time_content_questions"]["calls_made"] == 8
    assert report["configs"]["time_content_questions"]["records"] == 8


def test_without_ray_the_ray_executor_is_one_error_naming_the_extra(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails as if Ray were not installed
    code, _, err = run_cli(
        ["run", REPO / "recipes" / "quickstart.yaml", "--output-dir", tmp_path, "--executor", "ray"], capsys
    )
    assert code == 2
    assert "pip install 'gen-memory[ray]'" in err and "Traceback" not in err
    assert err.count("\n") == 1 and not (tmp_path / "quickstart").exists()


def test_a_ray_address_needs_the_ray_executor(tmp_path, capsys):
    code, _, err = run_cli(
        ["run", REPO / "recipes" / "quickstart.yaml", "--output-dir", tmp_path, "--ray-address", "auto"], capsys
    )
    assert code == 2 and "--executor ray" in err


@needs_ray
def test_shards_of_several_conversations_with_donor_padding_write_the_local_bytes(tmp_path, capsys):
    """Many conversations: later shards hold several (sized from the first ones' time), each task carries only
    the conversations it reads, and the lines come back through the spool folder."""
    from tests.test_store import copies_of_the_sample

    recipe = write_recipe(
        tmp_path / "r.yaml",
        {
            "name": "many",
            "seed": 11,
            "sources": [{"format": "locomo", "path": str(copies_of_the_sample(tmp_path / "c.json", 40))}],
            "timeline": {"padding": {"mode": "donor", "target_words": 2500}},
            "products": [{"type": "log"}, {"type": "time_queries"}],
        },
    )
    outputs = {}
    for executor in ("local", "ray"):
        code, _, err = run_cli(
            ["run", recipe, "--output-dir", tmp_path / executor, "--executor", executor, "--workers", "2"], capsys
        )
        assert code == 0, err
        outputs[executor] = comparable(tmp_path / executor / "many")
    assert outputs["ray"] == outputs["local"]
    assert json.loads(outputs["local"]["run.json"])["configs"]["log"]["records"] > 40 * 20
    assert not ray.is_initialized()


def test_ray_shards_take_a_tenth_of_a_second_and_leave_four_per_cpu():
    assert ray_shard_size(seconds=0.0, done=0, left=1000, width=2) == 1  # nothing measured yet: one
    assert ray_shard_size(seconds=0.0, done=5, left=1000, width=2) == 64  # no time measured: the cap
    assert ray_shard_size(seconds=3.3, done=100, left=1000, width=2) == 3  # 33 ms each: 3 in 0.1 s
    assert ray_shard_size(seconds=0.1, done=100, left=10_000, width=2) == 64  # 1 ms each: 100, capped at 64
    assert ray_shard_size(seconds=0.1, done=100, left=80, width=2) == 10  # 80 left for 2 CPUs: 4 shards each
    assert ray_shard_size(seconds=50.0, done=10, left=3, width=2) == 1  # slower than the target: one each
