"""gold_answers: LLM-written gold answers of the time queries, each claim citing the responses it rests on."""
