"""The local control plane: real processes, real scheduler, kwok-faked GPU nodes; no mocks.

These tests pin down what the operator's own integration tests rely on: loopback-only
listeners, RBAC that actually denies, MIG extended resources that the scheduler honours,
and controller-manager loops (deployments, garbage collection) that actually run.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from sits_localcluster import network, nodenet, procs
from sits_localcluster.cluster import LocalCluster
from sits_localcluster.nodes import GPU_NODES, nodes_by_name
from sits_localcluster.pki import (
    ADMIN_GROUP,
    ensure_pki,
    issue_cert,
    make_ca,
    render_kubeconfig,
)

# ----- helpers ---------------------------------------------------------------------------


def _wait(what: str, check: Callable[[], bool], timeout: float = 45.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.3)


def _get(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    out = cluster.kubectl("get", *args, "-o", "json").stdout
    value: dict[str, Any] = json.loads(out)
    return value


def _pod_manifest(name: str, namespace: str, resources: dict[str, str]) -> str:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "registry.invalid/none:0",
                    "resources": {"limits": resources},
                }
            ]
        },
    }
    return json.dumps(pod)


def _condition(obj: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for cond in obj.get("status", {}).get("conditions", []):
        if cond.get("type") == kind:
            return dict(cond)
    return None


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:6]}"


# ----- unit: PKI and kubeconfig (no cluster) ---------------------------------------------


def test_admin_cert_is_signed_by_ca_and_in_system_masters() -> None:
    ca = make_ca()
    key, cert = issue_cert(ca, "someone", organizations=(ADMIN_GROUP,), client=True)
    cert.verify_directly_issued_by(ca[1])
    orgs = [a.value for a in cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)]
    assert orgs == [ADMIN_GROUP]
    assert isinstance(key, ec.EllipticCurvePrivateKey)


def test_pki_is_generated_once_with_loopback_serving_sans(tmp_path: Path) -> None:
    paths = ensure_pki(tmp_path / "pki")
    first = paths.ca_cert.read_bytes()
    serving = x509.load_pem_x509_certificate(paths.serving_cert.read_bytes())
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    assert "127.0.0.1" in [str(ip) for ip in sans.get_values_for_type(x509.IPAddress)]
    assert oct(paths.ca_key.stat().st_mode & 0o777) == "0o600"
    ensure_pki(tmp_path / "pki")
    assert paths.ca_cert.read_bytes() == first, "a second call must keep the existing CA"


def test_kubeconfig_renders_embedded_credentials() -> None:
    text = render_kubeconfig("https://127.0.0.1:16443", b"CA", b"CERT", b"KEY")
    config = yaml.safe_load(text)
    assert config["current-context"] == "sits"
    assert config["clusters"][0]["cluster"]["server"] == "https://127.0.0.1:16443"
    assert config["clusters"][0]["cluster"]["certificate-authority-data"] == "Q0E="
    assert config["users"][0]["user"]["client-key-data"] == "S0VZ"


# ----- integration: the running cluster --------------------------------------------------


@pytest.mark.cluster
def test_readyz_ok(local_cluster: LocalCluster) -> None:
    assert local_cluster.readyz() == (True, "ok")
    assert local_cluster.kubectl("get", "--raw", "/readyz").stdout.strip() == "ok"


#: The only listeners beyond loopback, and why: the apiserver on every address (pods reach
#: it through the `kubernetes` Service at the node IP; an iptables guard admits its port from
#: loopback and the node's bridge only) and the kubelet's API on the node IP (the apiserver
#: calls it for logs and exec). The node IP is the bridge's own address in the local block.
ALLOWED_BEYOND_LOOPBACK = {
    "kube-apiserver": {"0.0.0.0", "::"},
    "kubelet": {network.NODE_IP},
}


@pytest.mark.cluster
def test_every_component_listens_on_loopback_or_where_allowed(
    local_cluster: LocalCluster,
) -> None:
    for status in local_cluster.status():
        assert status.alive, status
        assert status.pid is not None, status
        sockets = procs.listening_sockets(status.pid)
        assert sockets, f"{status.name} listens on nothing?"
        allowed = ALLOWED_BEYOND_LOOPBACK.get(status.name, set())
        exposed = [
            (a, p)
            for a, p in sockets
            if not (a.startswith("127.") or a == "::1") and a not in allowed
        ]
        assert not exposed, f"{status.name} listens beyond loopback: {exposed}"
    apiserver = next(s for s in local_cluster.status() if s.name == "kube-apiserver")
    assert apiserver.pid is not None
    listening = procs.listening_sockets(apiserver.pid)
    assert {
        ("0.0.0.0", local_cluster.ports.apiserver),
        ("::", local_cluster.ports.apiserver),
    } & set(listening), listening


@pytest.mark.cluster
def test_apiserver_port_is_guarded_to_loopback_and_the_node_bridge(
    local_cluster: LocalCluster,
) -> None:
    """The guard chain (IPv4 and IPv6): loopback and the bridge return, the rest is dropped."""
    for binary in ("iptables", "ip6tables"):
        rules = subprocess.run(
            [binary, "-S", nodenet.GUARD_CHAIN], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        assert rules[1:] == [
            f"-A {nodenet.GUARD_CHAIN} -i lo -j RETURN",
            f"-A {nodenet.GUARD_CHAIN} -i {network.BRIDGE} -j RETURN",
            f"-A {nodenet.GUARD_CHAIN} -j DROP",
        ], binary
        port = str(local_cluster.ports.apiserver)
        jump = [binary, "-C", "INPUT", "-p", "tcp", "--dport", port, "-j", nodenet.GUARD_CHAIN]
        assert subprocess.run(jump, check=False).returncode == 0, binary


@pytest.mark.cluster
def test_rbac_denies_an_unprivileged_user(local_cluster: LocalCluster) -> None:
    admin = local_cluster.kubectl("auth", "can-i", "create", "pods", check=False)
    assert admin.stdout.strip() == "yes"
    can_i = local_cluster.kubectl("auth", "can-i", "list", "pods", "--as=nobody", check=False)
    assert (can_i.returncode, can_i.stdout.strip()) == (1, "no")
    denied = local_cluster.kubectl("get", "pods", "--as=nobody", check=False)
    assert denied.returncode != 0
    assert "Forbidden" in denied.stderr
    assert "nobody" in denied.stderr


@pytest.mark.cluster
def test_fake_gpu_nodes_are_ready_with_mig_allocatable(local_cluster: LocalCluster) -> None:
    nodes = _get(local_cluster, "nodes", "-l", "type=kwok")["items"]
    # Other tests add capacity nodes of their own; the built-in ones must all be there.
    assert {s.name for s in GPU_NODES} <= {n["metadata"]["name"] for n in nodes}
    for node in [n for n in nodes if n["metadata"]["name"] in nodes_by_name()]:
        spec = nodes_by_name()[node["metadata"]["name"]]
        ready = _condition(node, "Ready")
        assert ready is not None, node["metadata"]["name"]
        assert ready["status"] == "True", node["metadata"]["name"]
        for key, value in spec.resources.items():
            assert node["status"]["allocatable"][key] == value, (spec.name, key)
            assert node["status"]["capacity"][key] == value, (spec.name, key)
        assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == spec.product
        assert node["metadata"]["labels"]["nvidia.com/mig.strategy"] == "mixed"
        blocking = [t for t in node["spec"].get("taints", []) if t["effect"] == "NoSchedule"]
        assert not blocking


@pytest.mark.cluster
def test_mig_pod_lands_on_an_a100_and_runs(local_cluster: LocalCluster) -> None:
    name = _unique("mig-2g")
    manifest = _pod_manifest(name, "default", {"nvidia.com/mig-2g.20gb": "1"})
    local_cluster.kubectl("apply", "-f", "-", input=manifest)
    try:
        local_cluster.kubectl(
            "wait", f"pod/{name}", "--for=jsonpath={.status.phase}=Running", "--timeout=60s"
        )
        pod = _get(local_cluster, "pod", name)
        assert pod["spec"]["nodeName"] in ("gpu-a100-0", "gpu-a100-1")
        assert pod["status"].get("podIP"), "kwok should have assigned a pod IP"
        # Nobody holds a kwok pod's address: a connection to it (the operator reading a
        # gateway pod) must fail on this host, not leave by the default route.
        route = subprocess.run(
            ["ip", "route", "get", pod["status"]["podIP"]],
            capture_output=True,
            text=True,
            check=False,
        )
        assert route.returncode != 0 or route.stdout.startswith("unreachable"), route.stdout
    finally:
        local_cluster.kubectl("delete", "pod", name, "--wait=false", check=False)


@pytest.mark.cluster
def test_pod_asking_for_a_missing_mig_profile_stays_pending(
    local_cluster: LocalCluster, cluster_namespace: str
) -> None:
    name = _unique("mig-7g")
    manifest = _pod_manifest(name, cluster_namespace, {"nvidia.com/mig-7g.80gb": "1"})
    local_cluster.kubectl("apply", "-f", "-", input=manifest)

    def unschedulable() -> bool:
        pod = _get(local_cluster, "pod", name, "-n", cluster_namespace)
        cond = _condition(pod, "PodScheduled")
        return cond is not None and (cond["status"], cond.get("reason")) == (
            "False",
            "Unschedulable",
        )

    _wait("PodScheduled=False/Unschedulable", unschedulable)
    pod = _get(local_cluster, "pod", name, "-n", cluster_namespace)
    assert pod["status"]["phase"] == "Pending"
    assert not pod["spec"].get("nodeName")


@pytest.mark.cluster
def test_deployment_runs_and_garbage_collector_removes_dependents(
    local_cluster: LocalCluster, cluster_namespace: str
) -> None:
    ns = ("-n", cluster_namespace)
    local_cluster.kubectl(
        "create", "deployment", "web", "--image=registry.invalid/none:0", "--replicas=2", *ns
    )
    local_cluster.kubectl(
        "wait", "deployment/web", "--for=condition=Available", "--timeout=60s", *ns
    )
    pods = _get(local_cluster, "pods", "-l", "app=web", *ns)["items"]
    assert len(pods) == 2
    assert all(p["status"]["phase"] == "Running" for p in pods)

    local_cluster.kubectl("delete", "deployment", "web", "--cascade=background", *ns)

    def collected() -> bool:
        left = _get(local_cluster, "replicasets,pods", "-l", "app=web", *ns)["items"]
        return not left

    _wait("garbage collection of the ReplicaSet and its pods", collected, timeout=60)


@pytest.mark.cluster
def test_up_twice_reuses_the_same_processes(local_cluster: LocalCluster) -> None:
    before = local_cluster.pids()
    again = LocalCluster(
        local_cluster.state_dir, ports=local_cluster.ports, progress=lambda _line: None
    )
    start = time.monotonic()
    assert again.up() is False, "a healthy cluster must be reused, not restarted"
    assert time.monotonic() - start < 10
    assert again.pids() == before
    assert all(pid is not None for pid in before.values())


@pytest.mark.cluster
def test_release_keeps_the_cluster_while_another_session_uses_it(
    local_cluster: LocalCluster,
) -> None:
    # This pytest process registered itself as a user, so releasing another user must never
    # stop the cluster, whoever started it.
    with subprocess.Popen(["sleep", "60"]) as other:
        try:
            local_cluster.up(user_pid=other.pid)
            assert other.pid in local_cluster.live_users()
            assert local_cluster.release(other.pid) is False
            assert other.pid not in local_cluster.live_users()
            assert os.getpid() in local_cluster.live_users()
            assert local_cluster.is_running()
        finally:
            other.kill()
