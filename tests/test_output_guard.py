"""gen never writes inside what it reads (gen/write_guard.py), and a folder it publishes is replaced whole or not
at all (gen/folders.py's NewFolder).

Every command that writes is tried with an output that is one of its inputs, lies inside an input folder, holds
an input, or reaches one through a symbolic link, `..` or a hard link: each is refused with exit 2 and one message
naming the option and the input, and nothing under the test's folder changes (every file, folder and link is
compared before and after, byte for byte). Then `push --export-dir` and `gen export` are interrupted (SIGKILL at
chosen instants, a full disk) and must leave the earlier export whole, with the next command succeeding."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

import gen
from gen.errors import GenError
from gen.export.hub_folder import build_export
from gen.pipeline.options import RunOptions
from gen.pipeline.runner import run
from gen.recipe import load_recipe
from tests.conftest import REPO, gen_subprocess, run_cli, write_recipe

SAMPLE = REPO / "gen" / "data" / "sample_locomo.json"


def snapshot(folder: Path) -> dict[str, object]:
    """Everything under `folder`: each file's bytes, each link's target, each folder (links are not followed)."""
    found: dict[str, object] = {}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = Path(root) / name
            key = path.relative_to(folder).as_posix()
            if path.is_symlink():
                found[key] = ("link", os.readlink(path))
            elif path.is_dir():
                found[key] = "folder"
            else:
                found[key] = path.read_bytes()
    return found


@pytest.fixture(scope="module")
def small_run(tmp_path_factory) -> Path:
    """A finished run with the log and conversations of the bundled sample (fast to build and to export)."""
    folder = tmp_path_factory.mktemp("small")
    recipe = yaml.safe_load((REPO / "recipes" / "quickstart.yaml").read_text())
    recipe["sources"][0]["path"] = str(SAMPLE)
    recipe["products"] = [{"type": "log"}, {"type": "conversations"}]
    return run(load_recipe(write_recipe(folder / "quickstart.yaml", recipe)), RunOptions(output_dir=folder / "out"))


@pytest.fixture
def world(small_run, tmp_path) -> SimpleNamespace:
    """Inputs of every kind under tmp_path: a run folder (a dataset), a predictions, answers and results file, an
    export folder, a corpus file, a templates folder and a recipe reading both."""
    dataset = tmp_path / "run"
    shutil.copytree(small_run, dataset)
    predictions = tmp_path / "preds.jsonl"
    predictions.write_text('{"question_id": "q1", "retrieved": [0]}\n')
    answers = tmp_path / "answers.jsonl"
    answers.write_text('{"question_id": "q1", "answer": "yes"}\n')
    results = tmp_path / "results.json"
    results.write_text("{}\n")
    export = tmp_path / "export"
    export.mkdir()
    (export / "gen-export.json").write_text("{}\n")
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    shutil.copy(SAMPLE, corpus / "talks.json")
    templates = tmp_path / "templates"
    templates.mkdir()
    (templates / "keep.txt").write_text("mine")
    return SimpleNamespace(
        tmp=tmp_path,
        dataset=dataset,
        predictions=predictions,
        answers=answers,
        results=results,
        export=export,
        corpus=corpus,
        templates=templates,
    )


def recipe(w: SimpleNamespace, name: str, at: Path | None = None, source: Path | None = None) -> Path:
    """A log recipe called `name`, written at `at`, reading the corpus file and the templates folder."""
    data = {
        "name": name,
        "seed": 1,
        "sources": [{"format": "locomo", "path": str(source or w.corpus / "talks.json")}],
        "timeline": {"padding": {"mode": "none"}},
        "templates_dir": str(w.templates),
        "products": [{"type": "log"}],
    }
    path = at or w.tmp / "recipes" / "r.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


def alias(w: SimpleNamespace, target: Path) -> Path:
    """A symbolic link to `target`, in a folder of its own."""
    link = w.tmp / "aliases" / f"to-{target.name}"
    link.parent.mkdir(exist_ok=True)
    link.symlink_to(target)
    return link


def hard_link(w: SimpleNamespace, target: Path) -> Path:
    link = w.tmp / "hard" / target.name
    link.parent.mkdir(exist_ok=True)
    os.link(target, link)
    return link


# (command line, the option refused, the input it names), built from the world's paths
Case = Callable[[SimpleNamespace], tuple[list, str, Path]]

CASES: dict[str, Case] = {
    # gen run: the run folder, the cache (and the log beside it), the batch request folder
    "run: the run folder is the source file": lambda w: (
        ["run", recipe(w, "talks.json"), "--output-dir", w.corpus],
        "--output-dir",
        w.corpus / "talks.json",
    ),
    "run: the run folder holds the source": lambda w: (
        ["run", recipe(w, "corpus"), "--output-dir", w.tmp],
        "--output-dir",
        w.corpus / "talks.json",
    ),
    "run: the run folder lies inside the templates folder": lambda w: (
        ["run", recipe(w, "new"), "--output-dir", w.templates / "out"],
        "--output-dir",
        w.templates,
    ),
    "run: the run folder holds the recipe": lambda w: (
        ["run", recipe(w, "r", at=w.tmp / "out" / "r" / "recipe.yaml"), "--output-dir", w.tmp / "out"],
        "--output-dir",
        w.tmp / "out" / "r" / "recipe.yaml",
    ),
    "run: the run folder is a link to the corpus folder": lambda w: (
        ["run", recipe(w, "to-corpus"), "--output-dir", alias(w, w.corpus).parent],
        "--output-dir",
        w.corpus / "talks.json",
    ),
    "run: the cache lies inside a link to the templates folder": lambda w: (
        ["run", recipe(w, "new"), "--output-dir", w.tmp / "out", "--cache-dir", alias(w, w.templates) / "cache"],
        "--cache-dir",
        w.templates,
    ),
    "run: the cache lies inside the templates folder, through ..": lambda w: (
        ["run", recipe(w, "new"), "--output-dir", w.tmp / "out", "--cache-dir", w.corpus / ".." / "templates"],
        "--cache-dir",
        w.templates,
    ),
    "run: the batch requests go into the templates folder": lambda w: (
        ["run", recipe(w, "new"), "--output-dir", w.tmp / "out", "--batch-export", w.templates],
        "--batch-export",
        w.templates,
    ),
    "run: the cache lies inside the run folder": lambda w: (
        ["run", recipe(w, "new"), "--output-dir", w.tmp / "out", "--cache-dir", w.tmp / "out" / "new" / "cache"],
        "--cache-dir",
        w.tmp / "out" / "new",
    ),
    # gen push --export-dir
    "push: the export folder is the run folder": lambda w: (
        ["push", w.dataset, "--repo-id", "me/x", "--dry-run", "--export-dir", w.dataset],
        "--export-dir",
        w.dataset,
    ),
    "push: the export folder lies inside the run folder": lambda w: (
        ["push", w.dataset, "--repo-id", "me/x", "--dry-run", "--export-dir", w.dataset / "export"],
        "--export-dir",
        w.dataset,
    ),
    "push: the export folder holds the run folder": lambda w: (
        ["push", w.dataset, "--repo-id", "me/x", "--dry-run", "--export-dir", w.tmp],
        "--export-dir",
        w.dataset,
    ),
    "push: the export folder lies inside a link to the run folder": lambda w: (
        ["push", w.dataset, "--repo-id", "me/x", "--dry-run", "--export-dir", alias(w, w.dataset) / "export"],
        "--export-dir",
        w.dataset,
    ),
    "push: the export folder is the run folder through ..": lambda w: (
        ["push", w.dataset, "--repo-id", "me/x", "--dry-run", "--export-dir", w.dataset / "log" / ".."],
        "--export-dir",
        w.dataset,
    ),
    # gen export --output
    "export: the output is the dataset": lambda w: (
        ["export", w.dataset, "--format", "beir", "--output", w.dataset],
        "--output",
        w.dataset,
    ),
    "export: the output lies inside the dataset": lambda w: (
        ["export", w.dataset, "--format", "locomo", "--output", w.dataset / "locomo"],
        "--output",
        w.dataset,
    ),
    "export: the output holds the dataset": lambda w: (
        ["export", w.dataset, "--format", "longmemeval", "--output", w.tmp],
        "--output",
        w.dataset,
    ),
    "export: the output is a link to the dataset": lambda w: (
        ["export", w.dataset, "--format", "locomo", "--output", alias(w, w.dataset)],
        "--output",
        w.dataset,
    ),
    # gen eval --json / --csv
    "eval: --json is the predictions": lambda w: (
        ["eval", w.dataset, "--predictions", w.predictions, "--json", w.predictions],
        "--json",
        w.predictions,
    ),
    "eval: --json is the run.json of the run it scores": lambda w: (
        ["eval", w.dataset, "--predictions", w.predictions, "--json", w.dataset / "run.json"],
        "--json",
        w.dataset,
    ),
    "eval: --csv lies inside the dataset": lambda w: (
        ["eval", w.dataset, "--predictions", w.predictions, "--csv", w.dataset / "scores.csv"],
        "--csv",
        w.dataset,
    ),
    "eval: --json lies inside the --questions-from export": lambda w: (
        ["eval", w.dataset, "--predictions", w.predictions, "--questions-from", w.export, "--json", w.export / "s"],
        "--json",
        w.export,
    ),
    "eval: --csv is a link to the predictions": lambda w: (
        ["eval", w.dataset, "--predictions", w.predictions, "--csv", alias(w, w.predictions)],
        "--csv",
        w.predictions,
    ),
    "eval: --json is a hard link to the predictions": lambda w: (
        ["eval", w.dataset, "--predictions", w.predictions, "--json", hard_link(w, w.predictions)],
        "--json",
        w.predictions,
    ),
    "eval: --json and --csv are one file": lambda w: (
        ["eval", w.dataset, "--predictions", w.predictions, "--json", w.tmp / "s", "--csv", w.tmp / "s"],
        "--csv",
        w.tmp / "s",
    ),
    # gen baseline --output
    "baseline: the output is a data file of the dataset": lambda w: (
        ["baseline", "recent", w.dataset, "--output", w.dataset / "log" / "test.jsonl"],
        "--output",
        w.dataset,
    ),
    "baseline --turns: the output lies inside a link to the dataset": lambda w: (
        ["baseline", "recent", w.dataset, "--turns", "--output", alias(w, w.dataset) / "turns.jsonl"],
        "--output",
        w.dataset,
    ),
    # gen import-predictions --output
    "import-predictions: the output is the results": lambda w: (
        ["import-predictions", w.results, "--format", "beir", "--output", w.results],
        "--output",
        w.results,
    ),
    "import-predictions: the output lies inside the export": lambda w: (
        ["import-predictions", w.results, "--format", "locomo", "--export", w.export, "--output", w.export / "p"],
        "--output",
        w.export,
    ),
    # gen judge --output / --cache-dir
    "judge: the verdicts are the answers": lambda w: (
        ["judge", w.dataset, "--answers", w.answers, "--output", w.answers],
        "--output",
        w.answers,
    ),
    "judge: the verdicts go beside answers kept in the dataset": lambda w: (
        ["judge", w.dataset, "--answers", w.dataset / "log" / "test.jsonl"],
        "--output",
        w.dataset,
    ),
    "judge: the cache lies inside the dataset": lambda w: (
        ["judge", w.dataset, "--answers", w.answers, "--output", w.tmp / "v.json", "--cache-dir", w.dataset],
        "--cache-dir",
        w.dataset,
    ),
    "judge: the verdicts are a link to the recipe it reads": lambda w: (
        [
            "judge",
            w.dataset,
            "--answers",
            w.answers,
            "--recipe",
            w.dataset / "recipe.yaml",
            "--output",
            alias(w, w.dataset / "recipe.yaml"),
        ],
        "--output",
        w.dataset / "recipe.yaml",
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_an_output_over_or_inside_an_input_is_refused_and_nothing_changes(case, world, capsys):
    args, option, refused_input = CASES[case](world)
    before = snapshot(world.tmp)
    code, _, err = run_cli(args, capsys)
    assert code == 2, (case, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f": {option}: " in err, err
    assert str(refused_input) in err, err
    assert "never writes over or inside what it reads" in err
    assert snapshot(world.tmp) == before  # every input byte-identical, and nothing new anywhere


def test_the_refusal_is_one_line_from_a_real_process(world):
    before = snapshot(world.tmp)
    done = gen_subprocess("eval", world.dataset, "--predictions", world.predictions, "--json", world.predictions)
    assert done.returncode == 2
    assert done.stderr == (
        f"error: {world.predictions}: --json: this is the input --predictions ({world.predictions}), which the "
        "command reads; gen never writes over or inside what it reads, so nothing was written (expected a path for "
        "--json outside every input of the command)\n"
    )
    assert snapshot(world.tmp) == before


def test_python_users_meet_the_same_guard_in_their_own_words(world):
    """The guard names what a program wrote (the options field, the parameter), not a command-line option."""
    named_like_its_corpus = recipe(world, "corpus")
    before = snapshot(world.tmp)
    with pytest.raises(GenError, match=r"output: this lies inside the input dataset"):
        gen.export_harness(world.dataset, "beir", world.dataset / "beir")
    with pytest.raises(GenError, match=r"PushOptions\.export_dir: this lies inside the input run_folder"):
        build_export(world.dataset, world.dataset / "export")
    with pytest.raises(GenError, match=r"RunOptions\.output_dir: the input sources\[0\]\.path"):
        gen.run(named_like_its_corpus, gen.RunOptions(output_dir=world.tmp))
    with pytest.raises(GenError) as raised:
        gen.evaluate(world.dataset, world.predictions, options=gen.EvalOptions(json_out=world.predictions))
    assert str(raised.value) == (
        f"{world.predictions}: EvalOptions.json_out: this is the input predictions ({world.predictions}), which the "
        "command reads; gen never writes over or inside what it reads, so nothing was written (expected a path for "
        "EvalOptions.json_out outside every input of the command)"
    )
    assert snapshot(world.tmp) == before


def test_files_a_command_reads_may_sit_beside_its_outputs(world, capsys):
    """The guard refuses overlaps only: outputs next to the inputs, and a batch request folder holding the
    answers the run imports, are fine."""
    from gen.write_guard import refuse_writing_into

    code, _, err = run_cli(
        ["push", world.dataset, "--repo-id", "me/x", "--dry-run", "--export-dir", world.tmp / "e"], capsys
    )
    assert code == 0, err
    batches = world.tmp / "batches"
    refuse_writing_into(
        {"--batch-export": batches, "--cache-dir": world.tmp / "cache" / "llm.sqlite"},
        {"--batch-import file 1": batches / "answers.jsonl", "RECIPE": world.tmp / "r.yaml"},
        adds_to=("--batch-export",),
    )


def test_no_command_writes_into_a_run_folder_it_does_not_read(world, capsys):
    """A run folder (or an export) is sealed with the list of its files and replaced whole: a predictions file
    written into an earlier run that the command does not read would corrupt it all the same (found by the
    fuzzer: `import-predictions --output out/earlier-run/run.json`)."""
    other = world.tmp / "other-run"
    shutil.copytree(world.dataset, other)
    before = snapshot(other)
    code, _, err = run_cli(
        ["import-predictions", world.results, "--format", "beir", "--output", other / "run.json"], capsys
    )
    assert code == 2 and "a run or export gen published" in err and str(other) in err, err
    assert snapshot(other) == before


# --- a published folder is replaced whole or not at all -------------------------------------------------


def push_args(run_dir: Path, export_dir: Path, *extra) -> list:
    return ["push", run_dir, "--repo-id", "me/small", "--dry-run", "--export-dir", export_dir, *extra]


def no_siblings(parent: Path) -> bool:
    return not [p for p in parent.iterdir() if p.name.startswith(".")]


@pytest.fixture
def earlier_export(small_run, tmp_path, capsys) -> tuple[Path, dict[str, object]]:
    """An export made by `gen push --dry-run --export-dir`, and its snapshot."""
    export_dir = tmp_path / "exports" / "small"
    code, _, err = run_cli(push_args(small_run, export_dir), capsys)
    assert code == 0, err
    return export_dir, snapshot(export_dir)


def full_disk(*args, **kwargs):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def test_a_full_disk_during_push_keeps_the_earlier_export(small_run, earlier_export, monkeypatch, capsys):
    export_dir, before = earlier_export
    # the parquet files are written; copying the run's own files then finds the disk full
    monkeypatch.setattr("gen.export.hub_folder.copy_extras", full_disk)
    code, _, err = run_cli(push_args(small_run, export_dir, "--max-shard-size", "20kB"), capsys)
    assert code == 2 and "No space left on device" in err and "unchanged" in err, err
    assert snapshot(export_dir) == before and no_siblings(export_dir.parent)
    monkeypatch.undo()
    code, _, err = run_cli(push_args(small_run, export_dir, "--max-shard-size", "20kB"), capsys)
    assert code == 0, err
    assert any("-00001-of-" in name for name in snapshot(export_dir))  # the new, sharded export is in place


def test_a_full_disk_during_gen_export_keeps_the_earlier_export(quickstart, tmp_path, monkeypatch, capsys):
    output = tmp_path / "beir"
    assert run_cli(["export", quickstart, "--format", "beir", "--output", output], capsys)[0] == 0
    before = snapshot(output)
    monkeypatch.setattr("gen.export.harness.staging.OutputFolder.write_manifest", full_disk)
    code, _, err = run_cli(["export", quickstart, "--format", "beir", "--output", output], capsys)
    assert code == 2 and "No space left on device" in err, err
    assert snapshot(output) == before and no_siblings(tmp_path)


# A `gen push --dry-run --export-dir` process killed at a chosen instant: the wrapper makes the process SIGKILL
# itself right there (deterministic, unlike a timer), then runs the real command line.
KILL_AT = {
    "while writing the parquet files": textwrap.dedent("""
        import gen.export.hub_folder as module
        real = module.write_config
        def write_config(*args, **kwargs):
            written = real(*args, **kwargs)
            os.kill(os.getpid(), signal.SIGKILL)
        module.write_config = write_config
    """),
    "after sealing, before the first rename": textwrap.dedent("""
        import gen.folders as module
        def swap_into_place(new, target):
            os.kill(os.getpid(), signal.SIGKILL)
        module.swap_into_place = swap_into_place
    """),
    "between the two renames": textwrap.dedent("""
        import gen.folders as module
        def swap_into_place(new, target):
            target.rename(target.parent / f".{target.name}.old-{os.getpid()}")
            os.kill(os.getpid(), signal.SIGKILL)
        module.swap_into_place = swap_into_place
    """),
    "after both renames, before the old folder is removed": textwrap.dedent("""
        import gen.folders as module
        def swap_into_place(new, target):
            target.rename(target.parent / f".{target.name}.old-{os.getpid()}")
            new.rename(target)
            os.kill(os.getpid(), signal.SIGKILL)
        module.swap_into_place = swap_into_place
    """),
}


def killed_push(args: list, patch: str) -> subprocess.CompletedProcess[str]:
    script = (
        "import os, signal, sys\n" + patch + "\nfrom gen.cli import main\nsys.argv = ['gen', *sys.argv[1:]]\nmain()\n"
    )
    return subprocess.run(
        [sys.executable, "-c", script, *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        timeout=300,
    )


@pytest.mark.parametrize("instant", list(KILL_AT), ids=list(KILL_AT))
def test_push_killed_at_any_instant_leaves_a_whole_export_and_the_next_push_succeeds(
    small_run, earlier_export, instant, tmp_path, capsys
):
    export_dir, before = earlier_export
    sharded = push_args(small_run, export_dir, "--max-shard-size", "20kB")  # a new export unlike the earlier one
    done = killed_push(sharded, KILL_AT[instant])
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert snapshot(export_dir) == before or instant.startswith(("between", "after both"))
    # the next command puts a whole export in place first (the earlier one, or the completed new one)
    code, _, err = run_cli(sharded, capsys)
    assert code == 0, err
    assert no_siblings(export_dir.parent)
    code, _, err = run_cli(push_args(small_run, tmp_path / "fresh", "--max-shard-size", "20kB"), capsys)
    assert code == 0, err
    assert snapshot(export_dir) == snapshot(tmp_path / "fresh")


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_push_killed_from_outside_leaves_the_earlier_export_or_the_new_one_whole(
    small_run, earlier_export, signum, tmp_path, capsys
):
    """A real signal at a few moments of the export: whenever it lands, the folder is the earlier export or the
    new one, complete, never a mix, and the next command succeeds."""
    export_dir, before = earlier_export
    sharded = push_args(small_run, export_dir, "--max-shard-size", "20kB")
    assert run_cli(push_args(small_run, tmp_path / "new", "--max-shard-size", "20kB"), capsys)[0] == 0
    new = snapshot(tmp_path / "new")
    for delay in (0.3, 0.8, 1.5):
        process = subprocess.Popen(
            [sys.executable, "-m", "gen", *map(str, sharded)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env={**os.environ, "PYTHONPATH": str(REPO)},
        )
        time.sleep(delay)
        process.send_signal(signum)
        process.wait(timeout=300)
        now = snapshot(export_dir) if export_dir.exists() else None
        assert now in (before, new, None), delay  # None: between the two renames, restored by the next command
        code, _, err = run_cli(push_args(small_run, export_dir), capsys)  # back to the earlier layout
        assert code == 0, err
        assert snapshot(export_dir) == before and no_siblings(export_dir.parent)


@pytest.mark.parametrize("kind", ["pipe", "link", "folder"])
def test_a_file_output_that_is_a_pipe_a_link_or_a_folder_is_refused_and_left_as_it_was(world, capsys, kind):
    """Found by hand: `--output /dev/full` was renamed over, leaving a plain file where the device node was (a
    named pipe stands in for a device here: a test never touches /dev)."""
    if kind == "pipe":
        target = world.tmp / "pipe.jsonl"
        os.mkfifo(target)
    elif kind == "link":
        target = world.tmp / "link.jsonl"
        target.symlink_to(world.predictions)
    else:
        target = world.tmp / "folder"
        target.mkdir()
    before = target.lstat()
    code, _, err = run_cli(["import-predictions", world.results, "--format", "beir", "--output", target], capsys)
    assert code == 2 and "not a file" in err, err
    after = target.lstat()
    assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
