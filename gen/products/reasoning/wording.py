"""The words of temporal_reasoning: question wordings and answer texts, all from templates/temporal_reasoning/
(Python supplies the variables and splits the output into lines)."""

from __future__ import annotations

from gen.errors import GenError
from gen.products.date_words import date_variables
from gen.products.reasoning.questions import Answer, BaseQuestion
from gen.templating import Templates

QUESTIONS = "temporal_reasoning/questions/{test}.j2"
ANSWER = "temporal_reasoning/answer.j2"


def wordings(base: BaseQuestion, templates: Templates) -> list[str]:
    """Every wording of a base question, in template order, each naming its topics."""
    name = QUESTIONS.format(test=base.test)
    names = {"topic": base.topics[0]} if len(base.topics) == 1 else {"first": base.topics[0], "second": base.topics[1]}
    found = [line.strip() for line in templates.render(name, **names).splitlines() if line.strip()]
    if not found:
        raise GenError("the template has no wording", file=name, expected="one question per line")
    return found


def answer_text(test: str, answer: Answer, templates: Templates) -> str:
    variables = {"kind": answer.kind, "test": test, "days": answer.days, "choice": answer.choice}
    if answer.date is not None:
        variables.update(date_variables(answer.date))
    else:
        variables.update({"day": "", "month": "", "year": "", "weekday": ""})
    return " ".join(templates.render(ANSWER, **variables).split())
