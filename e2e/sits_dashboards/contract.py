"""The series the project exports, collected from its code, for checking the dashboards.

Nothing here is a copied list: the operator's metrics are its ``prometheus_client``
registry, the cache sidecar's are the registry its metric classes fill, the request
contract and the gateway's own series are what their OpenTelemetry instruments export
after one recorded request, and vLLM's names are read from the sources of the vLLM
release in the project's vLLM venv (``scripts/setup-vllm.sh``).

Each sample name maps to its label names; Prometheus adds target labels at scrape time
(``TARGET_LABELS``), and ``le`` comes with histogram buckets.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics_core import Metric

# Labels a scrape adds (the PodMonitor/ServiceMonitor and kubernetes_sd jobs).
TARGET_LABELS = frozenset({"namespace", "pod", "container", "endpoint", "job", "instance"})
Series = dict[str, frozenset[str]]


def _family_samples(family: Metric, labels: frozenset[str]) -> Series:
    kind = family.type
    name = family.name
    if kind == "counter":
        return {f"{name}_total": labels}
    if kind == "histogram":
        return {
            f"{name}_bucket": labels | {"le"},
            f"{name}_sum": labels,
            f"{name}_count": labels,
        }
    if kind == "summary":
        return {f"{name}_sum": labels, f"{name}_count": labels, name: labels | {"quantile"}}
    return {name: labels}


def _declared_labels(registry: CollectorRegistry) -> dict[str, frozenset[str]]:
    """Family name -> label names as declared (children may not exist yet)."""
    found: dict[str, frozenset[str]] = {}
    for collector in list(getattr(registry, "_collector_to_names", {})):
        names = getattr(collector, "_labelnames", None)
        if names is None:
            continue
        for family in collector.describe():
            found[family.name] = frozenset(names)
    return found


def registry_series(registry: CollectorRegistry, prefix: str = "") -> Series:
    declared = _declared_labels(registry)
    series: Series = {}
    for family in registry.collect():
        if not family.name.startswith(prefix):
            continue
        labels: set[str] = set(declared.get(family.name, frozenset()))
        for sample in family.samples:
            labels.update(k for k in sample.labels if k not in {"le", "quantile"})
        series.update(_family_samples(family, frozenset(labels)))
    return series


def operator_series() -> Series:
    import sits_operator.handlers.metrics  # noqa: F401  (registers the operator's metrics)

    return registry_series(REGISTRY, "sits_")


def sidecar_series() -> Series:
    """The sidecar's registry: every tier's series and the contract (source=sidecar)."""
    from sits_inference.cache.lora.telemetry import LoraMetrics
    from sits_inference.cache.metrics import CacheMetrics
    from sits_inference.cache.semantic import cache as semantic_cache
    from sits_inference.cache.sidecar_metrics import SidecarMetrics
    from sits_inference.cache.vector.telemetry import VectorMetrics

    shared = CacheMetrics()
    SidecarMetrics(shared.registry)
    LoraMetrics(shared)
    VectorMetrics(shared)
    semantic_cache._Series(shared.registry)
    return registry_series(shared.registry)


def _request() -> object:
    from sits_inference.openai.metrics import RequestRecord

    return RequestRecord(
        variant="v1",
        operation="chat",
        model="m",
        code=200,
        duration_s=0.5,
        prompt_tokens=10,
        completion_tokens=5,
        ttft_s=0.1,
        usage_known=True,
    )


def gateway_series() -> Series:
    """The gateway's registry after one request of every kind: the request contract
    (source=gateway) and the gateway's own series."""
    from sits_inference.gateway.table import RoutingTable, VariantRoute
    from sits_inference.gateway.telemetry import Probes
    from sits_inference.openai.metrics import RequestRecord

    probes = Probes()
    probes.use_table(
        RoutingTable(
            namespace="ns",
            deployment="d",
            variants=(VariantRoute(name="v1", weight=100, endpoints=("http://x",)),),
        )
    )
    record = _request()
    assert isinstance(record, RequestRecord)
    probes.record(record)
    probes.rejected(404, "unknown_model")
    probes.retried("v1")
    try:
        return registry_series(probes.registry)
    finally:
        probes.shutdown()


# `self._gauge_cls(name="vllm:...")` (or Gauge, Counter, Histogram) in vLLM's loggers.
VLLM_NAME = re.compile(
    r"(?P<kind>counter|gauge|histogram)(?:_cls)?\(\s*name=\"(?P<name>vllm:[A-Za-z0-9_:]+)\"",
    re.IGNORECASE,
)


def vllm_series(site_packages: Path) -> Series:
    """vLLM's Prometheus sample names from its v1 metrics sources (labels unchecked: an
    empty set means "any")."""
    series: Series = {}
    for source in sorted((site_packages / "vllm" / "v1" / "metrics").glob("*.py")):
        text = source.read_text()
        for match in VLLM_NAME.finditer(text):
            kind, name = match["kind"].capitalize(), match["name"]
            if kind == "Counter":
                series[f"{name}_total"] = frozenset()
            elif kind == "Histogram":
                for suffix in ("_bucket", "_sum", "_count"):
                    series[name + suffix] = frozenset()
            else:
                series[name] = frozenset()
    return series


def vllm_site_packages(venv: Path) -> Path | None:
    """The vLLM venv's site-packages, if it has vLLM."""
    for candidate in sorted(venv.glob("lib/python3*/site-packages")):
        if (candidate / "vllm" / "v1" / "metrics").is_dir():
            return candidate
    return None


def project_series() -> Series:
    """Every series the project's own code exports (not vLLM's)."""
    series: Series = {}
    parts: Iterable[Series] = (operator_series(), sidecar_series(), gateway_series())
    for part in parts:
        for name, labels in part.items():
            series[name] = series.get(name, frozenset()) | labels
    return series
