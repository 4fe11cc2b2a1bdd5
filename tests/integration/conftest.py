"""Fixtures for tests against the real local kube-apiserver: the SITS CRDs, and a namespace.

``local_cluster`` (the session fixture of ``sits_localcluster.pytest_plugin``) starts the
control plane; these fixtures only install what SITS needs on top of it.

The operator runs under the chart's RBAC in one of its two modes, chosen per session by
``SITS_TEST_RBAC`` (sits_operator_testing.rbac): ``cluster`` (default) binds the chart's
ClusterRole; ``namespaced`` renders its namespaced install (operator.watchNamespaces):
each test's namespace gets the chart's Role, and the module's operator is restarted to
serve exactly that namespace (``--namespace``), as the chart's Deployment would.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sits_localcluster.helm import (
    apply_chart_parts,
    apply_objects,
    service_account_kubeconfig,
    service_account_of,
)
from sits_localcluster.helm import render_chart as render
from sits_localcluster.prometheus import LocalPrometheus
from sits_localcluster.pytest_plugin import FIXTURE as CLUSTER_FIXTURE
from sits_localcluster.synthetic import SyntheticServer
from sits_operator_testing.process import OperatorProcess
from sits_operator_testing.rbac import HOME_NAMESPACE, namespaced, rbac_mode

REPO = Path(__file__).resolve().parents[2]
CRDS_DIR = REPO / "crds"
SITS_RESOURCES = ("sitsdeployments.sits.dev", "sitspolicies.sits.dev")
CHART = REPO / "charts" / "sits-operator"
OPERATOR_NAMESPACE = "sits-system"
RELEASE = "sits-operator"  # the release name the README installs


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects by the marks set here
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `cluster` every test of a module in which any test needs the local cluster.

    By module, so that `-m cluster` and `-m "not cluster"` can run as two sessions side by
    side, each module's fixtures set up in one of them only (most cluster tests wait on the
    apiserver, Prometheus and analysis periods; the rest use host vLLM servers)."""
    lane = {
        item.path
        for item in items
        if CLUSTER_FIXTURE in getattr(item, "fixturenames", ())
        or item.get_closest_marker("cluster") is not None
    }
    for item in items:
        if item.path in lane:
            item.add_marker(pytest.mark.cluster)


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
def namespace(
    local_cluster: Any, crds_installed: tuple[str, ...], request: pytest.FixtureRequest
) -> Iterator[str]:
    """A fresh namespace (with its default ServiceAccount), deleted afterwards without waiting.

    Under the namespaced RBAC (SITS_TEST_RBAC=namespaced) it gets the chart's Role, and
    the test's module operator (fixture `operator`), if any, serves it alone from now on."""
    kubectl = local_cluster.kubectl
    name = f"sits-test-{uuid.uuid4().hex[:8]}"
    kubectl("create", "namespace", name)

    def has_default_sa() -> bool:
        result = kubectl("get", "serviceaccount", "default", "-n", name, check=False)
        return bool(result.returncode == 0)

    _poll(f"ServiceAccount default in {name}", has_default_sa, timeout=60)
    if namespaced():
        operator = None
        if "operator" in request.fixturenames:
            operator = request.getfixturevalue("operator")
        serve_namespaces(
            local_cluster, operator if isinstance(operator, OperatorProcess) else None, name
        )
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


def watching(*namespaces: str) -> tuple[str, ...]:
    """helm arguments of the chart's namespaced install serving `namespaces`."""
    return ("--set-json", f"operator.watchNamespaces={json.dumps(list(namespaces))}")


def operator_subject(account: str = RELEASE) -> str:
    return f"system:serviceaccount:{OPERATOR_NAMESPACE}:{account}"


def allowed(cluster: Any, subject: str, verb: str, resource: str, *where: str) -> bool:
    """`kubectl auth can-i` for `subject` (impersonated by the admin); `where`: `-n NS`
    or `--all-namespaces`, nothing for a cluster-scoped resource."""
    result = cluster.kubectl(
        "auth", "can-i", verb, resource, *where, f"--as={subject}", check=False
    )
    return bool(result.stdout.strip() == "yes")


def wait_allowed(cluster: Any, subject: str, namespaces: tuple[str, ...]) -> None:
    """Until the API server's authorizer honours a just-applied Role in each namespace
    (its RBAC cache may lag the apply by a moment: a watch started before it would 403)."""
    for ns in namespaces:

        def ready(ns: str = ns) -> bool:
            return allowed(cluster, subject, "watch", "sitsdeployments.sits.dev", "-n", ns)

        _poll(f"the chart's Role in {ns} for {subject}", ready, timeout=30)


def grant_namespaces(cluster: Any, *namespaces: str) -> list[dict[str, Any]]:
    """The chart's namespaced install in existing `namespaces`: its Role and RoleBinding
    in each (rendered by `helm template` with operator.watchNamespaces), applied; returns
    them once the authorizer honours them."""
    docs = render_chart("--show-only", "templates/rbac-namespaced.yaml", *watching(*namespaces))
    assert {(d["kind"], d["metadata"]["namespace"]) for d in docs} == {
        (kind, ns) for kind in ("Role", "RoleBinding") for ns in namespaces
    }
    apply_objects(cluster, docs, field_manager="sits-tests")
    wait_allowed(cluster, operator_subject(), namespaces)
    return docs


def serve_namespaces(cluster: Any, operator: OperatorProcess | None, *namespaces: str) -> None:
    """Let the test's operator act in `namespaces`: under the ClusterRole nothing to do
    (it serves every namespace); under the namespaced RBAC the chart's Role in each, and
    the operator restarted to serve exactly these (`--namespace`, as the chart passes)."""
    if not namespaced():
        return
    grant_namespaces(cluster, *namespaces)
    if operator is not None:
        operator.watch(*namespaces)


@pytest.fixture(scope="session")
def operator_kubeconfig(local_cluster: Any, crds_installed: tuple[str, ...]) -> Path:
    """A kubeconfig that authenticates as the chart's ServiceAccount, bound to the chart's
    RBAC and nothing else: the operator tests run the operator with it, so the whole
    suite checks that the chart's RBAC is enough (and a 403 fails a test).

    The RBAC objects come from `helm template` of the chart, the token from the API
    server's TokenRequest (`kubectl create token`), as a pod's projected token would.
    SITS_TEST_RBAC=namespaced: the namespaced install's RBAC (the ClusterRole reads
    SitsPolicies only; Roles in the home namespace here, in each test's by `namespace`),
    applied over the same ClusterRole, so what a cluster-wide session left is replaced."""
    values: tuple[str, ...] = ()
    templates: tuple[str, ...] = ("serviceaccount.yaml", "rbac.yaml")
    expected = {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    if namespaced():
        local_cluster.kubectl("create", "namespace", HOME_NAMESPACE, check=False)
        values = watching(HOME_NAMESPACE)
        templates += ("rbac-namespaced.yaml",)
        expected |= {"Role", "RoleBinding"}
    rbac = apply_chart_parts(
        local_cluster,
        CHART,
        RELEASE,
        OPERATOR_NAMESPACE,
        templates,
        field_manager="sits-tests",
        values=values,
    )
    assert {d["kind"] for d in rbac} == expected, f"the chart's RBAC in {rbac_mode()} mode"
    account = service_account_of(rbac)
    if namespaced():
        subject = operator_subject(account)
        wait_allowed(local_cluster, subject, (HOME_NAMESPACE,))
        # Nothing cluster-wide but reading SitsPolicies (no binding left by another mode).
        assert allowed(local_cluster, subject, "list", "sitspolicies.sits.dev")
        for verb, resource in (("list", "deployments.apps"), ("watch", "sitsdeployments.sits.dev")):
            assert not allowed(local_cluster, subject, verb, resource, "--all-namespaces")
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
