"""The OpenAI layer both proxies share: the gateway (``sits_inference.gateway``) and the cache
sidecar (``sits_inference.cache``) speak the same protocol to clients and upstreams, so what
they both need lives here once, and neither imports the other (import-linter checks it):

- ``errors``: OpenAI-shaped error bodies (``ApiError``, ``ErrorType``), also as an SSE event;
- ``headers``: which headers are forwarded upstream and relayed back;
- ``requests``: the checks every request body passes, the ``include_usage`` rewrite, reading
  a body under a size limit;
- ``replies``: the JSON error response, the ``/metrics`` page;
- ``sse``: the one server-sent-events parser (framing, ``data:`` lines, ``[DONE]``);
- ``usage``: token counts and served model read from responses and streams;
- ``metrics``: the request-metric contract (``sits_requests_total``,
  ``sits_request_duration_seconds``, ``sits_time_to_first_token_seconds``...) that the
  operator's analysis queries, made with OpenTelemetry and exported for Prometheus;
- ``serving``: starting an aiohttp app and running the event loop.

This package imports neither ``gateway`` nor ``cache``. docs/architecture.md has the picture.
"""
