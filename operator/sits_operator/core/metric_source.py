"""Which request metrics a SitsDeployment's analysis reads: the gateway's or the sidecars'.

Both proxies export the same contract (``sits_requests_total``...) for the same requests,
told apart by the ``source`` label, and a query must select one: summed, every request
would count twice. The default follows the router, so it is resolved here rather than as
a CRD default (a schema default cannot depend on another field): with ``builtin`` the
operator's gateway sees every request of every variant (the A/B probe point); with
``gatewayAPI`` or ``none`` there is no SITS gateway, and the sidecar in each variant's
pods is the one place that sees all of that variant's requests.
"""

from __future__ import annotations

from sits_operator.model.spec import MetricSource, RouterKind, SitsDeploymentSpec

DEFAULT_BY_ROUTER = {
    RouterKind.BUILTIN: MetricSource.GATEWAY,
    RouterKind.GATEWAY_API: MetricSource.SIDECAR,
    RouterKind.NONE: MetricSource.SIDECAR,
}


def metric_source(spec: SitsDeploymentSpec) -> MetricSource:
    """``spec.analysis.source`` when set, else the router's default."""
    if spec.analysis.source is not None:
        return spec.analysis.source
    return DEFAULT_BY_ROUTER[spec.traffic.router]
