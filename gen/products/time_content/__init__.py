"""Time+content questions: anchors chosen beforehand, LLM-written questions, checks (docs/time-content-questions.md)."""
