"""The TeaBag judge (`gen judge`): a system's answers to the counterfactual questions of a `teabag` config,
marked Correct or Incorrect by an LLM, and the success rate overall and per source.

Data flows one way:

    items.py     the questions of the dataset (either folder layout, read with gen.eval's readers) and the
                 answers file, every bad line named
    ask.py       the judge's rubric: its prompt (templates/prompts/teabag_judge.j2), its reply model, its cases
    score.py     each question's verdict (judged, no answer, or not judged) and the rates
    report.py    the table printed and the verdicts file written (all or nothing)
    judging.py   asks the judging endpoint (the work of gen.judge; the command is in gen/cli/scoring.py)

Which endpoint judges and how it is asked (cache, correction round, reject limit) is gen.judging's, shared with
the judge of `gen eval --answers`.

Questions without an answer are marked Incorrect without a call; questions the judge gave no usable verdict
for are listed with the reason and left out of the rates.
"""
