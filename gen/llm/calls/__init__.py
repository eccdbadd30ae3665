"""One HTTP call to an endpoint and the limits around it; nothing here knows a step, the cache or the engine.

Modules:

* ``request`` — one attempt (:func:`send_once`), the request body (:func:`build_request`), what a failed attempt
  means (:class:`Failure` kinds, :class:`RetryPolicy`) and the stop a fatal one becomes;
* ``replies`` — a reply's bytes read into a checked :class:`Answer` (every completion passes here);
* ``clients`` — every openai client gen makes (no redirect followed, replies size-limited once decoded);
* ``transport`` — the HTTP/1.1 transport under the completion client, and the decoded-size limit;
* ``senders`` — requests sent from worker processes (``--request-processes``);
* ``limiter`` — an endpoint's flow control: concurrency slots, rate buckets, the 429 gate, backoff;
* ``giveup`` — when to stop trying: a call's budget, the endpoint's breaker and refusal count;
* ``endpoint`` — a recipe endpoint at run time (client, flow control, give-up state, structured-output mode) and
  the key scrubber;
* ``attempts`` — the retry loop of one call, counting into the narrow :class:`~gen.llm.calls.attempts.Run` its
  caller hands it.
"""
