"""Ambiguous time queries (SPEC §5, config `ambiguous_time_queries`): a short dialogue anchors the time, the
last utterance asks without it ("Can you summarize what we discussed?").

The base questions and group ids are those of `time_queries` (gen/products/time_windows.py); the dialogue
frames are templates/ambiguous/frames/*.j2 and the gold rewrite is templates/ambiguous/resolved.j2.
By default each dialogue variant of every frame is used once per base question, paired with the time
phrases in rotation (`pairing: rotate`); `pairing: all` crosses every dialogue with every phrase.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from typing import Iterator, Literal

from pydantic import Field

from gen.errors import GenError
from gen.products import time_checks
from gen.products.time_phrases import SLOT, Wordings
from gen.products.time_queries import GROUPS_SERVICE, Yearless, params_feature, pick, question_id, window_fields
from gen.products.time_windows import WindowOptions, base_questions
from gen.validation import Checks

NAME = "ambiguous_time_queries"
DESCRIPTION = "short dialogues that anchor a time, then ask about it with a pronoun; same windows as time_queries"


class Options(WindowOptions):
    pairing: Literal["rotate", "all"] = Field(
        "rotate", description="rotate: each dialogue variant once per base question, time phrases in turn; "
                              "all: every dialogue variant with every time phrase")
    frames: list[str] | None = Field(None, description="names of the dialogue frames to use "
                                                       "(files under templates/ambiguous/frames/); default all")


def build(ctx, options: Options) -> Iterator[dict]:
    wordings = Wordings(ctx.templates_dir, options.numeral_styles)
    if options.frames:
        unknown = sorted(set(options.frames) - set(wordings.dialogue_frame_names()))
        if unknown:
            raise GenError(f"unknown dialogue frame(s): {', '.join(unknown)}", file=ctx.recipe.file,
                           field=f"products ({NAME}).frames",
                           expected=f"names among {', '.join(wordings.dialogue_frame_names())}")
    for timeline in ctx.timelines:
        yearless = Yearless(timeline)
        speakers = timeline.conversation.speakers
        now, current = timeline.now.isoformat(timespec="seconds"), timeline.current_session
        seen: set[tuple] = set()
        for base in base_questions(timeline, options):
            group = base.group_id
            phrases = wordings.phrases(base, yearless.ok(base))
            dialogues = wordings.dialogues(base.test, speakers, options.frames)
            if options.pairing == "all":
                combos = [(d, p) for d in dialogues for p in phrases]
            else:
                offset = int(group, 16) % len(phrases)
                combos = [(d, phrases[(j + offset) % len(phrases)]) for j, d in enumerate(dialogues)]
            for (frame, number, turns), (phrase, style) in pick(combos, options.max_variants_per_group,
                                                                ctx.recipe.seed, NAME, group):
                dialogue = [{"speaker": speaker, "text": text.replace(SLOT, phrase)} for speaker, text in turns]
                signature = tuple(turn["text"] for turn in dialogue)
                qid = question_id(NAME, base.conversation_id, base.test, base.params, f"{frame}#{number}", phrase, style)
                if signature in seen:
                    ctx.reject(NAME, qid, "duplicate dialogue in the conversation", " / ".join(signature),
                               conversation_id=base.conversation_id)
                    continue
                seen.add(signature)
                yield {
                    "question_id": qid,
                    "group_id": group,
                    "conversation_id": base.conversation_id,
                    "test": base.test,
                    "frame": frame,
                    "dialogue": dialogue,
                    "final_utterance": dialogue[-1]["text"],
                    "resolved_question": wordings.resolved(phrase),
                    "time_expression": phrase,
                    **window_fields(base, now, current),
                }


def validate(rows: list[dict], ctx, options: Options) -> Checks:
    checks = Checks()
    by_conversation = time_checks.check_rows(rows, ctx, options, checks, NAME)
    speakers_of = {t.conversation_id: t.conversation.speakers for t in ctx.timelines}
    unambiguous = ctx.services.get(GROUPS_SERVICE)
    for conversation_id, group in by_conversation.items():
        speaker_a, speaker_b = speakers_of.get(conversation_id, ("", ""))
        dialogues = Counter(tuple(turn["text"] for turn in row["dialogue"]) for row in group)
        checks.check("no duplicate dialogue within a conversation", max(dialogues.values(), default=1) == 1,
                     conversation_id)
        expressions = defaultdict(set)  # every time expression used for a base question
        for row in group:
            expressions[row["group_id"]].add(row["time_expression"].lower())
        for row in group:
            where = f"{conversation_id} {row['question_id']}"
            turns, final = row["dialogue"], row["final_utterance"]
            checks.check("final_utterance is the last turn of the dialogue", bool(turns) and turns[-1]["text"] == final,
                         where)
            checks.check("the final utterance contains none of its base question's time expressions",
                         not any(e in final.lower() for e in expressions[row["group_id"]]), f"{where}: {final!r}")
            checks.check("an earlier turn contains the time expression",
                         any(row["time_expression"] in turn["text"] for turn in turns[:-1]), where)
            checks.check("the resolved question contains the time expression",
                         row["time_expression"] in row["resolved_question"], where)
            checks.check("speaker_a asks the final question, and only the two speakers talk",
                         bool(turns) and turns[-1]["speaker"] == speaker_a
                         and all(turn["speaker"] in (speaker_a, speaker_b) for turn in turns), where)
            if unambiguous and row["group_id"] in unambiguous:  # time_queries was built earlier in this run
                checks.check("relevant set equals the time_queries group's with the same group_id",
                             unambiguous[row["group_id"]] == row["relevant_response_indices"], where)
    return checks


def summary(rows: list[dict]) -> dict:
    out = time_checks.summary(rows)
    out["by_frame"] = dict(sorted(Counter(row["frame"] for row in rows).items()))
    return out


def features():
    from datasets import Features, List, Value

    return Features({
        "question_id": Value("string"), "group_id": Value("string"), "conversation_id": Value("string"),
        "test": Value("string"), "frame": Value("string"),
        "dialogue": List({"speaker": Value("string"), "text": Value("string")}),
        "final_utterance": Value("string"), "resolved_question": Value("string"),
        "time_expression": Value("string"), "params": params_feature(), "now": Value("string"),
        "current_session": Value("int64"), "relevant_response_indices": List(Value("int64")),
        "num_relevant": Value("int64"),
    })
