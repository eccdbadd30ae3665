"""Quality labels: a reward for each reply from the other speaker's follow-up (keywords, topic, and whether the
memory retrieval or the reply is to blame) and the parts of a persona-consistency reward that need no model
beyond the embedder (topic consistency, distinct-1); docs/quality.md."""
