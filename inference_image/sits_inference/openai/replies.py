"""The responses both proxies build the same way: an ``ApiError`` as JSON, ``/metrics``.

No OpenTelemetry here: the sidecar serves its page without loading the SDK.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest

from .errors import ApiError


def error_reply(
    err: ApiError,
    headers: Mapping[str, str] | None = None,
    *,
    retry_after_s: int | None = None,
) -> web.Response:
    """``err`` as an OpenAI error body with its status, plus ``headers``.

    ``retry_after_s``: a 503 also says when to try again (``Retry-After``): the sidecar's
    model server is restarting, or its vector index is still being copied in. The gateway
    sets none: its 503 means no variant has a ready endpoint, which the client cannot time.
    """
    extra = dict(headers or {})
    if retry_after_s is not None and err.status == 503:
        extra["Retry-After"] = str(retry_after_s)
    return web.Response(
        body=err.body(), status=err.status, content_type="application/json", headers=extra
    )


def metrics_reply(registry: CollectorRegistry) -> web.Response:
    """``GET /metrics``: the registry in Prometheus' text format."""
    body = generate_latest(registry)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
