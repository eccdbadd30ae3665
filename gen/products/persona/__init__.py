"""Persona pseudo-dialogues with SQL storage labels (docs/persona-sql.md)."""
