"""quality_labels (configs `quality_turns` and `quality_dialogues`; docs/quality.md): every turn of the dialogues the
recipe chooses (the log, TeaBag's written sessions 6, persona pseudo-dialogues) labelled with the feedback reward
the other speaker's follow-up gives it, the retrieval gate and advantage, and the persona-consistency reward's
parts: topic (R2) and repetition (R3.2) always; persona consistency (R1, each of the speaker's persona facts
against the turn, by an NLI endpoint or a local NLI model) and fluency (R3.1, by a language model's
log-probabilities) when the recipe names their backends. A part without its backend (or its inputs: R1 needs
persona facts) is null, and `reward_parts` says which parts `reward` sums."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from itertools import accumulate

from gen.llm import Task
from gen.llm.step import StepPolicy, most_calls
from gen.products.base import BuildContext, ConfigSpec, Needs, Product, Record, Records, Unit
from gen.products.checks import Checks
from gen.products.quality import checking, nli_model, retrieval, steps, vectors
from gen.products.quality.dialogues import LOG, NEEDS, Dialogue, dialogues_of
from gen.products.quality.memories import texts_of
from gen.products.quality.options import QualityLabelsOptions
from gen.products.quality.records import (
    Backends,
    averaged,
    dialogue_features,
    dialogue_record,
    dialogue_rows,
    fact_id,
    finish_row,
    rounded,
    turn_features,
)
from gen.products.quality.signals import LABELS, feedback_words, pc
from gen.products.quality.steps import NAME, FactPair, ScoredReply
from gen.products.quality.vectors import EMBEDDER
from gen.recipe import Recipe
from gen.templating import Templates

TURNS, DIALOGUES = "quality_turns", "quality_dialogues"


class QualityLabels(Product[QualityLabelsOptions]):
    name = NAME
    description = "a quality reward for every turn: the follow-up's feedback, retrieval gating, persona consistency"
    Options = QualityLabelsOptions
    configs = (
        ConfigSpec(TURNS, "one record per turn: feedback reward, gate, advantage, reward parts", turn_features()),
        ConfigSpec(DIALOGUES, "one record per dialogue: the means of its labels, PC", dialogue_features()),
    )
    needs = Needs(timelines=True, products=("log",))

    def __init__(self, options: QualityLabelsOptions) -> None:
        super().__init__(options)
        products = tuple(NEEDS[kind] for kind in options.dialogues)
        self.needs = Needs(timelines=LOG in options.dialogues, llm=options.uses_llm, products=products)

    def check_recipe(self, recipe: Recipe, where: str) -> None:
        """The encoder's packages, the feedback words and a local NLI model, before any source is read."""
        from gen.embedding import model_folder

        model_folder(what=NAME)
        feedback_words(recipe.templates)
        if self.options.nli_model is not None:
            nli_model.require(self.options.nli_model, where)
        if self.options.retrieval_file is not None:
            retrieval.load(retrieval.resolve(recipe.file, self.options.retrieval_file))

    def build(self, units: Sequence[Unit], ctx: BuildContext) -> Iterator[Records]:
        """The labels that need no model, dialogue by dialogue (their texts encoded ahead, many dialogues per
        pass); then each model-backed part in one step over every dialogue of the batch; then the rewards and
        each dialogue's summary."""
        feedback = feedback_words(ctx.templates)
        dialogues = [list(dialogues_of(unit, self.options.dialogues)) for unit in units]
        path = self.options.retrieval_file
        memory_file = None if path is None else retrieval.resolve(ctx.recipe.file, path)
        flat = [d for found in dialogues for d in found]
        tables = []
        for chunk in passes(flat):
            vectors.encode([text for dialogue in chunk for text in texts_of(dialogue)])
            tables += [dialogue_rows(d, feedback, self.options, memory_file) for d in chunk]
        ends = list(accumulate(len(found) for found in dialogues))
        rows = [tables[end - len(found) : end] for found, end in zip(dialogues, ends)]
        pairs = list(fact_pairs(flat, self.options))
        labels = self.nli_labels(pairs, ctx) if pairs else {}
        fluency = self.fluency(flat, ctx) if self.options.lm_endpoint else {}
        backends = Backends.of(self.options)
        for found, tables in zip(dialogues, rows):
            records: Records = {TURNS: [], DIALOGUES: []}
            human_pc: float | None = None
            for dialogue, table in zip(found, tables):
                for row in table:
                    finish_row(row, dialogue, labels, fluency, backends)
                human = None if dialogue.name == LOG else human_pc
                summary = dialogue_record(dialogue, table, backends, human, self.options.include_padding)
                human_pc = summary["pc"] if dialogue.name == LOG else human_pc
                records[TURNS] += table
                records[DIALOGUES].append(summary)
            yield records

    def nli_labels(self, pairs: list[FactPair], ctx: BuildContext) -> dict[str, dict[str, float]]:
        """item id -> the label probabilities of every fact-turn pair the NLI backend answered."""
        if self.options.nli_model is not None:
            found = nli_model.load(self.options.nli_model).probabilities([(p.fact, p.reply) for p in pairs])
            return {pair.item_id: probabilities for pair, probabilities in zip(pairs, found)}
        endpoint = self.options.nli_endpoint
        assert endpoint is not None
        step = steps.nli_step(endpoint, ctx.templates)
        result = steps.run_checked(ctx, step, pairs, endpoint, self.options)
        return {item_id: accepted.value for item_id, accepted in result.accepted.items()}

    def fluency(self, dialogues: Sequence[Dialogue], ctx: BuildContext) -> dict[str, float]:
        """turn id -> the turn's mean token log-probability."""
        endpoint = self.options.lm_endpoint
        assert endpoint is not None
        scored = list(scored_turns(dialogues, ctx.templates))
        result = steps.run_checked(ctx, steps.fluency_step(endpoint), scored, endpoint, self.options)
        return {item_id: accepted.value for item_id, accepted in result.accepted.items()}

    def llm_tasks(self, units: Sequence[Unit], ctx: BuildContext) -> list[tuple[str, list[Task], int]]:
        planned = []
        policy = StepPolicy(self.options.retries)
        dialogues = [d for unit in units for d in dialogues_of(unit, self.options.dialogues)]
        if self.options.nli_endpoint is not None:
            step = steps.nli_step(self.options.nli_endpoint, ctx.templates)
            pairs = list(fact_pairs(dialogues, self.options))
            planned.append((step.name, [step.task(pair, 0) for pair in pairs], most_calls(step, len(pairs), policy)))
        if self.options.lm_endpoint is not None:
            lm = steps.fluency_step(self.options.lm_endpoint)
            scored = list(scored_turns(dialogues, ctx.templates))
            planned.append((lm.name, [lm.task(turn, 0) for turn in scored], most_calls(lm, len(scored), policy)))
        return planned

    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        checking.check_conversation(unit, records[TURNS], records[DIALOGUES], self.options, ctx, checks)

    def count(self, config: str, records: Sequence[Record]) -> Counter:
        counts: Counter = Counter()
        if config == TURNS:
            for row in records:
                counts["turns", ""] += 1
                if row["feedback_reward"] is not None:
                    counts["with feedback", ""] += 1
                    counts["feedback", f"{row['feedback_reward']:+.2f}"] += 1
                if row["gate"] is not None:
                    counts["gate", f"{row['gate']}"] += 1
            for row in averaged(records, self.options.include_padding):
                for label in row["nli_labels"]:
                    counts["nli", label] += 1
        return counts

    def summary(self, config: str, counts: Counter) -> dict:
        if config != TURNS:
            return {}
        rules, backends = self.options.rules, Backends.of(self.options)
        return {
            "turns": counts["turns", ""],
            "with_feedback": counts["with feedback", ""],
            "by_feedback_reward": distribution(counts, "feedback"),
            "by_gate": distribution(counts, "gate"),
            "by_nli_label": {label: counts["nli", label] for label in LABELS},
            "pc": rounded(pc(*(counts["nli", label] for label in LABELS))),
            "settings": {**vars(rules), "memories": self.options.memories, "memory_top_k": self.options.memory_top_k},
            "dialogues": list(self.options.dialogues),
            "backends": {"embedder": EMBEDDER, "nli": backends.nli, "lm": backends.lm},
        }


def distribution(counts: Counter, key: str) -> dict[str, int]:
    """How many labels had each value, in the order of the values."""
    found = [(label, n) for (kind, label), n in counts.items() if kind == key]
    return dict(sorted(found, key=lambda item: float(item[0])))


def passes(dialogues: Sequence[Dialogue]) -> Iterator[list[Dialogue]]:
    """The dialogues in groups whose texts are encoded in one pass: one length-sorted pass over many dialogues
    pads less than one per dialogue. A group holds at most half the vectors vectors.encode keeps, so its vectors
    are still there when its labels are computed (and, for a batch that fits, when the batch is validated)."""
    group: list[Dialogue] = []
    size = 0
    for dialogue in dialogues:
        count = len(texts_of(dialogue))
        if group and size + count > vectors.MEMO_SIZE // 2:
            yield group
            group, size = [], 0
        group.append(dialogue)
        size += count
    if group:
        yield group


def fact_pairs(dialogues: Sequence[Dialogue], options: QualityLabelsOptions) -> Iterator[FactPair]:
    """Every persona fact of the speaking speaker against every turn (none where there are no facts)."""
    if not options.has_nli:
        return
    for dialogue in dialogues:
        for turn in dialogue.turns:
            for k, fact in enumerate(dialogue.personas.get(turn.speaker) or []):
                item_id = fact_id(dialogue.item_id(turn.index), k)
                yield FactPair(item_id, dialogue.conversation_id, turn.index, turn.speaker, fact, turn.text)


def scored_turns(dialogues: Sequence[Dialogue], templates: Templates) -> Iterator[ScoredReply]:
    for dialogue in dialogues:
        for position, turn in enumerate(dialogue.turns):
            earlier = dialogue.turns[position - 1] if position else None
            before = earlier if earlier is not None and earlier.session_index == turn.session_index else None
            context = steps.fluency_context(
                templates, turn.speaker, before.speaker if before else None, before.text if before else None
            )
            item_id = dialogue.item_id(turn.index)
            yield ScoredReply(item_id, dialogue.conversation_id, turn.index, context, turn.text)
