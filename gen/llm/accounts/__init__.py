"""What the engine counts, projects and shows of a step, below everything that makes calls.

Modules:

* ``counts`` — a step's calls (:class:`StepStats`), the engine's rejects and report (:class:`Accounts`), and the
  reject-rate rule (:func:`past_limit`, the one place it is applied);
* ``lanes`` — batches of a run in flight together: per-lane item tallies and rejects, merged in batch order;
* ``plan`` — ``gen plan`` / ``gen preview``: calls needed and cached, projected tokens and cost;
* ``progress`` — a step's live bar or plain lines on stderr, read off :class:`StepCounters`.
"""
