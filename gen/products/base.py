"""The product contract: what every product declares and implements, and what the runner gives it.

A product is a class in its family's subpackage, registered by name in gen/products/registry.py:

    name, description   how a recipe selects it (`type: name`) and how `gen products` lists it
    Options             a pydantic model of its recipe options (unknown keys rejected)
    configs             the configs it writes, each with an explicit schema (plain data, gen/products/schema.py)
    needs               what the runner must provide: timelines, the LLM engine, other products' records
    check_recipe        recipe-level checks made at load (an endpoint name that exists, a frame that exists)
    build               the records, conversation by conversation
    validate            an independent check of one conversation's records
    count / summary     running counts, merged over conversations, turned into run.json's summary

The unit of work is one conversation (`Unit`): a product never sees another conversation's records, so
runs stream (memory follows the largest conversation) and split over processes with the same bytes.
Products that call an LLM receive several units at once, so one engine step covers many conversations.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from gen.conversation import Conversation
from gen.products.checks import Checks
from gen.products.schema import BOOL, Schema, schema
from gen.recipe import Recipe, StrictModel
from gen.templating import Templates
from gen.timeline import Timeline

if TYPE_CHECKING:  # the engine is only imported where a product runs LLM steps
    from gen.llm.engine import Engine
    from gen.llm.task import Task

Record = dict[str, Any]
Records = dict[str, list[Record]]  # config name → the records of one conversation
OptionsT = TypeVar("OptionsT", bound=StrictModel)


@dataclass(frozen=True)
class Questions:
    """What scoring and the harness exports need to know of a config of questions (run.json carries it, so
    `gen eval` and `gen export` read it from the dataset instead of a table of their own)."""

    group_field: str  # questions are scored by recall/F2 and averaged over this field's values ("the test")
    answer_field: str | None = None  # the field holding a gold answer; None: the evidence is the answer
    asked_by_speaker_a: bool = False  # "what did we discuss": speaker_a asks speaker_b; else the text names them
    # A config of answers, one per base question (its `group_id`, its `answer`), that holds this config's gold
    # answers when the run wrote it (a product of its own, so the questions are the same with or without it).
    answers_from: str | None = None
    # The gold answer is computed from the timeline (a date, a count, one of two names), so exact match and token
    # F1 say whether an answer is right. Otherwise a model wrote it, and `gen eval --answers` can also have an LLM
    # judge whether an answer conveys it (gen/judging/written.py).
    answer_computed: bool = False
    # The bool field that marks a question about a time when nothing was said (relevant set [], answered by
    # abstaining), in a config that has such questions (time_queries with `abstentions`). `gen eval` and the
    # exports read the mark through it; the field joins the config's features (`declared_features`).
    abstention_field: str | None = None

    def declared(self) -> dict[str, Any]:
        """What run.json carries. `abstention_field` only when set: a run without abstentions writes the report it
        always wrote, byte for byte."""
        out = dataclasses.asdict(self)
        if self.abstention_field is None:
            del out["abstention_field"]
        return out


def declared_features(features: Schema, questions: Mapping[str, Any] | None) -> Schema:
    """A config's features as the run wrote them: the product's schema, then the bool field that run.json's
    `questions.abstention_field` names, if any. The one rule the product (for its records), the card and the
    Hub export (which read the class's schema and run.json) all use, so the three always agree."""
    name = (questions or {}).get("abstention_field")
    return [*features, *schema({name: BOOL})] if isinstance(name, str) else features


@dataclass(frozen=True)
class ConfigSpec:
    """One config a product writes (`<config>/<split>.jsonl`)."""

    name: str
    description: str
    features: Schema  # plain data in the card's form, so a run never imports `datasets` to describe a config
    questions: Questions | None = None  # set on a config of questions with their relevant responses


@dataclass(frozen=True)
class Needs:
    """What the runner provides before `build`: stamped timelines (with padding), the LLM engine, and the
    records of other products (by product name) for the same conversation."""

    timelines: bool = False
    llm: bool = False
    products: tuple[str, ...] = ()


@dataclass(frozen=True)
class Unit:
    """One conversation's work: the conversation, its timeline when a product needs one, and the records
    other products wrote for it (config name → records), for the products named in `needs.products`."""

    conversation: Conversation
    timeline: Timeline | None = None
    inputs: Mapping[str, Sequence[Record]] = field(default_factory=dict)

    @property
    def conversation_id(self) -> str:
        return self.conversation.conversation_id

    @property
    def stamped(self) -> Timeline:
        if self.timeline is None:  # a product that reads the timeline must declare needs.timelines
            raise RuntimeError(f"{self.conversation_id}: no timeline; the product must declare needs.timelines")
        return self.timeline

    def records_of(self, config: str) -> Sequence[Record]:
        if config not in self.inputs:
            raise RuntimeError(
                f"{self.conversation_id}: records of {config!r} were not provided; declare the "
                "product that writes them in needs.products"
            )
        return self.inputs[config]


@dataclass
class Reject:
    """An item a product gave up on, for rejects.jsonl."""

    product: str
    item_id: str
    reason: str
    raw_text: str | None = None
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> Record:
        return {
            "product": self.product,
            "item_id": self.item_id,
            "reason": self.reason,
            "raw_text": self.raw_text,
            **self.details,
        }


@dataclass
class BuildContext:
    """What the runner gives every product: the recipe, the run's engine (in the LLM stage only) and a place
    for rejects. The same in every worker process."""

    recipe: Recipe
    engine: Engine | None = None
    rejects: list[Reject] = field(default_factory=list)

    @property
    def templates(self) -> Templates:
        """The recipe's templates (gen/templating.py): every wording and prompt a product renders comes from here."""
        return self.recipe.templates

    @property
    def seed(self) -> int:
        return self.recipe.seed

    def llm(self) -> Engine:
        if self.engine is None:  # the runner provides the engine to products that declare needs.llm
            raise RuntimeError("no LLM engine in this stage; the product must declare needs.llm")
        return self.engine

    def reject(self, product: str, item_id: str, reason: str, raw_text: str | None = None, **details: Any) -> None:
        self.rejects.append(Reject(product, item_id, reason, raw_text, details))


class Product(ABC, Generic[OptionsT]):
    """See the module docstring. Subclasses set the class attributes and implement build and validate."""

    name: ClassVar[str]
    description: ClassVar[str]
    Options: ClassVar[type[StrictModel]]
    # A product whose configs depend on its options sets its own in __init__ (time_queries with abstentions); the
    # card and the Hub export read the class's, with what run.json adds to them (declared_features).
    configs: tuple[ConfigSpec, ...]
    needs: Needs = Needs()  # a product whose needs depend on its options sets its own in __init__
    # An LLM product whose `build` keeps nothing from one batch of conversations to the next (no count over the
    # run, no reading of engine.rejects) sets this: the run may then build two batches at once, in two threads
    # (gen/pipeline/executors.py:llm_results), so that its calls keep the endpoints busy between batches.
    concurrent_batches: ClassVar[bool] = False

    def __init__(self, options: OptionsT) -> None:
        self.options = options

    def check_recipe(self, recipe: Recipe, where: str) -> None:
        """Recipe-level checks made when the recipe is loaded; `where` names the product entry."""

    @abstractmethod
    def build(self, units: Sequence[Unit], ctx: BuildContext) -> Iterator[Records]:
        """Exactly one Records (every config of the product as a key) per unit, in unit order."""

    @abstractmethod
    def validate(self, unit: Unit, records: Records, checks: Checks, ctx: BuildContext) -> None:
        """Check one conversation's records by a path independent of `build`."""

    def count(self, config: str, records: Sequence[Record]) -> Counter:
        """Counts over one conversation's records of `config`; added up over the run for `summary`."""
        return Counter()

    def summary(self, config: str, counts: Counter) -> dict[str, Any]:
        """run.json's summary of `config` from the counts of every conversation."""
        return {}

    def llm_tasks(self, units: Sequence[Unit], ctx: BuildContext) -> list[tuple[str, list[Task], int]]:
        """For `gen plan` and `gen preview`: (step, first-round tasks in item order, the most calls the step
        can make with every regeneration, verify and correction round) per LLM step. Products without LLM
        steps have none."""
        return []

    def empty_records(self) -> Records:
        return {spec.name: [] for spec in self.configs}


class ConversationProduct(Product[OptionsT]):
    """A product whose records for a conversation depend on that conversation alone."""

    def build(self, units: Sequence[Unit], ctx: BuildContext) -> Iterator[Records]:
        for unit in units:
            records = self.empty_records()
            for config, record in self.records(unit, ctx):
                records[config].append(record)
            yield records

    @abstractmethod
    def records(self, unit: Unit, ctx: BuildContext) -> Iterator[tuple[str, Record]]:
        """(config name, record) pairs of one conversation, in output order."""
