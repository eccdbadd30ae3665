"""Publishing a run folder: the export folder (parquet + card) and the single-commit Hub push.

  spec.py    the recipe's `export: {hub: {...}}` section (pydantic, imported by gen/recipe.py: keep it light)
  folder.py  run folder → export folder: data/<config>/<split>-0000i-of-0000N.parquet with explicit features,
             README.md (the card, gen/export/card.py), recipe.yaml, run.json, rejects.jsonl when there are rejects
  hub.py     the push through huggingface_hub: checks, create_repo(exist_ok=True), one create_commit
  cli.py     the `gen push` command

Nothing here imports datasets, pyarrow or huggingface_hub at module level, so `gen --help` stays fast.
"""
