"""The validator of speaker_sessions, by its own path: every (real session, speaker) pair counted from the `log`
records the run wrote, never from the timeline the product read."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

from gen.products.base import Record
from gen.products.checks import Checks


def check_questions(rows: Sequence[Record], log: Sequence[Record], min_responses: int, checks: Checks) -> None:
    said: defaultdict[tuple[int, str], list[int]] = defaultdict(list)
    for row in log:
        if not row["is_padding"]:
            said[row["session_index"], row["speaker"]].append(row["response_index"])
    expected = {key: indices for key, indices in said.items() if len(indices) >= min_responses}
    asked = {(row["session_index"], row["speaker"]): row for row in rows}
    checks.check("one question per speaker and session with enough responses", set(asked) == set(expected), "")
    for key, row in asked.items():
        where = row["question_id"]
        checks.check(
            "relevant responses are the speaker's in that session",
            row["relevant_response_indices"] == expected.get(key),
            where,
        )
        checks.check(
            "the question names the speaker and the session",
            row["speaker"] in row["question"] and f"session {key[0]}" in row["question"],
            where,
        )
