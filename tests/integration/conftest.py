"""Fixtures for tests against the real local kube-apiserver: the SITS CRDs, and a namespace.

``local_cluster`` (the session fixture of ``sits_localcluster.pytest_plugin``) starts the
control plane; these fixtures only install what SITS needs on top of it.
"""

from __future__ import annotations

import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sits_localcluster.helm import (
    apply_chart_parts,
    service_account_kubeconfig,
    service_account_of,
)
from sits_localcluster.helm import render_chart as render
from sits_localcluster.prometheus import LocalPrometheus
from sits_localcluster.synthetic import SyntheticServer

REPO = Path(__file__).resolve().parents[2]
CRDS_DIR = REPO / "crds"
SITS_RESOURCES = ("sitsdeployments.sits.dev", "sitspolicies.sits.dev")
CHART = REPO / "charts" / "sits-operator"
OPERATOR_NAMESPACE = "sits-system"
RELEASE = "sits-operator"  # the release name the README installs


def _poll(what: str, attempt: Callable[[], bool], *, timeout: float, step: float = 0.5) -> None:
    """Call ``attempt`` until it returns True; fail the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not attempt():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(step)


@pytest.fixture(scope="session")
def crds_installed(local_cluster: Any, no_other_operator: None) -> tuple[str, ...]:
    """Apply crds/ (server-side, as GitOps tools do) and wait until the API serves them."""
    kubectl = local_cluster.kubectl
    # --force-conflicts: a chart installed by an earlier test (helm applies its crds/ too)
    # must not stop the tests from putting this checkout's CRDs in place.
    kubectl(
        "apply",
        "--server-side",
        "--force-conflicts",
        "--field-manager=sits-tests",
        "-f",
        str(CRDS_DIR),
    )
    kubectl(
        "wait",
        "--for=condition=Established",
        "--timeout=60s",
        *(f"crd/{name}" for name in SITS_RESOURCES),
    )
    # Established means the apiserver serves the resource; kubectl's discovery cache may
    # still lag behind it for a moment, and then the first `kubectl apply` of a CR fails.
    for name in SITS_RESOURCES:

        def listable(name: str = name) -> bool:
            return bool(kubectl("get", name, "-A", "-o", "name", check=False).returncode == 0)

        _poll(f"{name} in discovery", listable, timeout=30)
    return SITS_RESOURCES


@pytest.fixture
def namespace(local_cluster: Any, crds_installed: tuple[str, ...]) -> Iterator[str]:
    """A fresh namespace (with its default ServiceAccount), deleted afterwards without waiting."""
    kubectl = local_cluster.kubectl
    name = f"sits-test-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)

    def has_default_sa() -> bool:
        result = kubectl("get", "serviceaccount", "default", "-n", name, check=False)
        return bool(result.returncode == 0)

    _poll(f"ServiceAccount default in {name}", has_default_sa, timeout=60)
    yield name
    # SitsDeployments carry the operator's finalizer: delete them while the test's operator
    # still runs (function fixtures end before module ones), or the namespace would hang.
    kubectl(
        "delete",
        "sitsdeployments",
        "--all",
        "-n",
        name,
        "--wait=true",
        "--timeout=20s",
        check=False,
    )
    kubectl("delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False)


def operator_kubeconfig_path(cluster: Any) -> Path:
    """Where the operator's own credentials (its ServiceAccount's token) are written."""
    return Path(cluster.state_dir) / "kubeconfig-sits-operator"


def render_chart(*args: str) -> list[dict[str, Any]]:
    """`helm template sits-operator charts/sits-operator -n sits-system ARGS`, parsed."""
    return render(CHART, RELEASE, OPERATOR_NAMESPACE, *args)


@pytest.fixture(scope="session")
def operator_kubeconfig(local_cluster: Any, crds_installed: tuple[str, ...]) -> Path:
    """A kubeconfig that authenticates as the chart's ServiceAccount, bound to the chart's
    ClusterRole and nothing else: the operator tests run the operator with it, so the
    whole suite checks that the chart's RBAC is enough (and a 403 fails a test).

    The RBAC objects come from `helm template` of the chart, the token from the API
    server's TokenRequest (`kubectl create token`), as a pod's projected token would."""
    rbac = apply_chart_parts(
        local_cluster,
        CHART,
        RELEASE,
        OPERATOR_NAMESPACE,
        ("serviceaccount.yaml", "rbac.yaml"),
        field_manager="sits-tests",
    )
    assert {d["kind"] for d in rbac} == {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    account = service_account_of(rbac)
    path = service_account_kubeconfig(
        local_cluster, OPERATOR_NAMESPACE, account, operator_kubeconfig_path(local_cluster)
    )
    who = subprocess.run(
        [
            "kubectl",
            f"--kubeconfig={path}",
            "auth",
            "whoami",
            "-o",
            "jsonpath={.status.userInfo.username}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert who.stdout == f"system:serviceaccount:{OPERATOR_NAMESPACE}:{account}"
    return path


def _other_operators(*kubeconfigs: Path) -> list[int]:
    """PIDs of sits-operator processes working on this cluster that this session did not
    start (another test session's); the demo's operator works on another cluster."""
    pids = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"sits_operator" not in argv or b"-m" not in argv:
            continue
        try:
            environ = (proc / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(f"KUBECONFIG={config}".encode() in environ for config in kubeconfigs):
            pids.append(int(proc.name))
    return pids


@pytest.fixture(scope="session")
def no_other_operator(local_cluster: Any) -> None:
    """Two operators on one cluster would both act on every test's objects."""
    others = _other_operators(
        Path(local_cluster.kubeconfig), operator_kubeconfig_path(local_cluster)
    )
    if others:
        pytest.fail(
            f"another sits-operator works on the test cluster (pids {others}): "
            "another test session is using the test cluster; let it finish",
            pytrace=False,
        )


# The analysis scenarios' SLIs (test_analysis.py, test_kubectl_sits.py): synthetic series
# through a real Prometheus.
@pytest.fixture(scope="module")
def traffic() -> Iterator[SyntheticServer]:
    """The synthetic SLI exporter a module's scenarios set profiles on."""
    server = SyntheticServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def prometheus(traffic: SyntheticServer, tmp_path_factory: Any) -> Iterator[LocalPrometheus]:
    """Real Prometheus scraping the synthetic exporter."""
    prom = LocalPrometheus(tmp_path_factory.mktemp("prometheus"), [traffic.address]).start()
    yield prom
    prom.stop()
