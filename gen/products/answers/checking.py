"""The independent validator of gold_answers: each written answer re-checked from the `log` records and the
question records it answers (not from the items and replies the generator held).

It checks the citation rule again with its own code (rules.py states it for the generator): every cited index is
a response of the log inside the base question's window, every response of the window is cited or left out with a
reason, none is both; and the answer is its claims in order, the window is the one every wording of the base
question carries, an abstention is given exactly when the window is empty, and model and prompt are the recipe's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gen.products.base import Record
from gen.products.checks import Checks


@dataclass(frozen=True)
class Expected:
    model: str | None  # the endpoint's model
    prompt_id: str  # of the answer prompt
    abstention: str  # the abstention answer's text


def check_conversation(
    rows: Sequence[Record],
    log: Sequence[Record],
    questions: Mapping[str, Sequence[Record]],
    expected: Expected,
    checks: Checks,
) -> None:
    in_log = {row["response_index"] for row in log}
    windows: dict[str, set[tuple[int, ...]]] = {}
    for records in questions.values():
        for question in records:
            windows.setdefault(question["group_id"], set()).add(tuple(question["relevant_response_indices"]))
    groups = Counter(row["group_id"] for row in rows)
    twice = [group for group, n in groups.items() if n > 1]
    checks.check("one answer per base question", not twice, ", ".join(twice))
    for row in rows:
        check_answer(row, windows.get(row["group_id"]), in_log, expected, checks)


def check_answer(
    row: Record, windows: set[tuple[int, ...]] | None, in_log: set[int], expected: Expected, checks: Checks
) -> None:
    where = f"{row['conversation_id']} {row['group_id']}"
    window = row["relevant_response_indices"]
    checks.check("answers a base question of the answered configs", windows is not None, where)
    checks.check(
        "window is the base question's (every wording agrees)", windows == {tuple(window)}, f"{where}: {window}"
    )
    checks.check("num_relevant counts the window", row["num_relevant"] == len(window), where)
    cited = [index for claim in row["claims"] for index in claim["cites"]]
    left = [entry["index"] for entry in row["left_out"]]
    checks.check("cited responses are in the log", set(cited) <= in_log, f"{where}: {sorted(set(cited) - in_log)}")
    checks.check(
        "claims cite only responses of the window",
        set(cited) <= set(window),
        f"{where}: {sorted(set(cited) - set(window))}",
    )
    checks.check("every claim cites a response", all(claim["cites"] for claim in row["claims"]), where)
    checks.check("left out responses are of the window", set(left) <= set(window), where)
    unaccounted = set(window) - set(cited) - set(left)
    checks.check(
        "every response of the window is cited or left out", not unaccounted, f"{where}: {sorted(unaccounted)}"
    )
    checks.check("no response is both cited and left out", not set(cited) & set(left), where)
    checks.check("every left out response has a reason", all(e["why"].strip() for e in row["left_out"]), where)
    if not window:
        checks.check(
            "an empty window gets the abstention answer",
            row["abstained"] and row["answer"] == expected.abstention and not row["claims"],
            where,
        )
        checks.check("an abstention names no model", row["model"] is None and row["sample"] is None, where)
        return
    checks.check("an answer with responses is not an abstention", not row["abstained"] and bool(row["claims"]), where)
    checks.check("answer is its claims in order", row["answer"] == joined(c["text"] for c in row["claims"]), where)
    checks.check("model is the endpoint's", row["model"] == expected.model, f"{where}: {row['model']}")
    checks.check("prompt_id is the answer template's", row["prompt_id"] == expected.prompt_id, where)


def joined(texts) -> str:
    """The claims as one text, each ending a sentence (written again here, not imported from the generator)."""
    parts = []
    for text in texts:
        text = " ".join(text.split())
        parts.append(text if text.endswith((".", "!", "?")) else text + ".")
    return " ".join(parts)
