"""Time queries and their ambiguous versions: the 11 tests, their windows and wordings (docs/time-queries.md)."""
