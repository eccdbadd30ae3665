"""gen's messages through logging: the default shows the run's lines on stderr, -q only warnings and errors,
-v debug lines too, and `gen run` keeps its own log beside the LLM cache, never in the published run folder."""

from __future__ import annotations

from tests.conftest import REPO, gen_subprocess

QUICKSTART = REPO / "recipes" / "quickstart.yaml"


def run(tmp_path, *flags):
    return gen_subprocess(*flags, "run", QUICKSTART, "--output-dir", tmp_path / "out", "--cache-dir", tmp_path / "c")


def test_the_default_shows_the_runs_lines_and_the_log_file_keeps_them_with_debug_lines(tmp_path):
    done = run(tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    assert "locomo: 2 of 2 conversations from" in lines[0]
    assert any(line.startswith("time_queries: ") and line.endswith("validation passed") for line in lines)
    assert lines[-1] == f"wrote {tmp_path / 'out' / 'quickstart'}"
    assert not any("run log:" in line for line in lines)  # a debug line
    kept = (tmp_path / "c" / "logs" / "quickstart.log").read_text()
    assert " DEBUG gen: run log: " in kept and " INFO gen.pipeline.shards: locomo: 2 of 2 conversations" in kept
    assert not list((tmp_path / "out").rglob("*.log"))


def test_quiet_shows_nothing_but_problems_and_verbose_shows_debug_lines(tmp_path):
    quiet = run(tmp_path / "q", "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""
    verbose = run(tmp_path / "v", "--verbose")
    assert verbose.returncode == 0 and f"run log: {tmp_path / 'v' / 'c' / 'logs' / 'quickstart.log'}" in verbose.stderr
    both = gen_subprocess("-q", "-v", "products")
    assert both.returncode == 2 and "--verbose and --quiet contradict each other" in both.stderr


def test_a_program_that_ran_a_command_in_process_gets_a_librarys_logging_after_it(tmp_path, capsys):
    """The command line shows gen's lines on stderr while its command runs, and not after: a program (or a test)
    calling the API next is not handed the command's console."""
    import logging

    import gen
    from tests.conftest import run_cli

    code, _, err = run_cli(["validate", str(QUICKSTART)], capsys)
    assert code == 0 and "is valid" in err
    gen.validate(QUICKSTART)
    assert capsys.readouterr().err == ""
    logger = logging.getLogger("gen")
    assert logger.propagate and logger.level == logging.NOTSET
