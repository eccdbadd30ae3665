"""The surfaces of answers a model writes: gold_answers' replies (claims citing the responses of a window) and the
LLM judge of `gen eval --answers` (its verdicts on a system's answers, and the answers file it judges). Each
strategy draws a `Case` (tests/fuzz/runner.py) against the fake server (tests/fuzz/server.py), whose good reply
passes gen's checks and whose twisted one changes one field of it."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.fuzz import datasets, surfaces
from tests.fuzz.bases import SAMPLE_LOCOMO, recipe_text
from tests.fuzz.own_logs import changed_answers, json_lines
from tests.fuzz.runner import BASE_URL, Case
from tests.fuzz.server import CITE_ATTACKS, CLAIM_ATTACKS, LEFT_OUT_ATTACKS, ReplySpec, describe
from tests.fuzz.values import describe as describe_changes
from tests.fuzz.values import mutated, mutations

RUN = ("run", "recipe.yaml", "--output-dir", "out")
# what a failure may name: the recipe and its endpoint, the fake server, the step and its reject limit
LLM_NAMES = ("recipe.yaml", "main", "base_url", "endpoint", "127.0.0.1", "max_reject_rate")


# -- gold_answers' replies ------------------------------------------------------------------------------------
def gold_twist() -> st.SearchStrategy:
    """A good gold answer with its citations, its left-out list or its claims made hostile."""
    return st.one_of(
        st.tuples(st.just("cites"), st.sampled_from([*sorted(CITE_ATTACKS), "truth-values"])),
        st.tuples(st.just("left_out"), st.sampled_from(sorted(LEFT_OUT_ATTACKS))),
        st.tuples(st.just("claims"), st.sampled_from(sorted(CLAIM_ATTACKS))),
        st.tuples(st.just("raw"), st.sampled_from(["", "[]", '{"claims": "all of them"}', "not json"])),
    )


@st.composite
def gold_cases(draw) -> Case:
    """`gen run` of log, time_queries and gold_answers over one conversation (three windows: three calls, and
    their correction rounds), the fake server's replies drawn from good, twisted and hostile ones."""
    twisted = st.builds(lambda twist: ReplySpec(good=True, twist=twist), gold_twist())
    replies = st.one_of(st.just(ReplySpec(good=True)), twisted, twisted, twisted, surfaces.hostile_reply())
    plan = tuple(draw(st.lists(replies, min_size=1, max_size=3)))
    recipe = datasets.written_recipe(BASE_URL, source="data/sample_locomo.json")
    product = recipe["products"][-1]
    product["verify"] = draw(st.booleans())
    if draw(st.booleans()):
        product["retries"] = draw(st.sampled_from([0, 2]))
        recipe["llm"]["main"]["max_reject_rate"] = draw(st.sampled_from([0.0, 0.5, 1.0]))
    return Case(
        "gold",
        RUN,
        {"recipe.yaml": recipe_text(recipe), "data/sample_locomo.json": SAMPLE_LOCOMO},
        names=(*LLM_NAMES, "gold_answers"),
        replies=plan,
        what=f"gold_answers {'verified' if product['verify'] else 'unverified'}: {describe(plan)}",
        timeout_s=90,
    )


# -- the judge of gen eval --answers --------------------------------------------------------------------------
VERDICTS = ["maybe", "YES", " no ", "Yes.", "yes, mostly", "", "да", "oui", "yes" * 100_000, "\ud800"]
REASONS = ["x" * 2_000_000, "\x1b[2J\x00", "\ud800", "line\nbreak"]
RAW_VERDICTS = [
    "yes",
    "no",
    "not json",
    '```json\n{"reason": "r", "verdict": "yes"}\n```',
    "",
    '{"reason": "r", "verdict": "yes"} and more',
    "[]",
    "null",
    '{"reason": "r", "verdict": "yes", "verdict": "no"}',
    '{"reason": "r"}',
    '{"verdict": "yes"}',
    "{" * 10_000,
]


def judge_twist() -> st.SearchStrategy:
    """A good verdict with its verdict or reason made odd, or a reply that is no verdict at all."""
    odd = st.sampled_from([None, 1, True, ["yes"], {"verdict": "yes"}, 1e999])
    return st.one_of(
        st.builds(lambda value: ("set", ("verdict", value)), st.one_of(st.sampled_from(VERDICTS), odd)),
        st.builds(lambda value: ("set", ("reason", value)), st.one_of(st.sampled_from(REASONS), odd)),
        st.builds(lambda text: ("raw", text), st.sampled_from(RAW_VERDICTS)),
    )


def judge_recipe() -> dict[str, Any]:
    return {"llm": {"judge": datasets.judge_endpoint(BASE_URL)}}


JUDGE_FLAGS = st.sampled_from(
    [
        ("--judge-recipe", "judge.yaml"),
        ("--judge-recipe", "judge.yaml"),
        ("--judge-recipe", "judge.yaml"),
        ("--judge-recipe", "judge.yaml", "--judge-endpoint", "judge"),
        ("--judge-recipe", "judge.yaml", "--verdicts", "out/verdicts.json"),
        ("--judge-recipe", "judge.yaml", "--json", "out/scores.json", "--csv", "out/scores.csv"),
        ("--judge-recipe", "judge.yaml", "--judge-endpoint", "nope"),
        ("--judge-endpoint", "main"),  # the dataset's own recipe: its server is gone
    ]
)


@st.composite
def judge_cases(draw) -> Case:
    """`gen eval written --answers mine.jsonl` with a judge: its replies drawn from good, twisted and hostile ones,
    and now and then the answers file or the judge's recipe changed as well."""
    files = dict(datasets.written_dataset_files())
    answers = datasets.written_answers()
    twisted = st.builds(lambda twist: ReplySpec(good=True, twist=twist), judge_twist())
    replies = st.one_of(st.just(ReplySpec(good=True)), twisted, twisted, surfaces.hostile_reply())
    plan = tuple(draw(st.lists(replies, min_size=1, max_size=3)))
    what = [describe(plan)]
    if draw(st.integers(0, 3)) == 0:
        files["mine.jsonl"], changed = draw(changed_answers(answers))
        what.append(f"answers: {changed}")
    else:
        files["mine.jsonl"] = json_lines(answers)
    recipe: Any = judge_recipe()
    if draw(st.integers(0, 5)) == 0:
        changes = draw(mutations(recipe))
        recipe = mutated(recipe, changes)
        what.append(f"judge.yaml: {describe_changes(changes)}")
    if draw(st.integers(0, 3)) == 0:
        recipe = mutated(recipe, [("set", ("llm", "judge", "max_reject_rate"), draw(st.sampled_from([0.0, 1.0])))])
    files["judge.yaml"] = recipe_text(recipe)
    flags = draw(JUDGE_FLAGS)
    return Case(
        "judge",
        ("eval", "written", "--answers", "mine.jsonl", *flags),
        files,
        outputs=("out", "cache", "mine.verdicts.json"),
        names=(
            "mine.jsonl",
            "written",
            "judge.yaml",
            "recipe.yaml",
            "--answers",
            "--judge-endpoint",
            "--judge-recipe",
            "judge",
            "base_url",
            "127.0.0.1",
            "max_reject_rate",
        ),
        replies=plan,
        what="; ".join(what),
        timeout_s=90,
    )
