"""gen: evaluation datasets for long-term-memory dialogue agents, built from multi-session corpora."""

__version__ = "0.1.0"
