"""The local Prometheus finds pods on the real apiserver (``kubernetes_sd_configs``).

As a Prometheus in a real cluster finds SITS pods: by the ``prometheus.io/*`` annotations
the operator renders, through the apiserver's pod list, with ``honor_labels`` so the
request-metric contract's own labels (its ``namespace`` is the SitsDeployment's, not
necessarily the pod's) reach the TSDB unchanged. Only pods on the real node's network are
scraped. The exporter pod publishes a contract series whose ``namespace`` and ``variant``
differ from the pod's namespace and ``variant`` label on purpose: a Prometheus without
``honor_labels`` would rename them ``exported_*``.
"""

from __future__ import annotations

import json
import re
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from tests.integration.real_node import wait

from sits_live.stack import ON_REAL_NODE, apply, get, pod_ready
from sits_localcluster import network
from sits_localcluster.cluster import LocalCluster
from sits_localcluster.prometheus import (
    PROMETHEUS_BIN,
    PROMTOOL_BIN,
    KubernetesSd,
    LocalPrometheus,
    ip_regex,
    kubernetes_sd_supported,
)

pytestmark = pytest.mark.timeout(240)

#: Already imported by the real-node suites; any image with python3 serves.
IMAGE = "sits.local/sits-inference:0.1.0"
PORT = 8080
SERIES = (
    'sits_requests_total{namespace="prod",sits_deployment="chat",variant="v1",'
    'operation="chat",token_bucket="le128",outcome="success",code="200",source="sidecar"} 7'
)
EXPORTER = f"""
import http.server
BODY = b'# TYPE sits_requests_total counter\\n{SERIES}\\n'
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        ok = self.path == "/custom-metrics"
        self.send_response(200 if ok else 404)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.end_headers()
        self.wfile.write(BODY if ok else b"")
http.server.ThreadingHTTPServer(("0.0.0.0", {PORT}), H).serve_forever()
"""


def needs_kubernetes_sd(workdir: Path) -> None:
    assert kubernetes_sd_supported(workdir), (
        f"{PROMETHEUS_BIN} has no kubernetes_sd_configs (Debian's 2.42+ds leaves it out); "
        "scripts/setup.sh builds one that has it (scripts/setup-prometheus.sh)"
    )


def exporter_pod(name: str, scrape: bool) -> dict[str, Any]:
    annotations = {"prometheus.io/port": str(PORT), "prometheus.io/path": "/custom-metrics"}
    annotations["prometheus.io/scrape"] = "true" if scrape else "false"
    container = {
        "name": "main",
        "image": IMAGE,
        "imagePullPolicy": "Never",
        "command": ["python3", "-c", EXPORTER],
        "ports": [{"name": "http", "containerPort": PORT}],
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        # a pod label named like a contract label: the series' own value must win
        "metadata": {"name": name, "labels": {"variant": "pod-label"}, "annotations": annotations},
        "spec": {**ON_REAL_NODE, "containers": [container], "terminationGracePeriodSeconds": 1},
    }


def api(prometheus: LocalPrometheus, path: str, **params: str) -> Any:
    url = f"{prometheus.url}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=5) as response:
        return json.loads(response.read())["data"]


def test_the_configuration_is_valid_for_the_real_prometheus(tmp_path: Path) -> None:
    needs_kubernetes_sd(tmp_path)
    for name in ("ca.crt", "client.crt", "client.key"):
        (tmp_path / name).write_text("")
    sd = KubernetesSd(
        "https://127.0.0.1:6443",
        tmp_path / "ca.crt",
        tmp_path / "client.crt",
        tmp_path / "client.key",
        ("ns",),
    )
    prometheus = LocalPrometheus(tmp_path, ["127.0.0.1:9"], kubernetes=sd)
    config = tmp_path / "prometheus.yml"
    config.write_text(json.dumps(prometheus.config()))
    result = subprocess.run(
        [PROMTOOL_BIN, "check", "config", "--syntax-only", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    (job,) = [j for j in prometheus.config()["scrape_configs"] if "kubernetes_sd_configs" in j]
    assert job["honor_labels"] is True


@pytest.mark.parametrize(
    ("cidr", "inside", "outside"),
    [
        (network.NODE_POD_CIDR, "10.244.1.23", "10.244.128.5"),
        ("10.244.1.0/24", "10.244.1.255", "10.244.10.1"),
    ],
)
def test_only_the_real_node_s_pods_are_kept(cidr: str, inside: str, outside: str) -> None:
    assert re.fullmatch(ip_regex(cidr), inside)
    assert not re.fullmatch(ip_regex(cidr), outside)


def test_pods_off_the_real_node_s_network_are_refused() -> None:
    with pytest.raises(ValueError, match="real node"):
        KubernetesSd(
            "https://127.0.0.1:1", Path("a"), Path("b"), Path("c"), pod_cidr=network.KWOK_POD_CIDR
        )


@pytest.mark.cluster
def test_an_annotated_pod_is_found_and_scraped_with_the_contract_s_labels_unchanged(
    local_cluster: LocalCluster, cluster_namespace: str, tmp_path: Path
) -> None:
    needs_kubernetes_sd(tmp_path)
    local_cluster.ensure_images(("sits-inference",))
    ns = cluster_namespace
    apply(local_cluster, ns, exporter_pod("scraped", True), exporter_pod("ignored", False))
    wait(
        "both exporter pods running",
        lambda: all(
            pod_ready(get(local_cluster, "pod", "-n", ns, n)) for n in ("scraped", "ignored")
        ),
    )
    sd = KubernetesSd.for_cluster(local_cluster, namespaces=(ns,))
    prometheus = LocalPrometheus(tmp_path / "prometheus", [], kubernetes=sd).start()
    try:
        found: list[dict[str, Any]] = []

        def scraped() -> bool:
            found[:] = api(prometheus, "query", query="sits_requests_total")["result"]
            return bool(found)

        wait("Prometheus to discover and scrape the annotated pod", scraped, timeout=60)
        targets = api(prometheus, "targets")["activeTargets"]
    finally:
        prometheus.stop()
    (series,) = found
    labels = series["metric"]
    pod_ip = get(local_cluster, "pod", "-n", ns, "scraped")["status"]["podIP"]
    assert labels["instance"] == f"{pod_ip}:{PORT}"
    assert labels["pod"] == "scraped"  # target labels without a clash are kept
    contract = {
        "namespace": "prod",
        "sits_deployment": "chat",
        "variant": "v1",
        "operation": "chat",
        "token_bucket": "le128",
        "outcome": "success",
        "code": "200",
        "source": "sidecar",
    }
    assert {k: labels.get(k) for k in contract} == contract
    assert not [k for k in labels if k.startswith("exported_")], labels
    assert series["value"][1] == "7"
    assert [t["labels"]["pod"] for t in targets] == ["scraped"]
