"""The Grafana dashboards the Helm chart ships (charts/sits-operator/dashboards/*.json).

Built with the Grafana Foundation SDK (``grafana-foundation-sdk``) from the project's own
metric contracts: the request metrics (``sits_requests_total``,
``sits_request_duration_seconds``...), the operator's gauges and counters, the cache
sidecar's ``sits_cache_*`` series and vLLM's ``vllm:*``. The SLI panels take their queries
and thresholds from the SITS2026 policy file, so they show what the operator judges.

``python -m sits_dashboards`` (``make dashboards``) writes the JSON files;
``dashboard_queries`` lists every query with its template variables filled in, for a
test to run against a real Prometheus.
"""

from __future__ import annotations

from .build import DASHBOARD_DIR, Dashboard, build_dashboards, render_json, write_dashboards
from .queries import ANNOTATION, dashboard_queries

__all__ = [
    "ANNOTATION",
    "DASHBOARD_DIR",
    "Dashboard",
    "build_dashboards",
    "dashboard_queries",
    "render_json",
    "write_dashboards",
]
