"""Every failure class the fuzzer found, as a fixed case: the smallest input bench/fuzz.py shrank it to, run
through the same runner and checked for the same promises. Each test names the class it guards against
(surface | broken promise | exit code | exception and innermost frame in gen)."""

from __future__ import annotations

import json
import signal

import pytest

from tests.fuzz import bases, datasets
from tests.fuzz.bases import BASES, LLM, jsonl
from tests.fuzz.runner import BASE_URL, Case, assert_promises_kept, execute, execute_in_process
from tests.fuzz.server import ReplySpec

pytestmark = pytest.mark.fuzz

RUN = ("run", "recipe.yaml", "--output-dir", "out")


def source_case(format_name: str, source: bytes, what: str) -> Case:
    base = BASES[format_name]
    return Case("sources", RUN, base.files(source=source), names=(base.source_path.split("/")[-1],), what=what)


# -- source files (in this process: cheap) ---------------------------------------------------------------------
def test_msc_dialog_that_is_not_a_list():
    """sources | traceback | TypeError at gen/sources/msc.py:parse_sessions."""
    records = json.loads(json.dumps(bases.MSC_RECORDS))
    records[1]["previous_dialogs"][0]["dialog"] = True
    assert_promises_kept(execute_in_process(source_case("msc", jsonl(records), "previous_dialogs.0.dialog = true")))


def test_msc_persona_that_is_a_number():
    """sources | traceback | TypeError at gen/sources/msc.py:personas_of."""
    records = json.loads(json.dumps(bases.MSC_RECORDS))
    records[0]["personas"][1] = 8.1e274
    assert_promises_kept(execute_in_process(source_case("msc", jsonl(records), "personas.1 = 8.1e274")))


def test_locomo_turn_id_that_is_a_list():
    """sources | traceback | TypeError at gen/sources/locomo.py:refuse_repeated_turn_ids."""
    sample = json.loads(json.dumps(bases.SMALL_LOCOMO))
    sample["conversation"]["session_1"][2]["dia_id"] = []
    case = source_case("locomo", json.dumps([sample]).encode(), "session_1[2].dia_id = []")
    assert_promises_kept(execute_in_process(case))


def test_a_long_speaker_name_is_refused_at_once():
    """sources | hang: a message quoting a long word takes time quadratic in its length (gen/errors.py's
    redact_urls: its URL pattern retries from every letter); a 100,000-letter speaker takes ~40 s today."""
    sample = json.loads(json.dumps(bases.SMALL_LOCOMO))
    sample["conversation"]["session_1"][0]["speaker"] = "x" * 100_000
    case = source_case("locomo", json.dumps([sample]).encode(), "session_1[0].speaker = 'x' * 100,000")
    assert_promises_kept(execute(Case(**{**vars(case), "args": ("validate", "recipe.yaml"), "timeout_s": 10})))


def test_msc_text_with_a_lone_surrogate():
    """sources | traceback | TypeError at gen/jsonl.py:encode_lines (the run cannot write the text it read)."""
    text = bases.BASES["msc"].source.replace(b"How is the cat?", b"How is the \\ud800 cat?")
    assert_promises_kept(execute_in_process(source_case("msc", text, "a turn's text holds \\ud800")))


# -- recipes ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("format_name", "device", "what"),
    [
        ("chat_logs", "/dev/urandom", "recipes | memory, traceback | MemoryError in gen/sources/_io.py:read_text"),
        ("locomo", "/dev/zero", "recipes | memory, traceback | MemoryError at gen/sources/_io.py:_first_line_is_json"),
    ],
)
def test_a_source_path_naming_an_endless_device(format_name, device, what):
    """The whole device is read, until the address-space limit (without one: the machine's memory)."""
    base = BASES[format_name]
    recipe = json.loads(json.dumps(base.recipe))
    recipe["sources"][0]["path"] = device
    case = Case("recipes", RUN, base.files(recipe=recipe), names=(device,), what=what, timeout_s=20)
    assert_promises_kept(execute(case))


def test_a_source_path_that_is_a_symbolic_link_loop():
    """recipes | traceback | RuntimeError (symlink loop) at gen/recipe.py:resolve."""
    base = BASES["cc"]
    recipe = json.loads(json.dumps(base.recipe))
    recipe["sources"][0]["path"] = "data/loop"
    files = base.files(recipe=recipe)
    case = Case("recipes", RUN, files, links=(("data/loop", "loop"),), names=("loop",), what="path: a link to itself")
    assert_promises_kept(execute(case))


# -- results and predictions -----------------------------------------------------------------------------------
def beir_case(content: bytes, what: str) -> Case:
    return Case(
        "results",
        ("import-predictions", "results.json", "--format", "beir", "--output", "out/preds.jsonl"),
        {"results.json": content},
        names=("results.json",),
        what=what,
    )


@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"\xc3( Q0 0 1 1.0 mine\n", "results | traceback | UnicodeDecodeError at results.py:beir"),
        (b"q1 Q0 0 1 x mine\n", "results | traceback | ValueError at results.py:beir (a score that is no number)"),
        (b'{"q1": {"0": []}}', "results | traceback | TypeError at results.py:beir (a score that is a list)"),
        (b'{"q1": 5}', "results | traceback | TypeError at results.py:beir (a query's documents not a mapping)"),
    ],
)
def test_beir_results(content, what):
    assert_promises_kept(execute(beir_case(content, what)))


def test_locomo_results_with_a_sample_id_that_is_a_list():
    """results | names | exit 1 | TypeError at results.py:locomo (unhashable type: 'list')."""
    files = {**datasets.dataset_files(), "results.json": json.dumps([{"sample_id": [], "qa": []}]).encode()}
    args = ("import-predictions", "results.json", "--format", "locomo", "--export", "exp-locomo")
    case = Case("results", (*args, "--output", "out/preds.jsonl"), files, names=("results.json",), what="[] id")
    assert_promises_kept(execute(case))


def test_longmemeval_results_with_a_lone_surrogate():
    """results | traceback | TypeError at gen/jsonl.py:encode_lines."""
    line = {"question_id": "\ud800", "retrieval_results": {"ranked_items": [{"corpus_id": "locomo-sample-1_s1"}]}}
    files = {**datasets.dataset_files(), "results.json": json.dumps(line).encode() + b"\n"}
    args = ("import-predictions", "results.json", "--format", "longmemeval", "--export", "exp-longmemeval")
    case = Case("results", (*args, "--output", "out/preds.jsonl"), files, names=("results.json",), what="\\ud800 id")
    assert_promises_kept(execute(case))


def test_longmemeval_results_that_are_not_utf8():
    """results | traceback | UnicodeDecodeError at gen/export/harness/results.py:json_lines."""
    files = {**datasets.dataset_files(), "results.json": b"\xc3(\n"}
    args = ("import-predictions", "results.json", "--format", "longmemeval", "--export", "exp-longmemeval")
    case = Case("results", (*args, "--output", "out/preds.jsonl"), files, names=("results.json",), what="not UTF-8")
    assert_promises_kept(execute(case))


def test_predictions_that_are_not_utf8():
    """predictions | traceback | UnicodeDecodeError at gen/eval/dataset.py:numbered_jsonl."""
    files = {**datasets.dataset_files(), "mine.jsonl": b"\xc3(" + json.dumps(datasets.valid_predictions()[0]).encode()}
    case = Case("predictions", ("eval", "ds", "--predictions", "mine.jsonl"), files, names=("mine.jsonl",))
    assert_promises_kept(execute(case))


# -- templates -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("content", "what"),
    [
        (b"\xff\xfe{{ time }}", "templates | traceback | UnicodeDecodeError at gen/templating.py:loaded"),
        (b"{{ '%s' | format(10**5000) }}", "templates | traceback | ValueError at gen/templating.py:loaded"),
        # jinja folds constant expressions while compiling, outside the render limits: the 1 GB string is built
        # then, written into the generated code, and compiling that runs out of memory (~25 s and ~3 GB under the
        # runner's limit today); the MemoryError handler then meets a `template` never assigned
        (b"{{ 'a' * 10**9 }}", "templates | memory, traceback | UnboundLocalError at gen/templating.py:render"),
    ],
)
def test_recipe_templates(content, what):
    """Each case is one class (surface | promise | exception at its innermost frame in gen), named in `what`."""
    base = BASES["quickstart"]
    files = {**base.files(recipe={**base.recipe, "templates_dir": "tpl"}), "tpl/card/README.md.j2": content}
    case = Case("templates", RUN, files, names=("README.md.j2",), what=what)
    assert_promises_kept(execute(case))


def test_a_frames_template_two_megabytes_long():
    """templates | memory | exit 2: 200,000 `{{ time }}` on one line take ~20 s and ~1.8 GB to compile before the
    frame is refused, and the refusal quotes the whole 2 MB line."""
    base = BASES["quickstart"]
    files = {**base.files(recipe={**base.recipe, "templates_dir": "tpl"})}
    files["tpl/time_queries/frames.j2"] = b"{{ time }}" * 200_000
    case = Case("templates", RUN, files, names=("frames.j2",), what="a frame of 200,000 {{ time }}", timeout_s=40)
    outcome = execute(case)
    assert_promises_kept(outcome)
    assert len(outcome.stderr) < 10_000  # one readable message, not the template again


# -- LLM replies -----------------------------------------------------------------------------------------------
def test_a_reply_with_a_lone_surrogate():
    """replies | names | exit 2: the run stops with "internal error: UnicodeEncodeError", then blames the
    cache ("expected free disk space and a writable cache folder") rather than the reply."""
    case = Case(
        "replies",
        RUN,
        LLM.files(recipe=bases.llm_recipe(per_conversation=1)),
        names=("base_url", "endpoint", "main", "reply"),
        replies=(ReplySpec(content='{"question": "\ud800 what?"}'),),
        what="a reply whose question holds \\ud800",
        timeout_s=90,
    )
    assert_promises_kept(execute(case))


def test_a_gold_answer_citing_true_is_not_read_as_response_1():
    """gold (by hand, after the fuzzer's citation attacks): pydantic reads JSON `true` as 1 and `false` as 0, so an
    answer citing `true` and leaving out `false` was accepted as citing response 1 and leaving out response 0;
    now the reply goes to the correction round and, still so, is rejected (max_reject_rate 1: the run finishes)."""
    recipe = datasets.written_recipe(BASE_URL, source="data/sample_locomo.json")
    recipe["llm"]["main"]["max_reject_rate"] = 1.0
    case = Case(
        "gold",
        RUN,
        {"recipe.yaml": bases.recipe_text(recipe), "data/sample_locomo.json": bases.SAMPLE_LOCOMO},
        names=("recipe.yaml",),
        replies=(ReplySpec(good=True, twist=("cites", "truth-values")),),
        what="every 1 cited as true, every 0 left out as false",
        timeout_s=90,
    )
    outcome = execute(case)
    assert_promises_kept(outcome)
    # the first session's window starts at response 0: its answer is the one the twist reaches (the other two
    # windows start later, so they are answered as they were)
    assert "gold_answers: 1 of 3 items rejected" in outcome.stderr


# -- signals ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_a_run_ended_by_sigterm_or_sighup_says_so(signum):
    """signals | message | exit 143, 129: the run dies without a message."""
    case = Case("signals", RUN, BASES["quickstart"].files(), signal_at=(int(signum), 0.3), what=f"{signum!r} at 0.3 s")
    assert_promises_kept(execute(case))


def test_ctrl_c_while_llm_calls_are_on_their_way():
    """signals | traceback | exit 130 | RuntimeError (event loop is closed) at gen/llm/accounts/progress.py:showing."""
    case = Case(
        "signals",
        RUN,
        LLM.files(recipe=bases.llm_recipe(per_conversation=3)),
        signal_at=(int(signal.SIGINT), 1.25),
        replies=(ReplySpec(good=True, delay=1.0),),
        what="SIGINT at 1.25 s, while replies take 1 s each",
        timeout_s=90,
    )
    assert_promises_kept(execute(case))


def test_a_run_ended_by_sigterm_during_llm_calls_leaves_no_staging_folder():
    """signals | partial | exit 143: `.tcq.tmp-<pid>` is left in the output folder."""
    case = Case(
        "signals",
        RUN,
        LLM.files(recipe=bases.llm_recipe(per_conversation=3)),
        signal_at=(int(signal.SIGTERM), 1.5),
        replies=(ReplySpec(good=True, delay=1.0),),
        what="SIGTERM at 1.5 s, while replies take 1 s each",
        timeout_s=90,
    )
    assert_promises_kept(execute(case))


# -- people's own logs (tests/fuzz/own_logs.py) -----------------------------------------------------------------
def own_case(format_name: str, source: bytes, what: str, command: tuple[str, ...] = RUN) -> Case:
    base = bases.PERSONAL_BASES[format_name]
    return Case("own_sources", command, base.files(source=source), names=(base.source_path.split("/")[-1],), what=what)


def chat_log_with_first_time(stamp: str) -> bytes:
    """The chat_logs base with its first message's time replaced."""
    lines = bases.PERSONAL_BASES["chat_clock"].source.decode().splitlines()
    first = json.loads(lines[0])
    first["time"] = stamp
    return "\n".join([json.dumps(first), *lines[1:]]).encode() + b"\n"


@pytest.mark.parametrize(
    ("stamp", "what"),
    [
        ("2024-03-01 09:00 +9999", "own_sources | names | exit 1 | ValueError (offset not under 24 h) at utc_naive"),
        ("2024-03-01T09:00:00+24:00", "the same, an ISO offset of a whole day"),
        ("0001-01-01T00:30:00+01:00", "own_sources | names | exit 1 | OverflowError (before year 1 in UTC)"),
        ("9999-12-31 23:30 -0100", "the same, after year 9999 in UTC"),
    ],
)
def test_a_time_that_has_no_place_in_utc(stamp, what):
    """The run stopped with "a bug in gen ... ValueError/OverflowError" and a crash file, not a message naming
    the line and the field."""
    outcome = execute_in_process(own_case("chat_clock", chat_log_with_first_time(stamp), what))
    assert_promises_kept(outcome)
    assert outcome.exit_code == 2 and "log.jsonl: line 1: time:" in outcome.stderr


def test_a_time_with_a_zone_name_is_refused_not_read_as_local():
    """own_sources: "09:00 EST" was read as 09:00 local time (five hours off), with dateutil's
    UnknownTimezoneWarning and its source line printed on the terminal."""
    outcome = execute_in_process(own_case("chat_clock", chat_log_with_first_time("2024-03-01 09:00 EST"), "EST"))
    assert_promises_kept(outcome)
    assert outcome.exit_code == 2 and "UnknownTimezoneWarning" not in outcome.stderr
    assert "log.jsonl: line 1: time: the time '2024-03-01 09:00 EST' names a time zone" in outcome.stderr


@pytest.mark.parametrize(
    ("change", "what"),
    [
        (lambda sources: None, "push | names, outside | exit 1 | TypeError at gen/export/hub_folder.py (sources null)"),
        (lambda sources: [{**sources[0], "loaded": {}}], "push | names | exit 2 | the card template's TypeError"),
        (
            lambda sources: [{k: v for k, v in sources[0].items() if k != "origin_name"}],
            "push | names | exit 2 | the card template's undefined origin_name",
        ),
    ],
)
def test_push_of_a_run_whose_run_json_sources_are_damaged(change, what):
    """run.json's sources edited by hand: the push crashed, or blamed gen's own card template, not run.json."""
    files = dict(datasets.own_dataset_files())
    report = json.loads(files["own/run.json"])
    report["sources"] = change(report["sources"])
    files["own/run.json"] = json.dumps(report).encode()
    args = ("push", "own", "--repo-id", "me/own", "--export-dir", "out/hub", "--dry-run", "--personal-data-ok")
    outcome = execute(Case("push", args, files, names=("run.json",), what=what))
    assert_promises_kept(outcome)
    assert outcome.exit_code == 2 and "run.json: sources" in outcome.stderr


def test_a_session_break_longer_than_a_timedelta():
    """own_recipes | names, outside | exit 1 | OverflowError at gen/sources/messages.py:build (timedelta of
    7e16 minutes): session_break_minutes had no upper bound."""
    base = bases.PERSONAL_BASES["tsv"]
    recipe = json.loads(json.dumps(base.recipe))
    recipe["sources"][0]["session_break_minutes"] = 7.1354346333321336e16
    case = Case("own_recipes", RUN, base.files(recipe=recipe), names=("recipe.yaml",), what="session_break 7e16")
    outcome = execute_in_process(case)
    assert_promises_kept(outcome)
    assert outcome.exit_code == 2 and "sources[0].session_break_minutes" in outcome.stderr


def test_a_table_cell_of_three_thousand_words_on_a_simulated_clock():
    """own_sources (table: enormous-cell, by hand): the run built every product, then failed its own log
    validation (exit 1: a 23-minute gap inside a session); now refused when placed, naming the file and the row."""
    base = bases.PERSONAL_BASES["tsv"]  # clock: simulated
    case = own_case("tsv", base.source.replace(b"Next week", b"w " * 3000, 1), "a 3,000-word cell")
    outcome = execute_in_process(case)
    assert_promises_kept(outcome)
    assert outcome.exit_code == 2 and "chats.tsv: tsv/c1: timeline.session_gap_minutes: response 3" in outcome.stderr
