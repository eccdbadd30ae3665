"""The surfaces of people's own logs: the message readers (messages, sharegpt, chatgpt, csv, tsv, chat_logs with
its observed clock), the recipe's `clock:`, `options:` and `redact:`, the temporal_reasoning product, `gen eval
--answers` and `gen push --personal-data-ok`. Each strategy draws a `Case` (tests/fuzz/runner.py) from a valid
input of tests/fuzz/bases.py (PERSONAL_BASES) changed in one to three ways."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

from tests.fuzz import bases, datasets
from tests.fuzz.bases import PERSONAL_BASES, PERSONAL_FORMATS, Base
from tests.fuzz.runner import Case
from tests.fuzz.values import ODD_STRINGS, byte_edits, edited, hostile_values, mutated, mutations, to_json
from tests.fuzz.values import describe as describe_changes

RUN = ("run", "recipe.yaml", "--output-dir", "out")
COMMANDS = st.sampled_from([RUN, ("validate", "recipe.yaml")])

# times as people's logs and exports write them, and as they should not
TIMES = [
    "2024-03-01T09:00:00+01:00",
    "2024-03-01T09:00:00Z",
    "2024-03-01 09:00",
    "1 March 2024, 9:00 am",
    "March 1, 2024 9:00 AM",
    "01/03/2024 09:00",
    "03/13/2024",
    "13/03/2024",
    "2024-02-30 10:00",
    "2024-03-01 24:00",
    "9:00",
    "tomorrow",
    "0001-01-01T00:30:00+01:00",
    "0001-01-01T00:00:00",
    "9999-12-31T23:59:59-05:00",
    "9999-12-31T23:59:59",
    "2024-03-01T09:00:00+23:59",
    "2024-03-01 09:00 +9999",
    "2024-03-01 09:00 -2400",
    "2024-03-01 09:00 UTC+14",
    "2024-03-01 09:00 EST",
    "2024-03-01T09:00:00.999999999",
    "٢٠٢٤-٠٣-٠١ ٠٩:٠٠",
    "2024-03-01\x0009:00",
    "1e999",
    "99999999999999999999",
    "-1",
    "0",
    "2024-03-01 09:00" + " " * 1000 + "pm",
    "1" * 5000,
    "March " * 2000,
]
UNIX_TIMES = [0, -1, 1.5, -62135596800, -62135596801, 253402300799, 253402300800, 2**63, -(2**63), 10**30, 1e308]
TIME_KEYS = {"timestamp", "time", "Sent", "create_time", "update_time"}


def time_values() -> st.SearchStrategy:
    return st.one_of(st.sampled_from(TIMES), st.sampled_from(UNIX_TIMES), st.sampled_from(ODD_STRINGS[:20]))


def tree_of(base: Base) -> Any:
    text = base.source.decode()
    return json.loads(text) if base.source_path.endswith(".json") else [json.loads(line) for line in text.splitlines()]


def serialised(base: Base, tree: Any) -> bytes:
    if base.source_path.endswith(".json") or not isinstance(tree, list):
        return to_json(tree)
    return b"".join(to_json(record) + b"\n" for record in tree)


def time_paths(tree: Any, prefix: tuple = ()) -> list[tuple]:
    """The paths of every time in a parsed source (the fields TIME_KEYS name)."""
    found = []
    if isinstance(tree, dict):
        for key, value in tree.items():
            found += [(*prefix, key)] if key in TIME_KEYS else time_paths(value, (*prefix, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            found += time_paths(value, (*prefix, index))
    return found


@st.composite
def retimed(draw, tree: Any) -> list[tuple]:
    """One to three of a source's times set to odd times (mixed zones, forms, ranges)."""
    paths = time_paths(tree)
    if not paths:
        return []
    picked = draw(st.lists(st.sampled_from(paths), min_size=1, max_size=3, unique=True))
    return [("set", path, draw(time_values())) for path in picked]


# -- a ChatGPT export's tree ----------------------------------------------------------------------------------
def chatgpt_tree_attack(name: str) -> tuple[Any, str]:
    export = bases.chatgpt_export()
    conversation = export[0]
    mapping = conversation["mapping"]
    if name == "cycle":
        mapping["root"]["parent"] = conversation["current_node"]
    elif name == "self-parent":
        mapping["m3"]["parent"] = "m3"
    elif name == "missing-current-node":
        del conversation["current_node"]
    elif name == "current-node-null":
        conversation["current_node"] = None
    elif name == "current-node-unknown":
        conversation["current_node"] = "nowhere"
    elif name == "current-node-a-list":
        conversation["current_node"] = ["m5"]
    elif name == "parent-a-list":
        mapping["m2"]["parent"] = ["m1"]
    elif name == "parent-a-long-string":
        mapping["m2"]["parent"] = "p" * 200_000
    elif name == "parent-a-dict":
        mapping["m2"]["parent"] = {"deep": bases.json.loads("[" * 40 + "]" * 40)}
    elif name == "mapping-a-list":
        conversation["mapping"] = list(mapping.values())
    elif name == "mapping-missing":
        del conversation["mapping"]
    elif name == "long-chain":  # 100,000 nodes in one branch: walked without recursion
        chain = {f"n{k}": {"message": None, "parent": f"n{k - 1}" if k else None} for k in range(100_000)}
        chain["n99999"]["message"] = mapping["m0"]["message"]
        chain["n99998"]["message"] = mapping["m1"]["message"]
        conversation["mapping"], conversation["current_node"] = chain, "n99999"
    elif name == "parts-odd":
        mapping["m1"]["message"]["content"]["parts"] = [{"text": 5}, None, ["x"], {"type": "image"}, "ok"]
    elif name == "content-a-string":
        mapping["m1"]["message"]["content"] = "hello"
    elif name == "author-a-string":
        mapping["m1"]["message"]["author"] = "user"
    elif name == "role-a-number":
        mapping["m1"]["message"]["author"]["role"] = 7
    elif name == "three-roles":
        mapping["m2"]["message"]["author"]["role"] = "critic"
    elif name == "hidden-all":
        for node in mapping.values():
            if node["message"]:
                node["message"]["metadata"] = {"is_visually_hidden_from_conversation": True}
    elif name == "create-time-odd":
        mapping["m4"]["message"]["create_time"] = {"seconds": 1}
    elif name == "times-backwards":
        mapping["m4"]["message"]["create_time"] = mapping["m1"]["message"]["create_time"] - 3600
    elif name == "duplicate-conversations":
        export = export + export
    elif name == "conversation-id-odd":
        conversation["conversation_id"] = ["c"]
        conversation["id"] = 12
    elif name == "empty-list":
        export = []
    elif name == "not-a-list":
        export = conversation
    return export, f"ChatGPT tree: {name}"


CHATGPT_ATTACKS = [
    "cycle",
    "self-parent",
    "missing-current-node",
    "current-node-null",
    "current-node-unknown",
    "current-node-a-list",
    "parent-a-list",
    "parent-a-long-string",
    "parent-a-dict",
    "mapping-a-list",
    "mapping-missing",
    "long-chain",
    "parts-odd",
    "content-a-string",
    "author-a-string",
    "role-a-number",
    "three-roles",
    "hidden-all",
    "create-time-odd",
    "times-backwards",
    "duplicate-conversations",
    "conversation-id-odd",
    "empty-list",
    "not-a-list",
]


# -- CSV and TSV ----------------------------------------------------------------------------------------------
TABLE_ATTACKS = [
    "empty",
    "header-only",
    "only-blank-lines",
    "ragged-short",
    "ragged-long",
    "nul",
    "bom",
    "cr-only",
    "unterminated-quote",
    "quote-in-bare-cell",
    "enormous-cell",
    "duplicate-header",
    "blank-header",
    "header-with-spaces",
    "mixed-times",
    "zoned-then-local",
    "three-speakers",
    "empty-speaker",
    "wrong-delimiter",
    "latin-1",
    "utf-16",
    "many-columns",
    "duplicate-rows",
    "control-characters",
]


def table_attack(base: Base, name: str) -> tuple[bytes, str]:
    text = base.source
    delimiter = b"\t" if base.source_path.endswith(".tsv") else b","
    lines = text.split(b"\r\n")
    header, rows = lines[0], lines[1:]
    if name == "empty":
        text = b""
    elif name == "header-only":
        text = header + b"\r\n"
    elif name == "only-blank-lines":
        text = b"\r\n\r\n\n\n"
    elif name == "ragged-short":
        text = text.replace(b"c1" + delimiter + b"Bob", b"Bob", 1)
    elif name == "ragged-long":
        text = text.replace(b"\r\n", delimiter + b"extra\r\n", 3)
    elif name == "nul":
        text = text.replace(b"pottery", b"pot\x00tery")
    elif name == "bom":
        text = b"\xef\xbb\xbf" + text
    elif name == "cr-only":
        text = text.replace(b"\r\n", b"\r")
    elif name == "unterminated-quote":
        text = text.replace(b"c1" + delimiter + b"Ann", b'"c1' + delimiter + b"Ann", 1)
    elif name == "quote-in-bare-cell":
        text = text.replace(b"Morning", b'Mor"ning', 1)
    elif name == "enormous-cell":
        text = text.replace(b"Next week", b"w " * 3_000_000, 1)
    elif name == "duplicate-header":
        text = text.replace(b"Chat", b"From", 1)
    elif name == "blank-header":
        text = text.replace(b"Chat", b"", 1)
    elif name == "header-with-spaces":
        text = text.replace(b"From", b" From ", 1)
    elif name == "mixed-times":
        text = text.replace(b"2024-03-08 18:00:00", b"8 March 2024, 6 pm").replace(b"2024-03-01 09:03:00", b"03/01/24")
    elif name == "zoned-then-local":
        text = text.replace(b"2024-03-01 09:00:00", b"2024-03-01T09:00:00+01:00")
    elif name == "three-speakers":
        text = text.replace(b"Bob", b"Cat", 1)
    elif name == "empty-speaker":
        text = text.replace(b"Ann", b"", 1)
    elif name == "wrong-delimiter":
        text = text.replace(delimiter, b";")
    elif name == "latin-1":
        text = text.replace(b"Morning", "Mörning".encode("latin-1"))
    elif name == "utf-16":
        text = text.decode().encode("utf-16")
    elif name == "many-columns":
        text = header + delimiter + delimiter.join(b"c%d" % k for k in range(100_000)) + b"\r\n" + b"\r\n".join(rows)
    elif name == "duplicate-rows":
        text = header + b"\r\n" + b"\r\n".join(rows * 50)
    elif name == "control-characters":
        text = text.replace(b"Morning", b"\x1b[2J\x1b]0;title\x07\x08\x7fMorning")
    return text, f"table: {name}"


# -- the source files -------------------------------------------------------------------------------------------
@st.composite
def own_source_cases(draw, formats: tuple[str, ...] = PERSONAL_FORMATS) -> Case:
    """A source file of one of the message readers: its structure or its bytes changed, its times made odd, or
    an attack of its own kind (a ChatGPT tree's loops, a table's ragged rows)."""
    name = draw(st.sampled_from(formats))
    base = PERSONAL_BASES[name]
    table = name in ("csv", "tsv")
    how = draw(st.sampled_from(["structure", "times", "bytes", "attack", "attack"]))
    if how == "attack" and table:
        source, what = table_attack(base, draw(st.sampled_from(TABLE_ATTACKS)))
    elif how == "attack" and name == "chatgpt":
        export, what = chatgpt_tree_attack(draw(st.sampled_from(CHATGPT_ATTACKS)))
        source = to_json(export)
    elif how in ("structure", "times", "attack") and not table:
        tree = tree_of(base)
        changes = draw(retimed(tree)) if how == "times" else []
        changes = changes or draw(mutations(tree))
        source, what = serialised(base, mutated(tree, changes)), describe_changes(changes)
    else:
        edits = draw(byte_edits(base.source))
        source, what = edited(base.source, edits), f"bytes edited: {describe_changes(edits)}"
    return Case(
        "own_sources",
        draw(COMMANDS),
        base.files(source=source),
        names=(base.source_path.split("/")[-1], "recipe.yaml"),
        what=f"{base.source_path} ({name}): {what}",
    )


# -- the recipe's clock, options, redact and temporal_reasoning ---------------------------------------------------
REDACT_NAMES = [
    "Ann",
    "(Ann)",
    ".*",
    "a|b",
    "[",
    "\\",
    "\\1",
    "(?P<x>Ann)",
    "(?i)",
    "$",
    "^",
    "Ann Bob",
    "A  n  n",
    "É",
    "e\u0301",
    "İ",
    "ß",
    "ǅ",
    "😀",
    "\u200b",
    "\u202eAnn",
    "\x00",
    "a" * 5000,
    "[NAME]",
    "{{ name }}",
    "{0}",
    "%s",
    "ann@example.com",
    "https://example.org/bowls",
    "+44 20 7946 0958",
    "pottery class",
    "the",
]
PLACEHOLDERS = [
    "{{ 7 * 7 }}",
    "{% for x in range(10**9) %}{% endfor %}",
    "{0}{1}",
    "{name}",
    "%s%n",
    "\\1",
    "\\g<0>",
    "$1",
    "[NAME]",
    "ann@example.com",
    "Ann",
    "\n",
    " ",
    "\x00",
    "😀",
    "x" * 100_000,
]


@st.composite
def redact_section(draw) -> tuple[Any, str]:
    """A `redact:` section with odd names, odd placeholders or odd settings."""
    how = draw(st.sampled_from(["names", "names", "placeholders", "settings", "whole"]))
    section: Any = dict(bases.REDACT)
    if how == "names":
        names = draw(st.lists(st.sampled_from(REDACT_NAMES), min_size=1, max_size=4))
        if draw(st.integers(0, 9)) == 0:
            names = names * 20_000  # a long list
        section = {**section, "names": names, "ignore_case": draw(st.booleans())}
        what = f"names {names[:4]!r}{' x20,000' if len(names) > 4 else ''}"
    elif how == "placeholders":
        kind = draw(st.sampled_from(["email", "phone", "url", "name", "unknown"]))
        value = draw(st.one_of(st.sampled_from(PLACEHOLDERS), hostile_values))
        section = {**section, "placeholders": {kind: value}}
        what = f"placeholders.{kind} = {value!r}"[:200]
    elif how == "settings":
        key = draw(st.sampled_from(["emails", "phones", "urls", "phone_region", "ignore_case", "names", "other"]))
        value = draw(st.one_of(st.sampled_from(["gb", " GB", "XX", "", "001", "UK", "ZZ"]), hostile_values))
        section = {**section, key: value}
        what = f"{key} = {value!r}"[:200]
    else:
        section = draw(
            st.one_of(
                st.sampled_from([None, {}, [], "on", True, {"emails": False, "phones": False, "urls": False}]),
                hostile_values,
            )
        )
        what = f"the section = {section!r}"[:200]
    return section, f"redact: {what}"


TR_OPTIONS = [  # the first five are the options temporal_reasoning has (the counts: 1 to 4)
    "tests",
    "topics_per_conversation",
    "pairs_per_conversation",
    "max_topic_sessions",
    "max_variants_per_group",
    "per_conversation",
    "unknown",
]
TR_VALUES = [0, 1, 2, 10**6, 10**12, -1, [], ["days_ago", "days_ago"], ["nope"], ["which_first"], "last_mention"]
SOURCE_KEYS = ["clock", "options", "dayfirst", "session_break_minutes", "personal", "limit"]
SOURCE_VALUES = [
    "observed",
    "simulated",
    "OBSERVED",
    "both",
    None,
    True,
    0,
    -1,
    1e-9,
    10**9,
    float("nan"),
    {},
    {"group": "pair"},
    {"group": "nope"},
    {"id": "pair"},
    {"time_key": "nope"},
    {"time_key": ""},
    {"speaker": "Chat", "text": "Chat"},
    {"speaker": "From"},
    {"unknown": 1},
    "options",
]


REASONING_TEMPLATES = ["answer.j2", "questions/days_ago.j2", "questions/which_first.j2", "questions/time_between.j2"]
REASONING_TEMPLATE_BODIES = [
    "",
    "\n\n\n",
    "{{ days }} days ago\n{{ days }} days ago",
    "{{ day }} {{ month }}",
    "{{ month }} {{ day }}, {{ year }}",
    "{{ days * 10**400 }} days",
    "{{ days | string * 10**6 }}",
    "{{ 1 / 0 }}",
    "{{ undefined_thing.attribute }}",
    "{% for i in range(10**9) %}{% endfor %}",
    "{{ choice }}{{ choice }}",
    "{{ topic }}?\n" * 5000,
    "How many days ago did we last talk about {{ topic | upper }}?",
    "{{ topic }}",
    "about {{ topic }} and " + "x" * 200_000,
    "\x00{{ topic }}",
    "{% raw %}never closed",
]


@st.composite
def own_recipe_cases(draw) -> Case:
    """A recipe of a message reader with its source entry, `redact:` or temporal_reasoning options changed, or
    any structure mutation of the whole recipe."""
    name = draw(st.sampled_from(PERSONAL_FORMATS))
    base = PERSONAL_BASES[name]
    recipe = json.loads(json.dumps(base.recipe))
    how = draw(st.sampled_from(["redact", "redact", "source", "source", "reasoning", "template", "structure"]))
    files: dict[str, bytes] = {}
    blamed: tuple[str, ...] = ()
    if how == "template":
        where = draw(st.sampled_from(REASONING_TEMPLATES))
        body = draw(st.sampled_from(REASONING_TEMPLATE_BODIES))
        recipe["templates_dir"] = "tpl"
        files[f"tpl/temporal_reasoning/{where}"] = body.encode("utf-8", "surrogatepass")
        what = f"templates_dir: {where} = {body[:80]!r}"
        blamed = (where.split("/")[-1], "tpl", "templates_dir")  # a refused template is named, not the recipe
    elif how == "redact":
        recipe["redact"], what = draw(redact_section())
    elif how == "source":
        key = draw(st.sampled_from(SOURCE_KEYS))
        value = draw(st.one_of(st.sampled_from(SOURCE_VALUES), hostile_values))
        recipe["sources"][0][key] = value
        what = f"sources[0].{key} = {value!r}"[:200]
    elif how == "reasoning":
        product = {"type": "temporal_reasoning"}
        for key in draw(st.lists(st.sampled_from(TR_OPTIONS), min_size=1, max_size=3, unique=True)):
            product[key] = draw(st.one_of(st.sampled_from(TR_VALUES), hostile_values))
        recipe["products"] = [{"type": "log"}, {"type": "conversations"}, product]
        what = f"temporal_reasoning {product!r}"[:200]
    else:
        changes = draw(mutations(recipe))
        recipe, what = mutated(recipe, changes), describe_changes(changes)
    return Case(
        "own_recipes",
        draw(COMMANDS),
        {**base.files(recipe=recipe), **files},
        names=("recipe.yaml", base.source_path.split("/")[-1], *blamed),
        what=f"{name}: {what}",
    )


# -- gen eval --answers, gen push --personal-data-ok ------------------------------------------------------------
ANSWERS_FLAGS = st.sampled_from([(), ("--json", "out/scores.json"), ("--csv", "out/scores.csv")])


def json_lines(tree: Any) -> bytes:
    """A list as JSON lines; anything else (a mutation can replace the whole list) as one JSON text."""
    return b"".join(to_json(line) + b"\n" for line in tree) if isinstance(tree, list) else to_json(tree)


@st.composite
def changed_answers(draw, answers: list[dict]) -> tuple[bytes, str]:
    """An answers file of `gen eval --answers` (`answers`: valid lines) changed by structure, bytes, an odd id or
    as a whole: its content and what was done."""
    how = draw(st.sampled_from(["structure", "structure", "bytes", "ids", "whole"]))
    if how == "structure":
        changes = draw(mutations(answers))
        return json_lines(mutated(answers, changes)), describe_changes(changes)
    if how == "bytes":
        valid = json_lines(answers)
        edits = draw(byte_edits(valid))
        return edited(valid, edits), f"bytes edited: {describe_changes(edits)}"
    if how == "ids":
        first = answers[0]["question_id"]
        odd = draw(st.sampled_from([*ODD_STRINGS[:20], 5, None, ["x"], first.upper(), first + " ", first[:-1]]))
        content = json_lines([*answers, {"question_id": odd, "answer": "1 May 2023"}])
        return content, f"a line with question_id {odd!r}"[:200]
    content = draw(
        st.sampled_from(
            [
                b"",
                b"\n\n",
                b"[]",
                b"{}",
                b"null",
                b"\xef\xbb\xbf" + to_json(answers[0]),
                to_json(answers),
                b"\x00" * 100,
                b'{"question_id": "' + b"q" * 300_000 + b'"}',
            ]
        )
    )
    return content, f"the whole file is {content[:60]!r}"


@st.composite
def answers_cases(draw) -> Case:
    """`gen eval own --answers mine.jsonl` on a temporal_reasoning dataset, the answers file changed."""
    files = dict(datasets.own_dataset_files())
    content, what = draw(changed_answers(datasets.valid_answers()[: draw(st.integers(1, 8))]))
    args = ("eval", "own", "--answers", "mine.jsonl", *draw(ANSWERS_FLAGS))
    if draw(st.integers(0, 5)) == 0:
        args = (*args, "--predictions", "mine.jsonl")
    files["mine.jsonl"] = content
    return Case("answers", args, files, names=("mine.jsonl", "own", "--answers"), what=f"answers: {what}")


@st.composite
def push_cases(draw) -> Case:
    """`gen push` of a run made from people's logs: a dry run, a refused real one, run.json's sources changed."""
    files = dict(datasets.own_dataset_files())
    report = json.loads(files["own/run.json"])
    what = "valid"
    if draw(st.booleans()):
        changes = draw(mutations(report["sources"]))
        report["sources"] = mutated(report["sources"], changes)
        files["own/run.json"], what = to_json(report), f"run.json {describe_changes(changes)}"
    flags = draw(st.lists(st.sampled_from(["--personal-data-ok", "--dry-run"]), unique=True))
    args = ("push", "own", "--repo-id", "me/own", "--export-dir", "out/hub", *flags)
    return Case(
        "push",
        args,
        files,
        # without --dry-run the upload is refused offline, naming the variable that keeps gen off the network
        names=("own", "run.json", "--personal-data-ok", "--repo-id", "me/own", "--export-dir", "HF_HUB_OFFLINE"),
        what=f"push {' '.join(flags)}: {what}",
    )


# -- a terminal: the progress displays drawn over hostile input ---------------------------------------------------
ODD_FILE_NAMES = [
    "data/\x1b[2J\x1b[31mred.jsonl",
    "data/line\nbreak.jsonl",
    "data/\r\rcarriage.jsonl",
    "data/" + "n" * 250,
]


@st.composite
def terminal_cases(draw) -> Case:
    """A case of the own-log surfaces run with stderr on a pseudo-terminal, so the progress display is drawn:
    however the run ends (an error, Ctrl-C, SIGTERM), the terminal is left clean with one closing line."""
    case = draw(st.one_of(own_source_cases(), own_recipe_cases()))
    files, names, what = dict(case.files), case.names, case.what
    path = next(b.source_path for b in PERSONAL_BASES.values() if b.source_path in files)
    if draw(st.integers(0, 3)) == 0 and path.encode() in files["recipe.yaml"]:  # a name with control characters
        odd = draw(st.sampled_from(ODD_FILE_NAMES))
        # a JSON string is a YAML double-quoted scalar: the control characters go in as escapes
        files["recipe.yaml"] = files["recipe.yaml"].replace(path.encode(), json.dumps(odd).encode())
        files[odd] = files.pop(path)
        names, what = (*names, odd.split("/")[-1]), f"{what}; the source file is named {odd[:40]!r}"
    signal_at = None
    if draw(st.integers(0, 2)) == 0:
        signum = draw(st.sampled_from([2, 15, 1]))
        signal_at = (signum, draw(st.floats(0.3, 3.0)))
        what = f"{what}; signal {signum} at {signal_at[1]:.2f}s"
    return Case("terminal", case.args, files, names=names, what=what, signal_at=signal_at, terminal=True, timeout_s=90)


# -- temporal_reasoning over odd timelines ------------------------------------------------------------------------
def stamps(start: str, minutes: list[float]) -> list[str]:
    """Times `minutes` after `start`, as chat logs write them."""
    from datetime import datetime, timedelta

    first = datetime.fromisoformat(start)
    return [(first + timedelta(minutes=offset)).isoformat(sep=" ", timespec="seconds") for offset in minutes]


def odd_timeline(name: str) -> list[tuple[str, str, str]]:
    """DIALOGUE (tests/fuzz/bases.py) on an odd timeline: (time, role, text) per message."""
    texts = [(role, text) for _, role, text in bases.DIALOGUE]
    if name == "one-session":
        times = stamps("2024-03-01 09:00:00", [0, 1, 2, 3, 4, 5])
    elif name == "one-response":
        return [("2024-03-01 09:00:00", *texts[0])]
    elif name == "one-speaker":
        return [(stamp, "user", text) for stamp, _, text in bases.DIALOGUE]
    elif name == "identical-times":
        times = ["2024-03-01 09:00:00"] * 6
    elif name == "one-day-many-sittings":  # sittings hours apart on one date: sessions that share a day
        times = stamps("2024-03-01 06:00:00", [0, 1, 180, 181, 360, 361])
    elif name == "a-sitting-a-message":
        times = stamps("2024-03-01 09:00:00", [0, 1440, 2880, 4320, 5760, 7200])
    elif name == "exactly-the-break":  # the source's session_break_minutes (90) between every two messages
        times = stamps("2024-03-01 09:00:00", [0, 90, 180, 270, 360, 450])
    elif name == "centuries":
        times = ["1900-01-01 00:00:00", "1900-01-01 00:01:00", "2024-03-01 09:00:00"]
        times += stamps("2999-12-31 23:00:00", [0, 1, 2])
    elif name == "many-sittings":  # 400 sittings a day apart, the topics in every one
        many = stamps("2020-01-01 09:00:00", [day * 1440 + turn for day in range(400) for turn in (0, 1)])
        return [(stamp, texts[i % 6][0], texts[i % 6][1]) for i, stamp in enumerate(many)]
    elif name == "topics-everywhere":  # every sitting says every topic: no phrase lies in one session
        times = stamps("2024-03-01 09:00:00", [0, 1, 1440, 1441, 2880, 2881])
        everything = " ".join(text for _, text in texts)
        return [(stamp, role, everything) for stamp, (role, _) in zip(times, texts)]
    elif name == "no-topics":
        times = [stamp for stamp, _, _ in bases.DIALOGUE]
        return [(stamp, role, "ok") for stamp, (role, _) in zip(times, texts)]
    else:  # "as-is"
        times = [stamp for stamp, _, _ in bases.DIALOGUE]
    return [(stamp, role, text) for stamp, (role, text) in zip(times, texts)]


ODD_TIMELINES = [
    "as-is",
    "one-session",
    "one-response",
    "one-speaker",
    "identical-times",
    "one-day-many-sittings",
    "a-sitting-a-message",
    "exactly-the-break",
    "centuries",
    "many-sittings",
    "topics-everywhere",
    "no-topics",
]
REASONING_TESTS = ["last_mention", "days_ago", "which_first", "time_between"]
PADDINGS = {  # the padding a timeline gets: none, or a file of turns (only the padding says the topics, or nothing)
    "none": None,
    "the-topics-again": [{"speaker": "Ann", "text": text} for _, _, text in bases.DIALOGUE],
    "one-word": [{"speaker": "Bob", "text": "ok"}],
}


@st.composite
def timeline_cases(draw) -> Case:
    """temporal_reasoning (and the time queries) over a chat log on an odd timeline (one session, one response,
    identical times, sittings on one day, centuries apart, topics in every session or none), on the observed or
    the simulated clock, with its padding none, only the padding saying the topics, or one word."""
    base = bases.PERSONAL_BASES["chat_clock"]
    shape = draw(st.sampled_from(ODD_TIMELINES))
    lines = [
        {"conversation": "c1", "speaker": "Ann" if role == "user" else "Bob", "text": text, "time": stamp}
        for stamp, role, text in odd_timeline(shape)
    ]
    recipe = json.loads(json.dumps(base.recipe))
    clock = draw(st.sampled_from(["observed", "simulated"]))
    recipe["sources"][0]["clock"] = clock
    files: dict[str, bytes] = {}
    padding = draw(st.sampled_from(sorted(PADDINGS)))
    if PADDINGS[padding] is not None:
        files["data/padding.json"] = json.dumps(PADDINGS[padding]).encode()
        target = draw(st.sampled_from([1, 50, 3000]))
        recipe["timeline"] = {"padding": {"mode": "file", "path": "data/padding.json", "target_words": target}}
    reasoning: dict[str, Any] = {"type": "temporal_reasoning"}
    for key in draw(st.lists(st.sampled_from(TR_OPTIONS[1:5]), max_size=2, unique=True)):
        reasoning[key] = draw(st.sampled_from([1, 2, 50]))
    if draw(st.booleans()):
        reasoning["tests"] = draw(st.lists(st.sampled_from(REASONING_TESTS), min_size=1, max_size=2))
    extra = draw(st.sampled_from([[], [{"type": "time_queries"}], [{"type": "ambiguous_time_queries"}]]))
    recipe["products"] = [{"type": "log"}, {"type": "conversations"}, reasoning, *extra]
    return Case(
        "timelines",
        draw(st.sampled_from([RUN, RUN, ("validate", "recipe.yaml")])),
        {**base.files(recipe=recipe, source=bases.jsonl(lines)), **files},
        names=("recipe.yaml", base.source_path.split("/")[-1], "padding.json"),
        what=f"{shape} on the {clock} clock, padding {padding}: {reasoning} {extra}"[:300],
    )
