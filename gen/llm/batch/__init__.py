"""The OpenAI Batch API (``mode: batch``) and batch files (``--batch-export``, ``--batch-import``), below the
engine: what goes up, what comes down, and what the cache remembers of batches in flight.

Modules:

* ``rounds`` — one round of a step through the Batch API: request files uploaded, batches created and polled,
  result files read line by line, provider files deleted;
* ``files`` — request lines and files within an endpoint's limits, result lines read into :class:`LineResult`,
  ``--batch-import`` output files;
* ``ledger`` — which batch holds which requests and how far it got, kept in the cache's SQLite file;
* ``commands`` — what ``gen batches`` lists, cancels and forgets, in the words it prints.

The engine's side of it (which calls go into a round, what a batch's reply counts as) is
gen/llm/engine/batching.py.
"""
