"""Small real requests that find out what an endpoint accepts, before or beside the calls of a run.

Modules:

* ``mode`` — ``structured_output: auto``: which ``response_format`` an endpoint takes, found by one small request
  per candidate and remembered in the LLM cache;
* ``features`` — ``gen validate --probe``: the features a run's calls need (read off their tasks) and one request
  per feature to see whether the endpoint has it.
"""

from gen.llm.probes.features import EndpointProbe, endpoint_needs, needs_of

__all__ = ["EndpointProbe", "endpoint_needs", "needs_of"]
