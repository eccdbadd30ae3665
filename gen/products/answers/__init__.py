"""gold_answers: LLM-written gold answers of the time queries, each claim citing the responses it rests on
(docs/gold-answers.md).

    gold_answers  the product: its configs, needs, build and validate
    options       its recipe options
    steps         the checked LLM step: one item per base question, the prompt, the optional verify call
    rules         the citation rule, which the reply parser runs (a broken reply goes to the correction round)
    checking      the validator: every answer re-checked from the log and question records by its own path
"""
