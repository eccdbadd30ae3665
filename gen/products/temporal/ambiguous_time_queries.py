"""Ambiguous time queries (config `ambiguous_time_queries`): a short dialogue anchors the time, the last
utterance asks without it ("Can you summarize what we discussed?").

The base questions and group ids are those of `time_queries` (windows.py); the dialogue
frames are templates/ambiguous/frames/*.j2 and the gold rewrite is templates/ambiguous/resolved.j2.
By default each dialogue variant of every frame is used once per base question, paired with the time
phrases in rotation (`pairing: rotate`); `pairing: all` crosses every dialogue with every phrase.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Iterator, Sequence

from gen.errors import GenError
from gen.products.base import BuildContext, ConfigSpec, ConversationProduct, Needs, Questions, Record, Records, Unit
from gen.products.checks import Checks
from gen.products.schema import STRING, Schema, list_of, schema, struct
from gen.products.temporal import checking
from gen.products.temporal.checking import seeded_sample_failures
from gen.products.temporal.options import AmbiguousTimeQueriesOptions
from gen.products.temporal.questions import question_id, window_features, worded_windows
from gen.products.temporal.sampling import pick
from gen.products.temporal.wordings import SLOT, Wordings
from gen.recipe import Recipe

NAME = "ambiguous_time_queries"
DESCRIPTION = "short dialogues that anchor a time, then ask about it with a pronoun; same windows as time_queries"


def features() -> Schema:
    return schema(
        {
            "question_id": STRING,
            "group_id": STRING,
            "conversation_id": STRING,
            "test": STRING,
            "frame": STRING,
            "dialogue": list_of(struct({"speaker": STRING, "text": STRING})),
            "final_utterance": STRING,
            "resolved_question": STRING,
            "time_expression": STRING,
            **window_features(),
        }
    )


class AmbiguousTimeQueries(ConversationProduct[AmbiguousTimeQueriesOptions]):
    name = NAME
    description = DESCRIPTION
    Options = AmbiguousTimeQueriesOptions
    configs = (ConfigSpec(NAME, DESCRIPTION, features(), questions=Questions("test", answers_from="gold_answers")),)
    needs = Needs(timelines=True, products=("log", "time_queries"))

    def check_recipe(self, recipe: Recipe, where: str) -> None:
        wordings = Wordings.for_recipe(recipe.templates, self.options.numeral_styles)
        known = wordings.dialogue_frame_names()
        if unknown := sorted(set(self.options.frames or ()) - set(known)):
            raise GenError(
                f"unknown dialogue frame(s): {', '.join(unknown)}",
                file=recipe.file,
                field=f"{where}.frames",
                expected=f"names among {', '.join(known)}",
            )

    def records(self, unit: Unit, ctx: BuildContext) -> Iterator[tuple[str, Record]]:
        options = self.options
        wordings = Wordings.for_recipe(ctx.templates, options.numeral_styles)
        speakers = unit.conversation.speakers
        seen: set[tuple] = set()
        for base, phrases, fields in worded_windows(unit.stamped, options, wordings):
            group = base.group_id
            combos = dialogue_combos(wordings.dialogues(base.test, speakers, options.frames), phrases, options, group)
            for (frame, number, turns), (phrase, style) in pick(
                combos, options.variant_limit, ctx.seed, NAME, base.conversation_id, group
            ):
                dialogue = [{"speaker": speaker, "text": text.replace(SLOT, phrase)} for speaker, text in turns]
                signature = tuple(turn["text"] for turn in dialogue)
                qid = question_id(
                    NAME, base.conversation_id, base.test, base.params, f"{frame}#{number}", phrase, style
                )
                if signature in seen:
                    ctx.reject(
                        NAME,
                        qid,
                        "duplicate dialogue in the conversation",
                        " / ".join(signature),
                        conversation_id=base.conversation_id,
                    )
                    continue
                seen.add(signature)
                yield (
                    NAME,
                    {
                        "question_id": qid,
                        "group_id": group,
                        "conversation_id": base.conversation_id,
                        "test": base.test,
                        "frame": frame,
                        "dialogue": dialogue,
                        "final_utterance": dialogue[-1]["text"],
                        "resolved_question": wordings.resolved(phrase),
                        "time_expression": phrase,
                        **fields,
                    },
                )

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        group = records[NAME]
        conversation_id = unit.conversation_id
        view = checking.check_unit(unit, group, self.options, checks, NAME, ctx.recipe.timeline.now_offset_minutes)
        check_seeded_dialogues(unit, group, view, self.options, ctx, checks)
        speaker_a, speaker_b = unit.conversation.speakers
        unambiguous = {row["group_id"]: row["relevant_response_indices"] for row in unit.records_of("time_queries")}
        dialogues = Counter(tuple(turn["text"] for turn in row["dialogue"]) for row in group)
        checks.check(
            "no duplicate dialogue within a conversation", max(dialogues.values(), default=1) == 1, conversation_id
        )
        expressions = defaultdict(set)  # every time expression used for a base question
        for row in group:
            expressions[row["group_id"]].add(row["time_expression"].lower())
        for row in group:
            where = f"{conversation_id} {row['question_id']}"
            turns, final = row["dialogue"], row["final_utterance"]
            checks.check(
                "final_utterance is the last turn of the dialogue", bool(turns) and turns[-1]["text"] == final, where
            )
            checks.check(
                "the final utterance contains none of its base question's time expressions",
                not any(e in final.lower() for e in expressions[row["group_id"]]),
                f"{where}: {final!r}",
            )
            checks.check(
                "an earlier turn contains the time expression",
                any(row["time_expression"] in turn["text"] for turn in turns[:-1]),
                where,
            )
            checks.check(
                "the resolved question contains the time expression",
                row["time_expression"] in row["resolved_question"],
                where,
            )
            checks.check(
                "speaker_a asks the final question, and only the two speakers talk",
                bool(turns)
                and turns[-1]["speaker"] == speaker_a
                and all(turn["speaker"] in (speaker_a, speaker_b) for turn in turns),
                where,
            )
            if row["group_id"] in unambiguous:  # time_queries with other tests or spans may lack the group
                checks.check(
                    "relevant set equals the time_queries group's with the same group_id",
                    unambiguous[row["group_id"]] == row["relevant_response_indices"],
                    where,
                )

    def count(self, config: str, records: Sequence[Record]) -> Counter:
        counts = checking.count(records)
        counts.update(("frame", row["frame"]) for row in records)
        return counts

    def summary(self, config: str, counts: Counter) -> dict:
        out = checking.summary(counts, self.options.tests)
        out["by_frame"] = dict(sorted((key[1], n) for key, n in counts.items() if key[0] == "frame"))
        return out


def dialogue_combos(
    dialogues: list, phrases: list[tuple[str, str]], options: AmbiguousTimeQueriesOptions, group: str
) -> list[tuple]:
    """Every (dialogue, (phrase, style)) a base question may be worded with, in the order the sample draws from."""
    if options.pairing == "all":
        return [(d, p) for d in dialogues for p in phrases]
    offset = int(group, 16) % len(phrases)
    return [(d, phrases[(j + offset) % len(phrases)]) for j, d in enumerate(dialogues)]


def check_seeded_dialogues(
    unit: Unit,
    rows: Sequence[Record],
    view: checking.LogView,
    options: AmbiguousTimeQueriesOptions,
    ctx: BuildContext,
    checks: Checks,
) -> None:
    """Each base question keeps the seeded sample of its dialogues (time_queries' check, on dialogues)."""
    wordings = Wordings.for_recipe(ctx.templates, options.numeral_styles)
    speakers = unit.conversation.speakers

    def variants(test: str, params: dict, group: str, yearless_ok: bool) -> tuple[int, Callable[[int], Hashable]]:
        phrases = wordings.phrases(test, params, yearless_ok)
        combos = dialogue_combos(wordings.dialogues(test, speakers, options.frames), phrases, options, group)

        def dialogue(i: int) -> tuple[str, ...]:
            (_, _, turns), (phrase, _) = combos[i]
            return tuple(text.replace(SLOT, phrase) for _, text in turns)

        return len(combos), dialogue

    kept: defaultdict[str, list[Hashable]] = defaultdict(list)
    for row in rows:
        kept[row["group_id"]].append(tuple(turn["text"] for turn in row["dialogue"]))
    wrong, checked = seeded_sample_failures(unit.conversation_id, kept, view, options, ctx.seed, NAME, variants)
    checks.add("each base question keeps its seeded sample of dialogues", checked, wrong)
