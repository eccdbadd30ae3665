"""The engine: a step's items through cache, batches, requests and the correction round, scheduled and counted.

Modules:

* ``engine`` — :class:`Engine`, the surface products and the runner use: ``run_step``, ``plan``, ``preview``,
  ``probe``, ``report``, lanes; it wires the packages below it together;
* ``run`` — what one ``run_step`` works with: tasks prepared into bodies and cache keys (:class:`Prepared`),
  the step in progress (:class:`StepRun`), prompt previews;
* ``items`` — one item's way: cache, batch or request (identical requests in flight shared), parse, correction;
* ``batching`` — the engine's side of the Batch API: a step's missing calls sent as a round, what came back;
* ``workers`` — the event loop thread the calls run on, and a step's worker pool.

The rest of gen imports :class:`Engine` from here.
"""

from gen.llm.engine.engine import Engine

__all__ = ["Engine"]
