"""Which headers a proxy forwards upstream and relays back to the client.

Hop-by-hop headers (RFC 9110 section 7.6.1) describe one connection and are never
forwarded; ``Host`` and ``Content-Length`` are set again by the client library for the
new request, and ``Accept-Encoding`` is dropped upstream so bodies arrive as the upstream
wrote them (both proxies read usage and SSE events out of them). Everything else,
``Authorization`` included, passes untouched both ways.
"""

from __future__ import annotations

from collections.abc import Mapping

from multidict import CIMultiDict, CIMultiDictProxy

HOP_BY_HOP = frozenset(
    h.lower()
    for h in (
        "Connection",
        "Keep-Alive",
        "Proxy-Authenticate",
        "Proxy-Authorization",
        "TE",
        "Trailer",
        "Transfer-Encoding",
        "Upgrade",
        "Host",
        "Content-Length",
        "Accept-Encoding",
        "Expect",
    )
)
# The response's own Server and Date would describe the upstream, not the proxy.
_RESPONSE_DROP = frozenset({*HOP_BY_HOP, "server", "date"} - {"accept-encoding"})


def upstream_headers(incoming: CIMultiDictProxy[str], peer: str | None) -> CIMultiDict[str]:
    """The client's end-to-end headers (Authorization included), plus X-Forwarded-For."""
    headers = CIMultiDict((k, v) for k, v in incoming.items() if k.lower() not in HOP_BY_HOP)
    if peer:
        prior = incoming.get("X-Forwarded-For")
        headers["X-Forwarded-For"] = f"{prior}, {peer}" if prior else peer
    return headers


def relayed_headers(upstream: CIMultiDictProxy[str], extra: Mapping[str, str]) -> CIMultiDict[str]:
    """The upstream's end-to-end response headers plus the proxy's own (``extra``)."""
    headers = CIMultiDict((k, v) for k, v in upstream.items() if k.lower() not in _RESPONSE_DROP)
    headers.update(extra)
    return headers
