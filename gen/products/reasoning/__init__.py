"""Temporal reasoning questions with computed gold answers: when a topic last came up, how many days ago, which of
two came first and how many days lay between them (docs/temporal-reasoning.md).

    temporal_reasoning  the product: its config, needs, build and validate
    options             its recipe options
    topics              the topic phrases asked about, and the responses that mention each
    questions           the base questions and their answers, from the topics and the timeline
    wording             question and answer texts, from templates/temporal_reasoning/
    checking            the validator: every answer and evidence set recomputed from the log records
"""
