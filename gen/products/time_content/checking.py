"""The independent validator of time_content_questions: the written rows re-checked against the `log` records
(not the timeline objects the generator used)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import date, datetime, timedelta

from gen.products.base import Record
from gen.products.checks import Checks
from gen.products.date_words import yearless_dates
from gen.products.time_content.answer_rules import ANSWER_CODES, answer_problems
from gen.products.time_content.options import TimeContentQuestionsOptions as Options
from gen.products.time_content.question_rules import Facts, problems


def check_conversation(
    rows: Sequence[Record],
    log: Sequence[Record],
    options: Options,
    model: str | None,
    prompt_id: str,
    checks: Checks,
    conversation_id: str,
    now_offset_minutes: float,
) -> None:
    """Re-check the written rows from the `log` records (not the timeline objects the generator used): the
    anchor's speaker, date, session and text, the clock fields, then the question checks and the answer rule with
    facts taken from the log."""
    ids = Counter(row["question_id"] for row in rows)
    checks.check(
        "question_id is unique", all(n == 1 for n in ids.values()), ", ".join(i for i, n in ids.items() if n > 1)
    )
    if not rows:
        return
    checks.check(
        "at most per_conversation questions", len(rows) <= options.per_conversation, f"{conversation_id}: {len(rows)}"
    )
    speakers = tuple(dict.fromkeys(r["speaker"] for r in log if not r["is_padding"]))
    yearless = yearless_dates(date.fromisoformat(r["date"]) for r in log)
    now = max(datetime.fromisoformat(r["timestamp"]) for r in log) + timedelta(minutes=now_offset_minutes)
    clock = (now.isoformat(timespec="seconds"), max(r["session_index"] for r in log) + 1)
    used: list[int] = []
    for row in rows:
        where = f"{row['question_id']}"
        checks.check(
            "now and current_session agree with the log",
            (row["now"], row["current_session"]) == clock,
            f"{where}: {row['now']}, {row['current_session']}",
        )
        checks.check(
            "num_relevant is the number of relevant responses",
            row["num_relevant"] == len(row["relevant_response_indices"]),
            where,
        )
        anchor = check_anchor(row, log, options, checks, where)
        if anchor is None:
            continue
        used += row["relevant_response_indices"]
        checks.check("reference_kind is date or session", row["reference_kind"] in ("date", "session"), where)
        checks.check("model is the endpoint's", model is None or row["model"] == model, where)
        checks.check("prompt_id is the template's", row["prompt_id"] == prompt_id, where)
        day = date.fromisoformat(anchor[0]["date"])
        facts = Facts(
            speaker=row["speaker"],
            speakers=speakers or (row["speaker"],),
            kind=row["reference_kind"],
            day=day,
            session_index=anchor[0]["session_index"],
            yearless_ok=day in yearless,
            anchor_text=row["anchor_text"],
        )
        check_question(row, facts, options, checks, where)
        check_answer(row, facts, options, checks, where)
    checks.check("anchors of a conversation do not overlap", len(used) == len(set(used)), conversation_id)


QUESTION_CODES = (
    "not a question",
    "speaker not named",
    "date missing",
    "session missing",
    "copies the anchor",
    "overlap too high",
)


def check_question(row: Record, facts: Facts, options: Options, checks: Checks, where: str) -> None:
    """The question rules (question_rules.py) run again on facts read from the log, one check per problem code."""
    found = {p.code: str(p) for p in problems(row["question"], facts, options.max_overlap, options.max_copied_words)}
    for code in QUESTION_CODES:
        checks.check(f"question check: {code}", code not in found, f"{where}: {found.get(code)}")


def check_anchor(row: Record, log: Sequence[Record], options: Options, checks: Checks, where: str) -> list[dict] | None:
    indices = row["relevant_response_indices"]
    ok = (
        isinstance(indices, list)
        and 1 <= len(indices) <= 3
        and all(isinstance(i, int) for i in indices)
        and indices == list(range(indices[0], indices[0] + len(indices)))
        and indices[0] >= 0
        and indices[-1] < len(log)
    )
    if not checks.check("relevant indices are 1-3 consecutive responses of the log", ok, f"{where}: {indices}"):
        return None
    anchor = [log[i] for i in indices]
    checks.check(
        "log records are in response order", all(r["response_index"] == i for r, i in zip(anchor, indices)), where
    )
    checks.check("anchor lies in one session", len({r["session_index"] for r in anchor}) == 1, where)
    checks.check("anchor lies on one date", len({r["date"] for r in anchor}) == 1, where)
    checks.check(
        "session_index matches the log",
        row["session_index"] == anchor[0]["session_index"],
        f"{where}: {row['session_index']} vs {anchor[0]['session_index']}",
    )
    checks.check(
        "date matches the log", row["date"] == anchor[0]["date"], f"{where}: {row['date']} vs {anchor[0]['date']}"
    )
    totals: dict[str, int] = {}
    for r in anchor:
        totals[r["speaker"]] = totals.get(r["speaker"], 0) + len(r["text"].split())
    main = max(totals, key=lambda s: (totals[s], -next(i for i, r in enumerate(anchor) if r["speaker"] == s)))
    checks.check(
        "speaker is the anchor's main speaker in the log",
        row["speaker"] == main,
        f"{where}: {row['speaker']} vs {main}",
    )
    checks.check(
        "anchor_text is the log's text",
        row["anchor_text"] == "\n".join(f"{r['speaker']}: {r['text']}" for r in anchor),
        where,
    )
    if options.exclude_padding:
        checks.check("anchor is not in the padding session", not any(r["is_padding"] for r in anchor), where)
    checks.check(
        "anchor responses have min_anchor_words",
        all(len(r["text"].split()) >= options.min_anchor_words for r in anchor),
        where,
    )
    return anchor


def check_answer(row: Record, facts: Facts, options: Options, checks: Checks, where: str) -> None:
    """The gold answer against the anchor's text and speakers as the log holds them (`facts`), by the rule of
    answer_rules.py: one line with no surrounding space, then every problem the rule finds."""
    answer = row.get("answer")
    one_line = isinstance(answer, str) and answer == " ".join(answer.split())
    if not checks.check("answer is a text on one line", one_line, where) or not isinstance(answer, str):
        return
    found = {p.code: str(p) for p in answer_problems(answer, row["question"], facts, options.answer_limits())}
    for code in ANSWER_CODES:
        checks.check(f"answer check: {code}", code not in found, f"{where}: {found.get(code)}")
