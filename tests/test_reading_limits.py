"""Every input a user hands gen goes through one bounded reading layer (gen/reading.py): a named pipe, a device or a
folder is refused before it is opened, text is UTF-8 (a byte-order mark dropped), YAML keeps no repeated key and
no alias bomb, JSON no lone surrogate, recipe numbers are finite and in range, templates are bounded when they
compile. Each case runs the real CLI in a process limited to 2 GB of address space and 60 s (tests/test_limits.py's
`limited`), and must end in exit 2 with one message naming the file and the place, without a traceback."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from gen.errors import GenError
from tests.conftest import write_recipe
from tests.test_limits import limited

LOG_ONLY = {"name": "hostile", "products": [{"type": "log"}]}
SAMPLE_LOCOMO = Path(__file__).resolve().parent.parent / "gen" / "data" / "sample_locomo.json"


def one_error(done, *parts: str) -> str:
    """The one line of stderr, checked: exit 2, no traceback, and each part in it."""
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr and "internal error" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    for part in parts:
        assert part in lines[0], lines[0]
    return lines[0]


def validate_source(tmp_path: Path, name: str, source_format: str = "locomo"):
    write_recipe(tmp_path / "r.yaml", {**LOG_ONLY, "sources": [{"format": source_format, "path": name}]})
    return limited("validate", "r.yaml", cwd=tmp_path)


def validate_recipe(tmp_path: Path, text: str | bytes):
    path = tmp_path / "r.yaml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode("utf-8"))
    return limited("validate", "r.yaml", cwd=tmp_path)


RECIPE = f"name: hostile\nsources: [{{format: locomo, path: {SAMPLE_LOCOMO}}}]\nproducts: [{{type: log}}]\n"


# Special files and folders, refused before they are opened


def test_a_named_pipe_as_a_source_is_refused_at_once(tmp_path):
    os.mkfifo(tmp_path / "pipe.json")
    started = time.monotonic()
    one_error(validate_source(tmp_path, "pipe.json"), "pipe.json: this is a named pipe, not a file")
    assert time.monotonic() - started < 60  # a hang guard: opening the pipe would wait for a writer for ever


def test_dev_zero_and_a_folder_as_sources_are_refused(tmp_path):
    one_error(validate_source(tmp_path, "/dev/zero"), "/dev/zero: this is a character device, not a file")
    (tmp_path / "folder.json").mkdir()
    one_error(validate_source(tmp_path, "folder.json"), "folder.json: this is a folder, not a file")


def test_a_named_pipe_as_predictions_answers_or_harness_results_is_refused(tmp_path, quickstart, exports):
    pipe = tmp_path / "p.jsonl"
    os.mkfifo(pipe)
    for args in (
        ("eval", quickstart, "--predictions", pipe),
        (
            "import-predictions",
            pipe,
            "--format",
            "longmemeval",
            "--export",
            exports["longmemeval"],
            "--output",
            tmp_path / "o",
        ),
    ):
        one_error(limited(*map(str, args), cwd=tmp_path), f"{pipe}: this is a named pipe, not a file")


# Encodings


def test_a_utf8_byte_order_mark_is_dropped_from_a_recipe_and_a_source(tmp_path):
    data = json.loads(SAMPLE_LOCOMO.read_text(encoding="utf-8"))
    (tmp_path / "bom.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(data).encode())
    text = "name: bom\nsources: [{format: locomo, path: bom.json}]\nproducts: [{type: log}]\n"
    done = validate_recipe(tmp_path, b"\xef\xbb\xbf" + text.encode())
    assert done.returncode == 0, done.stderr


def test_invalid_utf8_in_json_lines_names_the_line(tmp_path):
    # line 1 is blank, line 2 holds the byte 0xff
    (tmp_path / "bad.jsonl").write_bytes(b'\n{"b": "\xff"}\n{"a": 1}\n')
    one_error(validate_source(tmp_path, "bad.jsonl", "cc"), "bad.jsonl: line 2: not UTF-8 text: byte 0xff")


def test_a_lone_surrogate_escape_is_refused_with_its_line_and_column(tmp_path):
    # line 2 is '  "speaker_a": "\ud800",': the backslash follows 2 + 11 ('"speaker_a"') + 2 + 1 = 16 characters
    text = '[{"sample_id": "s", "conversation": {\n  "speaker_a": "\\ud800",\n  "speaker_b": "B"}}]'
    (tmp_path / "s.json").write_text(text, encoding="utf-8")
    one_error(validate_source(tmp_path, "s.json"), "s.json: item 0, line 2, column 17: a string holds half a surrogate")


def test_a_lone_surrogate_in_a_predictions_line_is_refused(tmp_path, quickstart):
    # '{"question_id": "' is 17 characters, so the escape starts at column 18
    (tmp_path / "p.jsonl").write_text('{"question_id": "\\udfff", "retrieved": []}\n', encoding="utf-8")
    done = limited("eval", str(quickstart), "--predictions", "p.jsonl", cwd=tmp_path)
    one_error(done, "p.jsonl: line 1, column 18: a string holds half a surrogate pair")


def test_a_repeated_key_in_a_predictions_line_is_refused(tmp_path, quickstart):
    (tmp_path / "p.jsonl").write_text('{"question_id": "a", "question_id": "b", "retrieved": []}\n')
    done = limited("eval", str(quickstart), "--predictions", "p.jsonl", cwd=tmp_path)
    one_error(done, "p.jsonl: line 1: the key 'question_id' appears twice in one object")


# YAML


def test_a_billion_laughs_recipe_is_refused_in_a_few_hundred_bytes(tmp_path):
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"a{n}: &a{n} [{','.join([f'*a{n - 1}'] * 10)}]" for n in range(1, 9)]  # 10**9 values at the end
    text = "\n".join(lines) + "\n" + RECIPE
    assert len(text.encode()) < 1000
    # a list of ten stands for 11 values (itself and its items); a_n for 1 + 10 * a_(n-1): 11, 111, 1,111, 11,111,
    # 111,111. a4 is the first past 100,000: line 5 (a0 is line 1), named where its anchor starts, column 5
    one_error(validate_recipe(tmp_path, text), "r.yaml: line 5, column 5: it stands for more than 100,000 values")


def test_a_recipe_alias_within_the_bound_is_accepted(tmp_path):
    text = RECIPE.replace("products: [{type: log}]", "products: [&log {type: log}]\nextra_products_unused: *log")
    done = validate_recipe(tmp_path, text)
    # the alias itself is fine; the unknown key is what the recipe model refuses
    one_error(done, "r.yaml: extra_products_unused: unknown key")


def test_a_repeated_recipe_key_is_refused_naming_its_line(tmp_path):
    text = RECIPE + "seed: 1\nseed: 2\n"  # the second seed is on line 5
    one_error(validate_recipe(tmp_path, text), "r.yaml: line 5, column 1: the key 'seed' appears twice in one mapping")


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (".inf", "timeline.seconds_per_word: Input should be a finite number"),
        ("-1e999", "timeline.seconds_per_word: Input should be a finite number"),
        (".nan", "timeline.seconds_per_word: Input should be a finite number"),
    ],
)
def test_non_finite_recipe_floats_are_refused(tmp_path, value, said):
    one_error(validate_recipe(tmp_path, RECIPE + f"timeline: {{seconds_per_word: {value}}}\n"), f"r.yaml: {said}")


def test_whole_numbers_past_2_to_the_53_are_refused_in_every_recipe_model(tmp_path):
    big = str(2**80)
    one_error(validate_recipe(tmp_path, RECIPE + f"seed: {big}\n"), "r.yaml: seed: ", "outside ±9,007,199,254,740,991")
    endpoint = f"llm: {{judge: {{model: m, seed: {big}}}}}\n"
    one_error(
        validate_recipe(tmp_path, RECIPE + endpoint), "r.yaml: llm.judge.seed: ", "outside ±9,007,199,254,740,991"
    )
    digits = "9" * 5000  # more digits than Python reads: refused by the YAML reader, naming the line
    one_error(
        validate_recipe(tmp_path, RECIPE + f"seed: {digits}\n"),
        "r.yaml: line 4, column 7: a whole number of 5,000 digits",
    )


def test_a_locomo_session_number_that_would_cost_gigabytes_is_refused(tmp_path):
    sample = {"sample_id": "s", "conversation": {"speaker_a": "A", "speaker_b": "B", "session_99999999": []}}
    (tmp_path / "big.json").write_text(json.dumps([sample]), encoding="utf-8")
    one_error(
        validate_source(tmp_path, "big.json"), "big.json: s: session_99999999: session number 99999999 is too large"
    )


# Templates


def run_with_template(tmp_path: Path, template: str):
    (tmp_path / "tpl" / "card" / "configs").mkdir(parents=True)  # the log's part of the dataset card
    (tmp_path / "tpl" / "card" / "configs" / "log.md.j2").write_text(template, encoding="utf-8")
    text = RECIPE + "templates_dir: tpl\n"
    (tmp_path / "r.yaml").write_text(text, encoding="utf-8")
    return limited("run", "r.yaml", "--output-dir", str(tmp_path / "out"), cwd=tmp_path)


@pytest.mark.parametrize(
    ("template", "said"),
    [
        # folded at compile time, jinja2 would compute this number before any limit applied
        ("x\n{{ 10 ** 100000000000 }}\n", "line 2: the template could not be rendered: OverflowError: a power"),
        ('{{ "a" * 10000000000 }}', "line 1: the template could not be rendered: OverflowError: a repetition"),
        ("{% if x %}" * 17 + "{% endif %}" * 17, "line 1: template syntax error: nested deeper than 16 blocks"),
        (
            "\n\n{{ " + "(" * 40 + "1" + ")" * 40 + " }}",
            "line 3: template syntax error: nested deeper than 32 brackets",
        ),
    ],
)
def test_a_hostile_template_is_refused_with_its_file_and_line(tmp_path, template, said):
    done = run_with_template(tmp_path, template)
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert f"log.md.j2: {said}" in done.stderr, done.stderr


def test_a_template_file_past_one_megabyte_is_refused(tmp_path):
    done = run_with_template(tmp_path, "x" * (1 << 20) + "y")
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "log.md.j2: the file is larger than 1 MB" in done.stderr, done.stderr


# Messages


def test_a_megabyte_value_makes_a_short_message():
    value = ":@" * 500_000  # the characters a URL's credentials are found by, a megabyte of them
    message = str(GenError(f"unknown id {value!r}", file="p.jsonl", record="line 1", field=value, expected=value))
    assert len(message) < 1024
    assert "(1,000,000 characters)" in message and message.startswith("p.jsonl: line 1: :@:@")


# YAML 1.1's words: a recipe is read the YAML 1.2 way


def test_structured_output_off_unquoted_is_the_word_off_and_a_yes_still_sets_a_boolean(tmp_path):
    from gen import load_recipe
    from gen.products.registry import bind

    path = tmp_path / "r.yaml"
    path.write_text(
        f"name: words\nsources: [{{format: locomo, path: {SAMPLE_LOCOMO}}}]\n"
        "llm: {main: {model: m, base_url: 'http://127.0.0.1:9/v1', structured_output: off}}\n"
        "products: [{type: time_content_questions, verify: yes}]\n",
        encoding="utf-8",
    )
    recipe = load_recipe(path)
    assert recipe.llm["main"].structured_output == "off"
    options = next(b.product.options for b in bind(recipe) if b.name == "time_content_questions")
    assert options.verify is True


def test_a_word_with_a_colon_is_never_a_sexagesimal_number(tmp_path):
    from gen.reading import load_yaml

    data = load_yaml("a: 1:30\nb: 190\nc: on\nd: TRUE\ne: no\n", tmp_path / "x.yaml")
    assert data == {"a": "1:30", "b": 190, "c": "on", "d": True, "e": "no"}
