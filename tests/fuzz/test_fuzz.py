"""The fixed-seed fuzz budget that `pytest -q` (and so CI) runs: a few examples per surface, the same ones every
time (derandomized), each checked for every promise in tests/fuzz/runner.py. bench/fuzz.py runs the same
strategies for as long as it is given, with fresh seeds.

No shrinking: a case is already a valid input with one to three changes, and shrinking would re-run gen
dozens of times; Hypothesis reports the first failing case as it was drawn."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from tests.fuzz.api_calls import api_cases
from tests.fuzz.runner import assert_promises_kept, execute, execute_in_process
from tests.fuzz.surfaces import SURFACES

pytestmark = pytest.mark.fuzz


def budget(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=list(HealthCheck),
        print_blob=False,
    )


@budget(40)
@given(SURFACES["sources"])
def test_source_readers_end_in_success_or_one_message(case):
    """In this process (cheap): any source file, mutated, is read or refused with one message naming it."""
    assert_promises_kept(execute_in_process(case))


@budget(6)
@given(SURFACES["sources"])
def test_source_files_through_a_real_run(case):
    assert_promises_kept(execute(case))


@budget(9)
@given(SURFACES["recipes"])
def test_recipes(case):
    assert_promises_kept(execute(case))


@budget(8)
@given(SURFACES["replies"])
def test_llm_replies(case):
    assert_promises_kept(execute(case))


@budget(6)
@given(SURFACES["predictions"])
def test_predictions_for_eval(case):
    assert_promises_kept(execute(case))


@budget(8)
@given(SURFACES["results"])
def test_results_for_import_predictions(case):
    assert_promises_kept(execute(case))


@budget(8)
@given(SURFACES["templates"])
def test_templates(case):
    assert_promises_kept(execute(case))


@budget(9)
@given(SURFACES["cli"])
def test_command_line_values(case):
    assert_promises_kept(execute(case))


@budget(6)
@given(SURFACES["signals"])
def test_signals_at_random_instants(case):
    assert_promises_kept(execute(case))


# -- people's own logs: the message readers, clock/options/redact, temporal_reasoning, --answers, push ----------
@budget(30)
@given(SURFACES["own_sources"])
def test_message_readers_end_in_success_or_one_message(case):
    """In this process (cheap): messages, sharegpt, chatgpt, csv, tsv and chat_logs files, mutated."""
    assert_promises_kept(execute_in_process(case))


@budget(4)
@given(SURFACES["own_recipes"])
def test_own_log_recipes(case):
    assert_promises_kept(execute(case))


@budget(3)
@given(SURFACES["answers"])
def test_answers_for_eval(case):
    assert_promises_kept(execute(case))


@budget(2)
@given(SURFACES["push"])
def test_push_of_a_run_from_own_logs(case):
    assert_promises_kept(execute(case))


@budget(3)
@given(SURFACES["terminal"])
def test_runs_on_a_terminal_leave_it_clean(case):
    assert_promises_kept(execute(case))


@budget(10)
@given(SURFACES["timelines"])
def test_temporal_reasoning_over_odd_timelines(case):
    """In this process (cheap): one session, one response, identical times, topics only in the padding..."""
    assert_promises_kept(execute_in_process(case))


# -- answers a model writes: gold_answers' replies, the judge of gen eval --answers ------------------------------
@budget(2)
@given(SURFACES["gold"])
def test_gold_answer_replies(case):
    assert_promises_kept(execute(case))


@budget(2)
@given(SURFACES["judge"])
def test_judge_replies_and_answers(case):
    assert_promises_kept(execute(case))


# -- gen's Python API ---------------------------------------------------------------------------------------------
@budget(2)
@given(api_cases(calls=("run",), options_only=True))
def test_run_from_python_with_hostile_run_options(case):
    """gen.run(recipe, RunOptions(**hostile)): only GenError comes out."""
    assert_promises_kept(execute(case))


@budget(4)
@given(api_cases())
def test_every_api_function_from_python_with_hostile_arguments_and_options(case):
    """Any function of gen's API, any argument or options field hostile: only GenError comes out."""
    assert_promises_kept(execute(case))
