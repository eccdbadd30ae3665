"""One Hypothesis strategy per surface, each drawing a `Case` (tests/fuzz/runner.py): a valid input of that
surface changed in one to three ways, and the command a user would run on it."""

from __future__ import annotations

import json
import signal
from typing import Any

from hypothesis import strategies as st

from tests.fuzz import api_calls, bases, datasets, own_logs, written
from tests.fuzz.bases import BASES, LLM, SOURCE_FORMATS, recipe_text
from tests.fuzz.runner import Case
from tests.fuzz.server import ReplySpec, describe
from tests.fuzz.values import (
    ODD_STRINGS,
    SPECIAL_PATHS,
    byte_edits,
    edited,
    mutated,
    mutations,
    to_json,
)
from tests.fuzz.values import describe as describe_changes

RUN = ("run", "recipe.yaml", "--output-dir", "out")


# -- (a) recipes --------------------------------------------------------------------------------------------
WHOLE_RECIPES = {
    "billion-laughs": b"a: &a [x, x, x, x, x, x, x, x, x]\n"
    + b"".join(f"{c}: &{c} [{', '.join([f'*{p}'] * 9)}]\n".encode() for p, c in zip("abcdefgh", "bcdefghi")),
    "deep-flow": b"name: " + b"[" * 100_000,
    "deep-block": b"".join(b"  " * depth + b"- \n" for depth in range(3000)),
    "empty": b"",
    "only-comment": b"# nothing\n",
    "a-list": b"- name: x\n",
    "binary": bytes(range(256)),
    "python-tag": b"!!python/object/apply:os.system ['echo pwned > pwned.txt']\n",
    "huge-key": b"name: quick\n" + b"k" * 2_000_000 + b": 1\n",
    "duplicate-keys": b"name: a\nname: b\nseed: 1\nseed: 2\n",
}

# where a recipe can point at a file, and the odd files it can point at
PATH_FIELDS = [("sources", 0, "path"), ("templates_dir",), ("output_dir",)]
ODD_TARGETS = ["data/fifo", "data/loop", "data", "out", "recipe.yaml", "missing.json", "out/earlier-run/run.json"]


@st.composite
def recipe_cases(draw) -> Case:
    base = BASES[draw(st.sampled_from(sorted(BASES)))]
    how = draw(st.sampled_from(["structure", "structure", "structure", "text", "whole", "odd-path"]))
    command = draw(st.sampled_from([RUN, RUN, ("validate", "recipe.yaml")]))
    names = ("recipe.yaml", base.source_path.split("/")[-1])
    if how == "structure":
        changes = draw(mutations(base.recipe))
        files, what = base.files(recipe=mutated(base.recipe, changes)), describe_changes(changes)
    elif how == "text":
        edits = draw(byte_edits(recipe_text(base.recipe)))
        files, what = base.files(), f"recipe bytes edited: {describe_changes(edits)}"
        files["recipe.yaml"] = edited(files["recipe.yaml"], edits)
    elif how == "whole":
        name = draw(st.sampled_from(sorted(WHOLE_RECIPES)))
        files, what = {**base.files(), "recipe.yaml": WHOLE_RECIPES[name]}, f"the whole recipe is {name}"
    else:
        field = draw(st.sampled_from(PATH_FIELDS))
        target = draw(st.sampled_from(ODD_TARGETS + SPECIAL_PATHS))
        recipe = mutated(base.recipe, [("set", field, target)])
        files, what = base.files(recipe=recipe), f"{'.'.join(map(str, field))} = {target!r}"
        names = (*names, target.split("/")[-1] or target)
    return Case(
        "recipes",
        command,
        files,
        fifos=("data/fifo",),
        links=(("data/loop", "loop"),),
        names=names,
        what=f"{base.name}: {what}",
    )


# -- (b) source files ---------------------------------------------------------------------------------------
def parsed(base: bases.Base) -> Any:
    """A source file as one tree: a JSON document, or the list of a JSON-lines file's records."""
    text = base.source.decode()
    return json.loads(text) if base.source_path.endswith(".json") else [json.loads(line) for line in text.splitlines()]


def serialised(base: bases.Base, tree: Any) -> bytes:
    if base.source_path.endswith(".json") or not isinstance(tree, list):
        return to_json(tree)
    return b"".join(to_json(record) + b"\n" for record in tree)


@st.composite
def source_cases(draw, formats: tuple[str, ...] = SOURCE_FORMATS) -> Case:
    base = BASES[draw(st.sampled_from(formats))]
    tree = parsed(base)
    if draw(st.booleans()):
        changes = draw(mutations(tree))
        source, what = serialised(base, mutated(tree, changes)), describe_changes(changes)
    else:
        edits = draw(byte_edits(base.source))
        source, what = edited(base.source, edits), f"bytes edited: {describe_changes(edits)}"
    name = base.source_path.split("/")[-1]
    return Case(
        "sources",
        draw(st.sampled_from([RUN, ("validate", "recipe.yaml")])),
        base.files(source=source),
        names=(name, "recipe.yaml"),
        what=f"{base.source_path} ({base.recipe['sources'][0]['format']}): {what}",
    )


# -- (c) fake-server replies --------------------------------------------------------------------------------
HEADERS = st.sampled_from(
    [
        ("content-encoding", "gzip"),
        ("content-encoding", "br"),
        ("content-encoding", "deflate"),
        ("content-encoding", "zstd"),
        ("content-encoding", "x-unknown"),
        ("content-length", "0"),
        ("content-length", "3"),
        ("content-length", "99999999"),
        ("content-length", "-1"),
        ("content-length", "abc"),
        ("transfer-encoding", "chunked"),
        ("location", "http://127.0.0.1:9/v1/chat/completions"),
        ("location", "/v1/chat/completions"),
        ("location", "/elsewhere"),
        ("retry-after", "0"),
        ("retry-after", "-5"),
        ("retry-after", "1e9"),
        ("retry-after", "abc"),
        ("retry-after", "Wed, 21 Oct 2099 07:28:00 GMT"),
        ("retry-after-ms", "-1"),
        ("retry-after-ms", "1e12"),
        ("retry-after-ms", "nan"),
        ("content-type", "text/html"),
        ("content-type", "application/json; charset=latin-1"),
        ("content-type", ""),
        ("x-ratelimit-remaining-requests", "-1"),
    ]
)
CONTENTS = st.sampled_from(
    [
        '{"question": "What did we say?"}',
        "",
        None,
        "\ud800",
        '{"question": "\ud800 what?"}',
        '{"question": "\\ud800 escaped?"}',
        "not json at all",
        '{"question": null}',
        '{"question": 1e999}',
        '{"question": ' + "[" * 5000,
        "x" * 2_000_000,
        '{"question": "' + "q" * 100_000 + '"}',
        "```json\n{}\n```",
        '{"question": "a\\u0000b?"}',
    ]
)
USAGE_VALUES = st.sampled_from([-1, 0, 10**20, 2**63, "abc", None, 1.5, float("nan"), [], {}])
BODIES = st.sampled_from(
    [
        b"",
        b"{",
        b"null",
        b"[]",
        b'{"choices": []}',
        b'{"choices": [{"message": null, "index": 0, "finish_reason": "stop"}]}',
        b'{"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant"}}]}',
        b'{"error": "a string, not an object"}',
        b"\xff\xfe\x00garbage",
        b"\x1f\x8b\x08\x00not really gzip",
        b'{"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", "content": "\\ud800"}, '
        b'"finish_reason": "stop"}], "usage": {"prompt_tokens": 1, "completion_tokens": 1}}',
        b"<html><body>502 Bad Gateway</body></html>",
    ]
)
STATUSES = st.sampled_from(
    [200, 200, 200, 201, 204, 301, 302, 307, 400, 401, 403, 404, 408, 413, 422, 429, 500, 502, 503]
)


@st.composite
def hostile_reply(draw) -> ReplySpec:
    usage = draw(st.lists(st.tuples(st.sampled_from(["prompt_tokens", "completion_tokens"]), USAGE_VALUES), max_size=2))
    return ReplySpec(
        status=draw(STATUSES),
        headers=tuple(draw(st.lists(HEADERS, max_size=2, unique_by=lambda header: header[0]))),
        content=draw(CONTENTS),
        usage=tuple(usage),
        finish_reason=draw(st.sampled_from(["stop", "stop", "length", "content_filter", "tool_calls", "weird"])),
        body=draw(st.one_of(st.none(), st.none(), BODIES)),
        hang=draw(st.integers(0, 19)) == 0,
    )


# a time+content question's answer (gen/products/time_content/answer_rules.py), in a reply whose question is good
TCQ_ANSWERS = [
    "",
    " ",
    "\n\t",
    ".",
    "Maya.",  # a speaker of the conversation alone
    "Maya and Tomas.",
    "On 22 March 2024, in the first session.",  # the time alone
    "In the 1st session on March 22nd.",
    '"a quoted stretch"',
    "'single quotes'",
    "«guillemets» and “curly quotes”",
    "line one\nline two\r\nline three",
    "paint " * 5000,  # thousands of words
    "x" * 300_000,  # one enormous word
    "Она рассказала о поездке на озеро",  # Cyrillic
    "她谈到了湖边的旅行",  # Chinese: no spaces between words
    "تحدثت عن الرحلة",  # Arabic, right to left
    "\u202etrip the about talked",
    "\x00\x1b[2J",
    "😀😀",
    "1 2 3 4 5",
    "the the the of and",  # stop words only
    "\ud800 lone surrogate",
    "It comes from session one: the passage, the question, the answer.",  # the prompt's own words
]


def tcq_answer_twist() -> st.SearchStrategy:
    """A good reply whose answer is odd: an odd text, another JSON type, the question again, or no answer."""
    values = st.one_of(st.sampled_from(TCQ_ANSWERS), st.sampled_from([None, 5, 1e999, True, [], {}, ["the lake"]]))
    return st.one_of(
        st.builds(lambda value: ("set", ("answer", value)), values),
        st.just(("from", ("answer", "question"))),  # an answer that only repeats the question
        st.just(("from", ("question", "answer"))),  # a question that is the answer
        st.just(("raw", '{"question": "What did Maya talk about?"}')),  # no answer at all
    )


@st.composite
def reply_cases(draw) -> Case:
    twisted = st.builds(lambda twist: ReplySpec(good=True, twist=twist), tcq_answer_twist())
    replies = st.one_of(st.just(ReplySpec(good=True)), hostile_reply(), twisted, twisted)
    plan = tuple(draw(st.lists(replies, min_size=1, max_size=3)))
    recipe = bases.llm_recipe(per_conversation=draw(st.integers(1, 3)))
    if draw(st.booleans()):
        recipe["llm"]["main"]["structured_output"] = draw(st.sampled_from(["auto", "json_schema", "off"]))
    return Case(
        "replies",
        RUN,
        LLM.files(recipe=recipe),
        names=("base_url", "endpoint", "main", "127.0.0.1", "time_content_questions", "recipe.yaml"),
        replies=plan,
        what=describe(plan),
        timeout_s=90,
    )


# -- (d) predictions, results ---------------------------------------------------------------------------------
def jsonl_bytes(records: Any) -> bytes:
    if not isinstance(records, list):
        return to_json(records)
    return b"".join(to_json(record) + b"\n" for record in records)


@st.composite
def changed_file(draw, tree: Any, as_lines: bool) -> tuple[bytes, str]:
    """A valid file (JSON, or JSON lines when `as_lines`) changed by structure or byte edits."""
    valid = jsonl_bytes(tree) if as_lines else to_json(tree)
    if draw(st.booleans()):
        changes = draw(mutations(tree))
        result = mutated(tree, changes)
        return (jsonl_bytes(result) if as_lines else to_json(result)), describe_changes(changes)
    edits = draw(byte_edits(valid))
    return edited(valid, edits), f"bytes edited: {describe_changes(edits)}"


@st.composite
def prediction_cases(draw) -> Case:
    files = dict(datasets.dataset_files())
    predictions = datasets.valid_predictions()[: draw(st.integers(1, 6))]
    files["mine.jsonl"], what = draw(changed_file(predictions, as_lines=True))
    extra = draw(st.sampled_from([(), ("--k", "3"), ("--json", "out/scores.json"), ("--csv", "out/scores.csv")]))
    return Case(
        "predictions",
        ("eval", "ds", "--predictions", "mine.jsonl", *extra),
        files,
        names=("mine.jsonl", "--k", "ds"),
        what=f"predictions: {what}",
    )


@st.composite
def result_cases(draw) -> Case:
    format_name = draw(st.sampled_from(datasets.FORMATS))
    files = dict(datasets.dataset_files())
    valid = datasets.valid_results(format_name)
    if format_name == "beir" and draw(st.booleans()):  # a TREC run file, edited as text
        lines = "".join(f"{q} Q0 {d} 1 {s} mine\n" for q, docs in valid.items() for d, s in docs.items())
        edits = draw(byte_edits(lines.encode()))
        content, what = edited(lines.encode(), edits), f"TREC run, bytes edited: {describe_changes(edits)}"
        if draw(st.booleans()):  # a line with an odd query or document id and a score that is no number
            query, document = draw(st.sampled_from(ODD_STRINGS[:12])), draw(st.sampled_from(ODD_STRINGS[:12]))
            content += f"{query} Q0 {document} 1 x y\n".encode("utf-8", "surrogatepass")
    else:
        content, what = draw(changed_file(valid, as_lines=format_name == "longmemeval"))
    files["results.json"] = content
    export = () if format_name == "beir" else ("--export", f"exp-{format_name}")
    return Case(
        "results",
        ("import-predictions", "results.json", "--format", format_name, *export, "--output", "out/preds.jsonl"),
        files,
        names=("results.json", f"exp-{format_name}", "--export", "--prediction-key"),
        what=f"{format_name} results: {what}",
    )


# -- (e) templates --------------------------------------------------------------------------------------------
HOSTILE_TEMPLATES = [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{% for i in range(10**9) %}{% endfor %}",
    "{% for i in range(10**5) %}{% for j in range(10**5) %}{% endfor %}{% endfor %}",
    "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
    "{{ 'a' * 10**9 }}",
    "{{ 10 ** 10 ** 10 }}",
    "{{ (10 ** 100000) | string }}",
    "{% include '/etc/passwd' %}",
    "{% include '../recipe.yaml' %}",
    "{% extends 'time_queries/frames.j2' %}",
    "{{ undefined_thing.attribute }}",
    "{% if %}",
    "{{",
    "{% raw %}never closed",
    "{{ 1 / 0 }}",
    "{{ lipsum(10**6) }}",
    "{{ range(10**8) | list | length }}",
    "{% set x = [] %}{% for i in range(50) %}{% set _ = x.append(x) %}{% endfor %}{{ x }}",
    "{{ self.__init__.__globals__ }}",
    "{{ cycler.__init__.__globals__.os.environ }}",
    "{{ '%s' | format(10**5000) }}",
    "{{ time }}" * 200_000,
    "\x00\x01\x02",
    "",
]
TEMPLATE_FILES = ["time_queries/frames.j2", "card/README.md.j2", "ambiguous/resolved.j2"]


@st.composite
def template_cases(draw) -> Case:
    base = BASES["quickstart"]
    recipe = {**base.recipe, "templates_dir": "tpl"}
    where = draw(st.sampled_from(TEMPLATE_FILES))
    files = base.files(recipe=recipe)
    fifos: tuple[str, ...] = ()
    links: tuple[tuple[str, str], ...] = ()
    kind = draw(st.sampled_from(["text", "text", "text", "bytes", "fifo", "link", "folder"]))
    if kind == "text":
        body = draw(st.sampled_from(HOSTILE_TEMPLATES))
        files[f"tpl/{where}"], what = body.encode("utf-8", "surrogatepass"), f"{where} = {body[:80]!r}"
    elif kind == "bytes":
        files[f"tpl/{where}"], what = b"\xff\xfe{{ time }}\xc3\x28", f"{where} is not UTF-8"
    elif kind == "fifo":
        fifos, what = (f"tpl/{where}",), f"{where} is a FIFO"
    elif kind == "link":
        links, what = ((f"tpl/{where}", "/dev/zero"),), f"{where} links to /dev/zero"
    else:
        files[f"tpl/{where}/inner"], what = b"x", f"{where} is a folder"
    return Case(
        "templates",
        RUN,
        files,
        fifos=fifos,
        links=links,
        names=(where.split("/")[-1], "tpl", "recipe.yaml", "templates_dir"),
        what=what,
    )


# -- (f) command-line values ----------------------------------------------------------------------------------
CLI_VALUES = [
    "-1",
    "0",
    "1",
    "99999999999999999999",
    "inf",
    "-inf",
    "nan",
    "1e309",
    "0.0000001",
    "",
    " ",
    "\u202e",
    "out",
    "recipe.yaml",
    "data/sample_locomo.json",
    "ds",
    "ds/run.json",
    ".",
    "/",
    "/dev/full",
    "/dev/null",
    "/dev/zero",
    "/proc/self/mem",
    "out/earlier-run",
    "out/earlier-run/run.json",
    "missing/deep/path",
    "-",
    "--help",
]
COMMANDS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    # command words and positional arguments, then each option with a valid value ("" for a flag)
    "run": (
        ("run", "recipe.yaml"),
        {
            "--output-dir": "out",
            "--limit": "1",
            "--source-dir": "data",
            "--offline": "",
            "--cache-dir": "cache",
            "--max-concurrency": "2",
            "--requests-per-minute": "60",
            "--tokens-per-minute": "1000",
            "--workers": "2",
            "--executor": "local",
            "--batch-export": "out/batches",
            "--batch-import": "out/batches",
            "--request-processes": "1",
        },
    ),
    "validate": (("validate", "recipe.yaml"), {"--source-dir": "data"}),
    "plan": (("plan", "recipe.yaml"), {"--limit": "1", "--cache-dir": "cache"}),
    "preview": (
        ("preview", "recipe.yaml"),
        {"--product": "time_queries", "--index": "0", "--limit": "1", "--cache-dir": "cache"},
    ),
    "eval": (
        ("eval", "ds", "--predictions", "mine.jsonl"),  # it or --answers is required: an eval without is a usage error
        {"--json": "out/s.json", "--csv": "out/s.csv", "--k": "5", "--revision": "main"},
    ),
    "export": (("export", "ds"), {"--format": "beir", "--output": "out/exp", "--config": "time_queries"}),
    "baseline": (("baseline", "recent", "ds"), {"--output": "out/b.jsonl", "--k": "5", "--whole-dialogue": ""}),
    "import-predictions": (
        ("import-predictions", "results.json"),
        {"--format": "beir", "--output": "out/p.jsonl", "--export": "exp-beir"},
    ),
    "cache repair": (("cache", "repair"), {"--cache-dir": "cache"}),
    "batches": (("batches",), {"--cache-dir": "cache"}),
}
OUTPUT_OPTIONS = {"--output-dir", "--json", "--csv", "--output", "--batch-export", "--cache-dir"}


@st.composite
def cli_cases(draw) -> Case:
    name = draw(st.sampled_from(sorted(COMMANDS)))
    words, options = COMMANDS[name]
    args, outputs, what = list(words), ["out", "cache"], []
    if draw(st.integers(0, 4)) == 0:  # a hostile positional argument
        position = draw(st.integers(0, len(args) - 1))
        args[position] = draw(st.sampled_from(CLI_VALUES))
        what.append(f"argument {position} = {args[position]!r}")
    for option in draw(st.lists(st.sampled_from(sorted(options)), max_size=3, unique=True)):
        if options[option] == "":
            args.append(option)
            continue
        value = draw(st.one_of(st.just(options[option]), st.sampled_from(CLI_VALUES)))
        args += [option, value]
        what.append(f"{option} {value!r}")
        if option in OUTPUT_OPTIONS:
            outputs.append(value)
    files = {**BASES["quickstart"].files(), **datasets.dataset_files()}
    files["mine.jsonl"] = jsonl_bytes(datasets.valid_predictions()[:3])
    files["results.json"] = to_json(datasets.valid_results("beir"))
    names = (*args[1:], "cache")  # every argument, option and value given; the default cache
    if args[0] != words[0]:  # the command word itself was replaced: the message may name it
        names = (args[0], *names)
    if name == "run" and "--output-dir" not in args:
        outputs.append("outputs")  # a run's default output folder, ./outputs
    return Case("cli", tuple(args), files, outputs=tuple(outputs), names=names, what=", ".join(what) or "valid")


# -- (g) signals ----------------------------------------------------------------------------------------------
SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP]


@st.composite
def signal_cases(draw) -> Case:
    signum = draw(st.sampled_from(SIGNALS))
    # from 0.1 s: before that the interpreter itself is starting (about 30 ms here, more on a loaded machine), and
    # no program can catch a signal before its code runs (the runner waits for gen/program.py to take them)
    at = draw(st.floats(0.1, 2.5))
    if draw(st.booleans()):
        base, replies, timeout = BASES["quickstart"], (), 60.0
        files = base.files()
    else:  # during the LLM calls: replies come slowly, so the signal lands while requests are on their way
        base, replies, timeout = LLM, (ReplySpec(good=True, delay=0.3),), 90.0
        files = LLM.files(recipe=bases.llm_recipe(per_conversation=3))
        at += 0.5
    workers = draw(st.sampled_from([(), ("--workers", "2")]))
    return Case(
        "signals",
        (*RUN, *workers),
        files,
        signal_at=(int(signum), at),
        replies=replies,
        names=("recipe.yaml",),
        what=f"{signal.Signals(signum).name} at {at:.2f}s into a run of {base.name}",
        timeout_s=timeout,
    )


SURFACES = {
    "recipes": recipe_cases(),
    "sources": source_cases(),
    "replies": reply_cases(),
    "predictions": prediction_cases(),
    "results": result_cases(),
    "templates": template_cases(),
    "cli": cli_cases(),
    "signals": signal_cases(),
    # people's own logs (tests/fuzz/own_logs.py)
    "own_sources": own_logs.own_source_cases(),
    "own_recipes": own_logs.own_recipe_cases(),
    "answers": own_logs.answers_cases(),
    "push": own_logs.push_cases(),
    "terminal": own_logs.terminal_cases(),
    "timelines": own_logs.timeline_cases(),
    # answers a model writes (tests/fuzz/written.py)
    "gold": written.gold_cases(),
    "judge": written.judge_cases(),
    # gen's Python API called with hostile option values (tests/fuzz/api_calls.py)
    "api": api_calls.api_cases(),
}
