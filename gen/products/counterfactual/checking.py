"""The validator of teabag: one episode's records checked against its source conversation and each other.

Nothing the build kept is trusted: the history is compared with the source's sessions; the question id, the
answerer and the order of askers follow from the speakers; each new session's length, speaker order and last
line are read off the record; the answer is compared with the question word by word; the quality scores are
computed again from the session's text with the method the record names; and the episode record must list the
questions and count the records that were written.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gen.conversation import Conversation
from gen.products.checks import Checks
from gen.products.counterfactual import quality

if TYPE_CHECKING:
    from gen.products.counterfactual.options import TeaBagOptions as Options
    from gen.products.counterfactual.steps import Provenance

Record = dict[str, Any]
SCORE_TOLERANCE = 1e-3  # embeddings are float32: a batch of other lengths may move the fourth decimal
QUESTION_FIELDS = ("asker", "answerer", "question", "correct_answer", "contradicted_fact")


def check_episode(
    conversation: Conversation,
    rows: Sequence[Record],
    episodes: Sequence[Record],
    options: Options,
    seen: Provenance,
    checks: Checks,
) -> None:
    where = conversation.conversation_id
    if not episodes:  # not taken: too short, or past the episodes limit
        checks.check("an episode without a summary record has no questions", not rows, where)
        return
    if not checks.check("one summary record per episode", len(episodes) == 1, f"{where}: {len(episodes)}"):
        return
    checks.check(
        "a taken episode has the sessions the history needs", len(conversation.sessions) >= options.sessions, where
    )
    episode = episodes[0]
    check_summary_record(episode, rows, conversation, options, seen, checks)
    askers = [row["asker"] for row in rows]
    checks.check("at most one question per asker", len(askers) == len(set(askers)) and len(rows) <= 2, where)
    for row in rows:
        check_row(row, episode, conversation, options, seen, checks)


def check_summary_record(
    record: Record,
    rows: Sequence[Record],
    conversation: Conversation,
    options: Options,
    seen: Provenance,
    checks: Checks,
) -> None:
    where = record["episode_id"]
    speakers = list(conversation.speakers)
    checks.check("episode_id is the conversation's", where == conversation.conversation_id, where)
    checks.check("speakers are the conversation's", record["speakers"] == speakers, where)
    checks.check("sessions is the history length", record["sessions"] == options.sessions, where)
    checks.check("teabag_records counts the records written", record["teabag_records"] == len(rows), where)
    checks.check(
        "the summary model and prompt are the run's",
        (record["model"], record["summary_prompt_id"]) == (seen.models["summary"], seen.prompt_ids["summary"]),
        where,
    )
    summaries = record["summaries"]
    if record["rejected_step"] == "summaries":
        checks.check(
            "an episode rejected at its summaries has no summaries or questions",
            not summaries and not record["questions"] and not rows,
            where,
        )
        return
    checks.check(
        "one summary per history session, in order, each with facts",
        [s["session"] for s in summaries] == list(range(1, options.sessions + 1))
        and all(s["facts"] for s in summaries),
        where,
    )
    questions = record["questions"]
    if record["rejected_step"] == "questions":
        checks.check("an episode rejected at its questions has none", not questions and not rows, where)
        return
    checks.check(
        "two questions, the first speaker's first",
        [q["asker"] for q in questions] == speakers and [q["answerer"] for q in questions] == speakers[::-1],
        where,
    )
    complete = record["rejected_step"] is None
    checks.check("rejected_step is set exactly when a question has no record", complete == (len(rows) == 2), where)
    checks.check(
        "rejected_step is a step", record["rejected_step"] in (None, "session6"), f"{where}: {record['rejected_step']}"
    )
    for row in rows:
        same = next((q for q in questions if q["asker"] == row["asker"]), None)
        checks.check(
            "each record's question is its episode's",
            same is not None and all(row[f] == same[f] for f in QUESTION_FIELDS) and row["summaries"] == summaries,
            row["question_id"],
        )


def check_row(
    row: Record, episode: Record, conversation: Conversation, options: Options, seen: Provenance, checks: Checks
) -> None:
    where = row["question_id"]
    speakers = list(conversation.speakers)
    asker, answerer = row["asker"], row["answerer"]
    checks.check("asker and answerer are the two speakers", sorted([asker, answerer]) == sorted(speakers), where)
    number = speakers.index(asker) + 1 if asker in speakers else 0
    checks.check(
        "question_id is the episode's and names the asker",
        where == f"{conversation.conversation_id}/teabag-{number}",
        where,
    )
    checks.check(
        "episode fields are the episode's",
        (row["episode_id"], row["source"], row["speakers"]) == (episode["episode_id"], episode["source"], speakers),
        where,
    )
    history = [
        {"session": k, "turns": [{"speaker": t.speaker, "text": t.text} for t in session.turns]}
        for k, session in enumerate(conversation.sessions[: options.sessions], start=1)
    ]
    checks.check("history is the source's first sessions", row["history"] == history, where)
    check_session(row, speakers, options, checks, where)
    check_texts(row, checks, where)
    check_scores(row, seen, checks, where)
    checks.check(
        "model and prompt ids are the run's",
        provenance_of(row) == (seen.models, seen.prompt_ids) and row["model"] == seen.models["question"],
        where,
    )
    checks.check("verified says whether the verify call ran", row["verified"] is options.verify, where)


def check_session(row: Record, speakers: list[str], options: Options, checks: Checks, where: str) -> None:
    turns = row["session6"]
    low, high = options.session6_turns.min, options.session6_turns.max
    checks.check("session 6 has the configured number of turns", low <= len(turns) <= high, f"{where}: {len(turns)}")
    who = [t["speaker"] for t in turns]
    checks.check("session 6 has only the two speakers", set(who) <= set(speakers), where)
    checks.check("session 6 alternates speakers", all(a != b for a, b in itertools.pairwise(who)), where)
    checks.check(
        "session 6 ends with the question, by its asker",
        bool(turns) and turns[-1] == {"speaker": row["asker"], "text": row["question"]},
        where,
    )
    floors = options.min_quality.model_dump().items()
    checks.check(
        "session 6 meets min_quality",
        all(floor is None or row[name] >= floor for name, floor in floors),
        f"{where}: coherence {row['coherence']}, distinct_token_ratio {row['distinct_token_ratio']}",
    )


def check_texts(row: Record, checks: Checks, where: str) -> None:
    question, answer = row["question"].strip(), row["correct_answer"].strip()
    checks.check("the question is one question", question.endswith("?") and "\n" not in question, where)
    checks.check("the correct answer is non-empty", bool(answer), where)
    checks.check("the contradicted fact is non-empty", bool(row["contradicted_fact"].strip()), where)
    asked = set(tokens(question))
    own = [w for w in tokens(answer) if w not in quality.STOP_WORDS]
    echoed = sum(w in asked for w in own)
    same = normal(answer) == normal(question)
    checks.check(
        "the correct answer does not restate the question", not same and not (own and echoed >= 0.8 * len(own)), where
    )


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+(?:'[a-z]+)?", text.lower())


def normal(text: str) -> str:
    return " ".join(tokens(text))


def check_scores(row: Record, seen: Provenance, checks: Checks, where: str) -> None:
    texts = [t["text"] for t in row["session6"]]
    every = tokens(" ".join(texts))
    ratio = len(set(every)) / len(every) if every else 0.0
    checks.check("distinct_token_ratio is recomputed", abs(row["distinct_token_ratio"] - ratio) < 1e-6, where)
    if not checks.check("coherence_method is the run's", row["coherence_method"] == seen.method, where):
        return
    again = quality.coherence(texts, row["coherence_method"])
    checks.check(
        "coherence is recomputed",
        abs(row["coherence"] - again) <= SCORE_TOLERANCE,
        f"{where}: {row['coherence']} vs {again}",
    )


def provenance_of(row: Record) -> tuple[dict, dict]:
    steps = ("summary", "question", "session6", "verify")
    return row["models"], {step: row[f"{step}_prompt_id"] for step in steps}
