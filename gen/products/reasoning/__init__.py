"""Temporal reasoning questions with computed gold answers: when a topic last came up, how many days ago, which of
two came first and how many days lay between them (docs/temporal-reasoning.md)."""
