"""Harness exports: a finished dataset rewritten in the layouts other evaluation projects read.

  source.py       the dataset as the exports see it: conversations (speakers, session starts, now), their
                  responses, and the questions of one config; refuses a stopped or failed run
  dates.py        the date styles of the targets (LoCoMo's "1:56 pm on 8 May, 2023", LongMemEval's
                  "2023/05/20 (Sat) 02:21", the BEIR titles' "Friday 2024-03-22 16:12:08")
  questions.py    what a question becomes there: its text (templates/harness/), its gold answer (none today:
                  every current question config scores retrieval), one wording per group chosen by seed
  formats.py      the format registry (the `gen.exports` entry point group): what a format is (a name, a help
                  line, a writer of one config, a reader of a harness's results if it has one), and the one
                  lookup of a --format name
  builtin.py      gen's own formats, registered through the entry point group as a plugin's are
  locomo.py       samples shaped like locomo10.json
  longmemeval.py  one instance per question group, shaped like longmemeval_s.json
  beir.py         corpus.jsonl, queries.jsonl and qrels/test.tsv per conversation
  names.py        conversation ids made into names a harness can put in file names
  exporter.py     one export: every question config through the chosen format, and the manifest
  staging.py      the output folder: built beside the target, renamed into place, never over foreign files
  results.py      a harness's result file read back into gen's predictions (`gen import-predictions`)
  command.py      the `gen export` and `gen import-predictions` commands

Data flows one way: source → questions → a format's writer → folder. Nothing here imports a product.
"""
