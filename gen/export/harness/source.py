"""A finished dataset as the harness exports read it, through gen/eval/dataset.py (run or export folder).

A stopped or failed run is refused, as `gen push` refuses it: its records are incomplete or unchecked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import Any

from gen.callers import named
from gen.errors import GenError
from gen.eval.dataset import Dataset, Located, finished_report, open_dataset, require

NEEDED = "a dataset written with the log and conversations configs (gen writes conversations with any question)"


@dataclass
class Conversation:
    conversation_id: str
    speaker_a: str
    speaker_b: str
    session_starts: list[datetime]  # every session's start, padding included, session 1 first
    now: datetime
    current_session: int
    responses: list[dict[str, Any]]  # the log's records, in response_index order

    @cached_property
    def places(self) -> list[tuple[int, int]]:
        """response_index → (session number, 0-based position within the session); computed once, as every
        question of the conversation asks it."""
        found, position, previous = [], 0, 0
        for response in self.responses:
            session = response["session_index"]
            position = position + 1 if session == previous else 0
            found.append((session, position))
            previous = session
        return found

    def sessions(self) -> list[list[dict[str, Any]]]:
        """The responses of session 1, 2, ... (one list per session start, padding last)."""
        grouped: list[list[dict[str, Any]]] = [[] for _ in self.session_starts]
        for response in self.responses:
            grouped[response["session_index"] - 1].append(response)
        return grouped


@dataclass
class Source:
    dataset: Dataset
    report: dict[str, Any]  # run.json
    conversations: dict[str, Conversation]  # in the order of the conversations config

    @property
    def seed(self) -> int:
        """The recipe's seed: the exports' own choices (one wording per group) follow from it too."""
        seed = (self.report.get("recipe") or {}).get("seed", 0)
        return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0

    def question_configs(self, wanted: str | None) -> list[str]:
        present = self.dataset.question_configs
        if not present:
            raise GenError(
                "the dataset has no question config to export",
                file=self.dataset.folder,
                expected="a dataset with a config of questions (time_queries, time_content_questions...)",
            )
        if wanted is not None and wanted not in present:
            raise GenError(
                f"no question config {wanted!r} in this dataset",
                file=self.dataset.folder,
                field=named("--config", "ExportOptions.config"),
                expected=f"one of {', '.join(present)}",
            )
        return [wanted] if wanted else present


def open_source(folder: Path) -> Source:
    report = finished_report(Path(folder), "exported")
    dataset = open_dataset(Path(folder))
    for config in ("log", "conversations"):
        if config not in dataset.files:
            raise GenError(f"the dataset has no {config} config", file=dataset.folder, expected=NEEDED)
    responses = dataset.log()
    conversations = {}
    for item in dataset.records("conversations"):
        conversation = read_conversation(item, responses)
        conversations[conversation.conversation_id] = conversation
    missing = sorted(set(responses) - set(conversations))
    if missing:
        raise GenError(
            f"the log has conversation {missing[0]!r}, which the conversations config lacks",
            file=dataset.files["conversations"][0],
            expected="one conversations record per conversation of the log",
        )
    return Source(dataset, report, conversations)


def read_conversation(item: Located, responses: dict[str, list[dict[str, Any]]]) -> Conversation:
    conversation_id = require(item, "conversation_id", str)
    starts = [moment(item, "session_starts", text) for text in require(item, "session_starts", list)]
    conversation = Conversation(
        conversation_id,
        require(item, "speaker_a", str),
        require(item, "speaker_b", str),
        starts,
        moment(item, "now", require(item, "now", str)),
        require(item, "current_session", int),
        responses.get(conversation_id, []),
    )
    if len(conversation.responses) != require(item, "num_responses", int):
        raise GenError(
            f"the log has {len(conversation.responses)} responses of this conversation, the record says "
            f"{item.record['num_responses']}",
            file=item.file,
            record=item.place,
            field="num_responses",
            expected="the log and conversations configs of one run",
        )
    for position, response in enumerate(conversation.responses):
        check_response(conversation, position, response)
    return conversation


def check_response(conversation: Conversation, position: int, response: dict[str, Any]) -> None:
    """The fields the exports rely on beyond the log's own checks: contiguous indices (they are the documents'
    ids and the evidence) and a session that has a start."""
    session = response.get("session_index")
    problem = None
    previous = conversation.responses[position - 1]["session_index"] if position else 1
    if response["response_index"] != position:
        problem = ("response_index", f"response indices 0..{len(conversation.responses) - 1} without gaps")
    elif (
        not isinstance(session, int)
        or isinstance(session, bool)
        or not previous <= session <= len(conversation.session_starts)
    ):
        problem = (
            "session_index",
            f"a session number from {previous} (the previous response's) to {len(conversation.session_starts)}",
        )
    elif not isinstance(response.get("speaker"), str):
        problem = ("speaker", "a speaker name")
    elif not parses(response["timestamp"]):
        problem = ("timestamp", "ISO 8601 such as 2023-05-08T13:56:04")
    if problem:
        raise GenError(
            f"response {position} of {conversation.conversation_id} cannot be placed",
            record=f"{conversation.conversation_id}, response {position}",
            field=problem[0],
            expected=problem[1],
        )


def parses(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def moment(item: Located, field: str, text: Any) -> datetime:
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        raise GenError(
            f"{text!r} is not a timestamp",
            file=item.file,
            record=item.place,
            field=field,
            expected="ISO 8601 such as 2023-05-08T13:56:04",
        ) from None
