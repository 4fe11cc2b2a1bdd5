"""The real worker node: kubelet, containerd, runc, CNI bridge, kube-proxy, CoreDNS.

Everything here runs in real containers on ``sits-node-0``; the only traffic is between
the host and the pods' own network namespaces, inside the local cluster's block.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import pytest
from tests.integration.real_node import kill_container
from tests.integration.real_node import wait as _wait

from sits_live.stack import ON_REAL_NODE, pod_ready
from sits_live.stack import apply as _apply
from sits_live.stack import get as _get
from sits_localcluster import network
from sits_localcluster.cluster import LocalCluster
from sits_localcluster.node import MIG_RESOURCES, NODE_NAME, REAL_NODE_TAINT_KEY

pytestmark = pytest.mark.cluster

#: A small image with Python in it (the operator's), for pods that serve or probe.
PYTHON_IMAGE = "sits.local/sits-operator:0.1.0"


def _python_pod(name: str, command: list[str], **extra: Any) -> dict[str, Any]:
    container: dict[str, Any] = {
        "name": "main",
        "image": PYTHON_IMAGE,
        "imagePullPolicy": "Never",
        "command": command,
        **extra,
    }
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {**ON_REAL_NODE, "containers": [container], "terminationGracePeriodSeconds": 1},
    }


def _pod_ready(cluster: LocalCluster, namespace: str, name: str) -> bool:
    return pod_ready(_get(cluster, "pod", "-n", namespace, name))


@pytest.fixture(scope="module")
def node_images(local_cluster: LocalCluster) -> LocalCluster:
    """The images these tests run, built once (cached by content) and imported."""
    local_cluster.ensure_images(("sits-operator",))
    return local_cluster


def test_node_is_ready_with_mig_slices_labels_and_taint(local_cluster: LocalCluster) -> None:
    node = _get(local_cluster, "node", NODE_NAME)
    status = node["status"]
    ready = [c for c in status["conditions"] if c["type"] == "Ready"]
    assert ready, status["conditions"]
    assert ready[0]["status"] == "True", ready
    assert status["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
    kubelet_version = status["nodeInfo"]["kubeletVersion"]
    server = json.loads(local_cluster.kubectl("version", "-o", "json").stdout)["serverVersion"]
    assert kubelet_version == server["gitVersion"], "kubelet and apiserver from one release"
    for resource, count in MIG_RESOURCES.items():
        assert status["allocatable"][resource] == count
        assert status["capacity"][resource] == count
    addresses = {a["type"]: a["address"] for a in status["addresses"]}
    assert addresses["InternalIP"] == network.NODE_IP
    labels = node["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert labels["nvidia.com/mig.config"] == "all-1g.10gb"
    taints = node["spec"].get("taints", [])
    assert [t["key"] for t in taints] == [REAL_NODE_TAINT_KEY]


@pytest.mark.timeout(900)  # the first user of `node_images`, which may build an image
def test_pod_resolves_services_and_reaches_the_apiserver(
    node_images: LocalCluster, cluster_namespace: str
) -> None:
    """Cluster DNS (CoreDNS) and a ClusterIP (kube-proxy) work for in-cluster clients."""
    script = (
        "import socket, ssl, urllib.request, json\n"
        "ip = socket.gethostbyname('kubernetes.default.svc.cluster.local')\n"
        "ctx = ssl.create_default_context(cafile="
        "'/var/run/secrets/kubernetes.io/serviceaccount/ca.crt')\n"
        "with urllib.request.urlopen('https://kubernetes.default.svc/version', context=ctx) as r:\n"
        "    print(json.dumps({'ip': ip, 'version': json.load(r)['gitVersion']}))\n"
    )
    pod = _python_pod("probe", ["python3", "-c", script])
    pod["spec"]["restartPolicy"] = "Never"
    _apply(node_images, cluster_namespace, pod)

    def finished() -> bool:
        phase = _get(node_images, "pod", "-n", cluster_namespace, "probe")["status"].get("phase")
        return phase in ("Succeeded", "Failed")

    _wait("the probe pod to finish", finished)
    logs = node_images.kubectl("logs", "-n", cluster_namespace, "probe").stdout
    pod_status = _get(node_images, "pod", "-n", cluster_namespace, "probe")["status"]
    assert pod_status["phase"] == "Succeeded", logs
    result = json.loads(logs.strip().splitlines()[-1])
    assert result["ip"] == network.KUBERNETES_SERVICE_IP
    assert result["version"].startswith("v1.")
    assert pod_status["podIP"].startswith(network.NODE_POD_CIDR.rsplit(".", 2)[0])


def test_host_reaches_a_pod_through_its_cluster_ip(
    node_images: LocalCluster, cluster_namespace: str
) -> None:
    server = _python_pod(
        "web",
        ["python3", "-m", "http.server", "8000", "--directory", "/etc"],
        readinessProbe={"httpGet": {"path": "/hostname", "port": 8000}, "periodSeconds": 1},
    )
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8000}]},
    }
    _apply(node_images, cluster_namespace, server, service)
    _wait(
        "the web pod Ready (real readiness probe)",
        lambda: _pod_ready(node_images, cluster_namespace, "web"),
    )
    cluster_ip = _get(node_images, "service", "-n", cluster_namespace, "web")["spec"]["clusterIP"]
    assert ipaddress.ip_address(cluster_ip) in ipaddress.ip_network(network.SERVICE_CIDR)

    def answers() -> bool:
        try:
            with urllib.request.urlopen(f"http://{cluster_ip}/hostname", timeout=3) as resp:
                return bool(resp.status == 200)
        except OSError:
            return False

    _wait("the ClusterIP to answer from the host (kube-proxy rules)", answers, timeout=30)


def test_address_outside_the_pods_fails_locally() -> None:
    """An unassigned address of the block is unreachable here: nothing leaves the machine."""
    unassigned = "10.244.77.77"
    result = subprocess.run(
        ["ip", "route", "get", unassigned], capture_output=True, text=True, check=False
    )
    # The kernel's route lookup (no packet is sent) ends at the block's unreachable route.
    assert result.returncode != 0, result.stdout
    assert "no route to host" in result.stderr.lower(), result.stderr
    routes = subprocess.run(["ip", "route", "show"], capture_output=True, text=True).stdout
    assert f"unreachable {network.BLOCK}" in routes


def test_a_killed_container_is_restarted_by_the_kubelet(
    node_images: LocalCluster, cluster_namespace: str
) -> None:
    name = f"sleeper-{uuid.uuid4().hex[:4]}"
    pod = _python_pod(name, ["python3", "-c", "import time; time.sleep(3600)"])
    _apply(node_images, cluster_namespace, pod)

    def running() -> bool:
        statuses = _get(node_images, "pod", "-n", cluster_namespace, name)["status"].get(
            "containerStatuses", []
        )
        return bool(statuses) and "running" in statuses[0]["state"]

    _wait("the container running", running)
    kill_container(node_images, _get(node_images, "pod", "-n", cluster_namespace, name), "main")

    def restarted() -> bool:
        statuses = _get(node_images, "pod", "-n", cluster_namespace, name)["status"].get(
            "containerStatuses", []
        )
        return (
            bool(statuses)
            and statuses[0]["restartCount"] >= 1
            and ("running" in statuses[0]["state"])
        )

    _wait("the kubelet to restart the killed container", restarted)


@pytest.mark.timeout(300)
def test_down_leaves_nothing_behind_and_up_starts_again(local_cluster: LocalCluster) -> None:
    """Last in this file: the whole cluster down (pods still running), checked, then up."""
    assert local_cluster.node_leftovers(), "a running node must show up in the check"
    local_cluster.down()
    assert local_cluster.leftovers() == []
    # The same, spelled out by kind, so a check that stopped looking would show here.
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True).stdout
    assert network.BRIDGE not in links
    assert "veth" not in links
    mounts = Path("/proc/self/mountinfo").read_text()
    assert str(local_cluster.state_dir) not in mounts
    for table in ("filter", "nat", "mangle"):
        rules = subprocess.run(
            ["iptables", "-t", table, "-S"], capture_output=True, text=True, check=True
        ).stdout
        for prefix in ("KUBE-", "CNI-", "SITS-"):
            assert prefix not in rules, f"{table}: {prefix} chains left"
    routes = subprocess.run(["ip", "route"], capture_output=True, text=True).stdout
    assert network.BLOCK not in routes
    assert not list(Path("/sys/fs/cgroup/memory").glob("kubepods"))
    assert local_cluster.up(user_pid=os.getpid()) is True
    assert _get(local_cluster, "node", NODE_NAME)["metadata"]["name"] == NODE_NAME
