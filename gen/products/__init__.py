"""Products: what a recipe's `products:` list can name. One subpackage per family, each with the same rooms:

  options.py    the family's recipe options (pydantic; unknown keys refused)
  steps.py      its checked LLM steps: items, prompts, checks (only families that call an LLM)
  checking.py   its validator, an independent path from the written records back to the source
  <product>.py  the product: configs and their schema, build, validate, counts and summary

Families:

  chat_log/        log (time-stamped responses) and conversations (now, current session, counts)
  temporal/        time_queries and ambiguous_time_queries, with their windows, wordings and seeded sampling
  time_content/    time_content_questions, with anchor selection, question rules and content words
  persona/         persona_sql: persona pseudo-dialogues with SQL storage labels, run in a sandbox
  counterfactual/  teabag: counterfactual questions with a synthetic next session

The contract every product implements is in base.py; registry.py finds products through the `gen.products`
entry point group (gen's own are registered there too). Helpers shared by families live here at the top:
checks.py (the validators' tally), schema.py (config schemas as plain data), date_words.py and llm_options.py.
"""
