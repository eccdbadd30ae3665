"""Harness exports: a finished dataset rewritten in the layouts other evaluation projects read.

  source.py       the dataset as the exports see it: conversations (speakers, session starts, now), their
                  responses, and the questions of one config; refuses a stopped or failed run
  dates.py        the date styles of the targets (LoCoMo's "1:56 pm on 8 May, 2023", LongMemEval's
                  "2023/05/20 (Sat) 02:21", the BEIR titles' "Friday 2024-03-22 16:12:08")
  questions.py    what a question becomes there: its text (templates/harness/), its gold answer (none today:
                  every current question config scores retrieval), one wording per group chosen by seed
  locomo.py       samples shaped like locomo10.json
  longmemeval.py  one instance per question group, shaped like longmemeval_s.json
  beir.py         corpus.jsonl, queries.jsonl and qrels/test.tsv per conversation
  folder.py       the output folder: built beside the target, renamed into place, never over foreign files
  cli.py          the `gen export` command

Data flows one way: source → questions → a format's builder → folder. Nothing here imports a product.
"""
