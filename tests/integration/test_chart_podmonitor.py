"""The chart's PodMonitor for kube-prometheus-stack users, and the default Prometheus URL.

kube-prometheus-stack's Prometheus ignores the prometheus.io/* pod annotations the
operator renders; it scrapes what PodMonitors labelled with its `release` select. The
PodMonitor must select exactly the pods the operator renders (variant pods, whose cache
sidecar exports the request metrics, and gateway pods) on the port they name, keep the
series' own labels (honorLabels: no exported_namespace), and look in every namespace.
The selector is checked against the operator's own rendering, not against a copy of it.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from tests.integration.conftest import CHART, REPO, render_chart
from tests.unit.factories import OWNER, spec

from sits_operator.core.render import render_children
from sits_operator.model.policy import DEFAULT_PROMETHEUS_URL, PrometheusEndpoint
from sits_operator.model.settings import OperatorSettings

KUBE_PROMETHEUS_STACK = "http://kube-prometheus-stack-prometheus.monitoring.svc:9090"


def pod_monitors(*args: str) -> list[dict[str, Any]]:
    return [d for d in render_chart(*args) if d["kind"] == "PodMonitor"]


def operator_pods() -> list[dict[str, Any]]:
    """Pod templates of every Deployment the operator renders for a builtin-routed
    SitsDeployment: its variants' and its gateway's."""
    manifests = render_children(OWNER, spec(), OperatorSettings())
    return [m["spec"]["template"] for m in manifests if m["kind"] == "Deployment"]


def test_there_is_no_pod_monitor_unless_asked() -> None:
    assert pod_monitors() == []


def test_the_pod_monitor_selects_every_variant_and_gateway_pod_on_its_metrics_port() -> None:
    (monitor,) = pod_monitors("--set", "podMonitor.enabled=true")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["namespaceSelector"] == {"any": True}
    endpoint, vllm = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint["honorLabels"] is True
    assert vllm["port"] == "vllm"
    assert not vllm.get("honorLabels"), "vLLM's series take the target's namespace and pod"
    assert endpoint["path"] == "/metrics"
    selector = monitor["spec"]["selector"]["matchLabels"]
    pods = operator_pods()
    assert len(pods) >= 3  # two variants and the gateway
    assert any("sits.dev/variant" not in p["metadata"]["labels"] for p in pods)  # a gateway
    for pod in pods:
        labels = pod["metadata"]["labels"]
        assert selector.items() <= labels.items(), labels
        ports = {
            port["name"]: port["containerPort"]
            for container in pod["spec"]["containers"]
            for port in container.get("ports", ())
        }
        # the named port is the one the pod's scrape annotation names, so both ways of
        # finding the pod (PodMonitor, kubernetes_sd on the annotations) scrape the same
        assert str(ports[endpoint["port"]]) == pod["metadata"]["annotations"]["prometheus.io/port"]
        if "sits.dev/variant" in labels:  # vLLM's port, where kubernetes_sd finds it too
            vllm_port = pod["metadata"]["annotations"]["sits.dev/vllm-metrics-port"]
            assert str(ports[vllm["port"]]) == vllm_port
    off = pod_monitors("--set", "podMonitor.enabled=true", "--set", "podMonitor.vllm=false")
    assert len(off[0]["spec"]["podMetricsEndpoints"]) == 1


def test_the_release_label_is_configurable() -> None:
    (monitor,) = pod_monitors(
        "--set",
        "podMonitor.enabled=true",
        "--set",
        "podMonitor.labels.release=prom",
        "--set",
        "podMonitor.interval=30s",
    )
    assert monitor["metadata"]["labels"]["release"] == "prom"
    assert monitor["spec"]["podMetricsEndpoints"][0]["interval"] == "30s"


@pytest.mark.parametrize(
    "where",
    ["model", "crd", "chart-readme", "architecture", "values"],
)
def test_the_default_prometheus_is_kube_prometheus_stack_s_everywhere(where: str) -> None:
    """Release kube-prometheus-stack in namespace monitoring: Service
    kube-prometheus-stack-prometheus, port 9090."""
    if where == "model":
        assert DEFAULT_PROMETHEUS_URL == PrometheusEndpoint().url == KUBE_PROMETHEUS_STACK
        return
    if where == "crd":
        crd = yaml.safe_load((REPO / "crds" / "sitspolicy.yaml").read_text())
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        prometheus = schema["properties"]["spec"]["properties"]["prometheus"]
        assert prometheus["properties"]["url"]["default"] == KUBE_PROMETHEUS_STACK
        return
    path = {
        "chart-readme": CHART / "README.md",
        "architecture": REPO / "docs" / "architecture.md",
        "values": CHART / "values.yaml",
    }[where]
    text = path.read_text()
    assert KUBE_PROMETHEUS_STACK in text
    assert "//prometheus.monitoring.svc" not in text  # the old default
