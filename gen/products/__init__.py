"""Products: what a recipe's `products:` list can name. One subpackage per family:

  core/       log (time-stamped responses) and conversations (now, current session, counts)
  temporal/   time_queries and ambiguous_time_queries, with their windows, wordings and window checks
  content/    time_content_questions, with anchor selection and question checks

The contract every product implements is in base.py; registry.py maps names to products. Helpers used by
more than one family live here at the top: checks.py (the validators' tally) and date_words.py.
"""
