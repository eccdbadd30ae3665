"""gen's own products, registered under the `gen.products` entry point group as any plugin's are (see
pyproject.toml). Their order here is the build order among products that do not need each other, and the order
of `gen products`, run.json and the card."""

from gen.products.answers.gold_answers import GoldAnswers
from gen.products.chat_log.conversations import Conversations
from gen.products.chat_log.log import Log
from gen.products.counterfactual.teabag import TeaBag
from gen.products.persona.persona_sql import PersonaSQL
from gen.products.quality.quality_labels import QualityLabels
from gen.products.reasoning.temporal_reasoning import TemporalReasoning
from gen.products.temporal.ambiguous_time_queries import AmbiguousTimeQueries
from gen.products.temporal.time_queries import TimeQueries
from gen.products.time_content.time_content_questions import TimeContentQuestions

PRODUCTS = (
    Log,
    Conversations,
    TimeQueries,
    AmbiguousTimeQueries,
    TimeContentQuestions,
    TemporalReasoning,
    GoldAnswers,
    PersonaSQL,
    TeaBag,
    QualityLabels,
)
