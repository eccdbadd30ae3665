"""The LLM cache: replies kept by content in one SQLite file, shared by every recipe and run.

Modules:

* ``store`` — :class:`Cache` (reads, the one writer thread, group commit), :class:`CachedReply`, the key of a call
  (:func:`cache_key`) and :class:`Recent` (the keys put since a step read its own);
* ``file`` — the SQLite file itself: every connection to it, the checks made before SQLite opens it, the one
  message for a lock or damage, how a text that UTF-8 cannot hold is stored;
* ``repair`` — ``gen cache repair``: every readable reply of a damaged file copied into a new one.

The rest of gen imports these names from here; inside gen/llm each module names the module it uses.
"""

from gen.llm.cache.repair import repair
from gen.llm.cache.store import Cache, CachedReply, cache_key

__all__ = ["Cache", "CachedReply", "cache_key", "repair"]
