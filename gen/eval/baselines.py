"""Reference systems: each writes a predictions file that `gen eval` scores.

    recent         the K responses just before the question's "now", latest first: what a system with only a
                   short context window sees, and the floor every memory system must beat
    bm25           BM25 over the conversation's responses, queried with the question's words (bm25s)
    semantic       cosine of all-MiniLM-L6-v2 embeddings of the question and each response
    semantic_meta  the same, with each response's weekday, date, time and session written before its text

Every ranking is over one conversation's log; ties go to the lower response_index so output is reproducible.
"""

from __future__ import annotations

import itertools
import logging
from bisect import bisect_left
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from gen import progress
from gen.calendar_names import month_name, weekday_name
from gen.embedding import Embedder, MiniLM, default_store, model_folder, require_eval_packages
from gen.errors import GenError
from gen.eval.dataset import Dataset, Located, Question, open_dataset
from gen.jsonl import encode_lines, replace_file
from gen.write_guard import refuse_writing_into

log = logging.getLogger(__name__)

BASELINES = ("recent", "bm25", "semantic", "semantic_meta")
Responses = list[dict[str, Any]]
Ranker = Callable[[Responses, list[tuple[Question, str]], int], dict[str, list[int]]]


def write_baseline(
    name: str,
    dataset_path: Path,
    output: Path,
    k: int,
    whole_dialogue: bool = False,
) -> int:
    """Rank every question of every question config and write one predictions line per question."""
    refuse_writing_into({"--output": output}, {"DATASET": dataset_path})
    ranker = make_ranker(name)  # checks the optional packages before any reading
    dataset = open_dataset(dataset_path)
    if not dataset.question_configs:
        raise GenError("the dataset has no question config", file=dataset.folder)
    responses_of = dataset.log()
    nows = dataset.nows()
    lines = []
    for config in dataset.question_configs:
        by_conversation = questions_by_conversation(dataset, config, whole_dialogue, responses_of)
        log.info("%s: %s, %s questions", name, config, f"{sum(len(q) for q in by_conversation.values()):,}")
        with progress.task(f"{name} ranking {config}", len(by_conversation), "conversations") as bar:
            for conversation_id, asked in by_conversation.items():
                responses = before_now(responses_of[conversation_id], nows.get(conversation_id))
                ranked = ranker(responses, asked, k)
                lines += [{"question_id": q.question_id, "retrieved": ranked[q.question_id]} for q, _ in asked]
                bar.advance()
    write_lines(Path(output), lines)
    return len(lines)


def write_turn_baseline(name: str, dataset_path: Path, output: Path, k: int) -> int:
    """For every response of the log that follows a turn of its own session, what the reference system retrieves
    from the conversation's earlier sessions when queried with that turn: one line {conversation_id,
    response_index, retrieved} per response (the memories quality_labels' retrieval gate can be given)."""
    refuse_writing_into({"--output": output}, {"DATASET": dataset_path})
    ranker = make_ranker(name)
    dataset = open_dataset(dataset_path)
    lines = []
    log_of = dataset.log()
    with progress.task(f"{name} ranking every turn", len(log_of), "conversations") as bar:
        for conversation_id, responses in log_of.items():
            lines += turn_lines(ranker, dataset, conversation_id, responses, k)
            bar.advance()
    write_lines(Path(output), lines)
    return len(lines)


def turn_lines(ranker: Ranker, dataset: Dataset, conversation_id: str, responses: Responses, k: int) -> list[dict]:
    """One conversation's lines of write_turn_baseline."""
    by_session: dict[int, list[tuple[Question, str]]] = defaultdict(list)
    for before, reply in itertools.pairwise(responses):
        if before["session_index"] == reply["session_index"]:
            turn = Question(
                f"{conversation_id}/{reply['response_index']}",
                conversation_id,
                "turn",
                [],
                Located({"now": reply["timestamp"]}, dataset.folder, f"response {reply['response_index']}"),
            )
            by_session[reply["session_index"]].append((turn, before["text"]))
    lines: list[dict] = []
    for session, asked in by_session.items():
        earlier = [r for r in responses if r["session_index"] < session and not r.get("is_padding")]
        ranked = ranker(earlier, asked, k) if earlier else {}
        lines += [
            {
                "conversation_id": conversation_id,
                "response_index": int(turn.question_id.rsplit("/", 1)[1]),
                "retrieved": ranked.get(turn.question_id, []),
            }
            for turn, _ in asked
        ]
    return lines


def make_ranker(name: str) -> Ranker:
    if name == "recent":
        return rank_recent
    if name == "bm25":
        require_eval_packages("bm25s")
        return rank_bm25
    if name in ("semantic", "semantic_meta"):
        folder = model_folder()
        embedder = Embedder(MiniLM(folder), default_store(folder))
        describe = meta_text if name == "semantic_meta" else plain_text
        return lambda responses, asked, k: rank_semantic(embedder, describe, responses, asked, k)
    raise GenError(f"no baseline {name!r}", field="NAME", expected=", ".join(BASELINES))


def questions_by_conversation(
    dataset: Dataset, config: str, whole_dialogue: bool, responses_of: dict[str, Responses]
) -> dict[str, list[tuple[Question, str]]]:
    """Each conversation's questions with the text a baseline queries by."""
    found: dict[str, list[tuple[Question, str]]] = defaultdict(list)
    for question in dataset.questions(config):
        if question.conversation_id not in responses_of:
            raise GenError(
                f"conversation {question.conversation_id} is not in the log",
                file=question.item.file,
                record=question.item.place,
                field="conversation_id",
            )
        found[question.conversation_id].append((question, query_text(config, question.item, whole_dialogue)))
    return found


def query_text(config: str, item: Located, whole_dialogue: bool) -> str:
    """The question as a system would be asked it: the final utterance of an ambiguous dialogue (or, with
    --whole-dialogue, every utterance of it), the question text otherwise."""
    record = item.record
    if config == "ambiguous_time_queries":
        if whole_dialogue:
            turns = record.get("dialogue")
            if isinstance(turns, list) and all(isinstance(t, dict) and isinstance(t.get("text"), str) for t in turns):
                return " ".join(turn["text"] for turn in turns)
            raise GenError("dialogue is not a list of turns", file=item.file, record=item.place, field="dialogue")
        name = "final_utterance"
    else:
        name = "question"
    text = record.get(name)
    if not isinstance(text, str):
        raise GenError(f"{name} is missing", file=item.file, record=item.place, field=name, expected="a string")
    return text


def before_now(responses: Responses, now: str | None) -> Responses:
    """The responses a system has seen when asked (all of them when the dataset does not say when now is)."""
    if now is None:
        return responses
    moment = datetime.fromisoformat(now)
    return [r for r in responses if datetime.fromisoformat(r["timestamp"]) < moment]


# --- the rankers: one conversation's responses and questions → question_id → ranked indices ---------------


def rank_recent(responses: Responses, asked: list[tuple[Question, str]], k: int) -> dict[str, list[int]]:
    """The last k responses before each question's own now (latest first)."""
    timeline = sorted((datetime.fromisoformat(r["timestamp"]), r["response_index"]) for r in responses)
    moments = [moment for moment, _ in timeline]
    ranked: dict[str, list[int]] = {}
    for question, _ in asked:
        now = question.item.record.get("now")
        end = bisect_left(moments, datetime.fromisoformat(now)) if isinstance(now, str) else len(timeline)
        ranked[question.question_id] = [index for _, index in reversed(timeline[max(0, end - k) : end])]
    return ranked


def rank_bm25(responses: Responses, asked: list[tuple[Question, str]], k: int) -> dict[str, list[int]]:
    """BM25 (bm25s, Lucene variant, English stopwords); responses sharing no word with the question are left out,
    so a question may retrieve fewer than k."""
    import bm25s  # type: ignore[import-untyped, import-not-found, unused-ignore]

    indices = [r["response_index"] for r in responses]
    index = bm25s.BM25()
    index.index(
        bm25s.tokenize([r["text"] for r in responses], stopwords="en", show_progress=False), show_progress=False
    )
    queries = bm25s.tokenize([text for _, text in asked], stopwords="en", return_ids=False, show_progress=False)
    ranked = {}
    for (question, _), tokens in zip(asked, queries):
        scores = index.get_scores(tokens) if tokens and responses else np.zeros(len(responses))
        ranked[question.question_id] = top_k(scores, indices, k, positive_only=True)
    return ranked


def rank_semantic(
    embedder: Embedder,
    describe: Callable[[dict[str, Any]], str],
    responses: Responses,
    asked: list[tuple[Question, str]],
    k: int,
) -> dict[str, list[int]]:
    indices = [r["response_index"] for r in responses]
    memory = embedder.embed([describe(r) for r in responses])
    queries = embedder.embed([text for _, text in asked])
    scores = queries @ memory.T  # unit vectors: the dot product is the cosine
    return {question.question_id: top_k(row, indices, k) for (question, _), row in zip(asked, scores)}


def top_k(scores: np.ndarray, indices: list[int], k: int, positive_only: bool = False) -> list[int]:
    order = np.argsort(-scores, kind="stable")[:k]  # stable: equal scores keep response order
    return [indices[i] for i in order if not positive_only or scores[i] > 0]


# --- what is embedded ---------------------------------------------------------------------------------------


def plain_text(response: dict[str, Any]) -> str:
    return str(response["text"])


def meta_text(response: dict[str, Any]) -> str:
    """The response with when it was said, as a reader would write it: "Friday, March 22, 2024, 16:12,
    session 1: <text>"."""
    moment = datetime.fromisoformat(response["timestamp"])
    when = f"{weekday_name(moment)}, {month_name(moment.month)} {moment.day}, {moment.year}, {moment:%H:%M}"
    return f"{when}, session {response.get('session_index', '?')}: {response['text']}"


# --- output -------------------------------------------------------------------------------------------------


def write_lines(output: Path, lines: list[dict[str, Any]]) -> None:
    replace_file(output, encode_lines(lines), "predictions")
