"""Scoring a system on a finished dataset, and the reference baselines (`gen eval`, `gen baseline`).

This is the consumer's side: it reads a run folder or an export folder (as downloaded from the Hub) and never
the recipe, the sources or any product's build code, so it works on any copy of a dataset gen wrote.

    metrics.py      recall and F2 of one ranking, means per test and over tests (pure functions)
    dataset.py      the question configs, their records and the log, from either folder layout
    predictions.py  reading a predictions file, every bad line named
    report.py       the tables `gen eval` prints and the JSON it writes
    baselines.py    recent, bm25, semantic, semantic_meta
    (gen/embedding.py, shared with products: all-MiniLM-L6-v2 sentence embeddings on CPU with numpy, `eval` extra)
"""
