"""The LLM judges of gen: a model's yes/no verdict on a system's free-text answer, where no rule can say whether
it is right. `gen judge` (TeaBag answers, gen/teabag_judge/) and `gen eval --answers` (answers to questions whose
gold answer a model wrote) both judge through here, so both choose their endpoint, call, cache and count the
same way.

    endpoint.py  which endpoint judges: an `llm:` section (the dataset's own recipe.yaml, or a file given) and a
                 name
    asking.py    a rubric (prompt, reply) asked about each case through the checked LLM step and the engine;
                 each case's ruling (a verdict, or no verdict and why)
    written.py   the rubric for written answers (templates/prompts/answer_judge.j2, with the abstention rule) and
                 the verdicts file of `gen eval --answers`
"""
