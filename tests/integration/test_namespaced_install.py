"""The chart's namespaced install (operator.watchNamespaces) against the real apiserver, in
any session (whatever SITS_TEST_RBAC says): a release of its own, whose ServiceAccount
holds only what `helm template` renders for one watched namespace (a Role there, the
read-only SitsPolicy ClusterRole), and the operator started as the chart's Deployment
starts it (its `--namespace` arguments) with that ServiceAccount's token.

A rollout in the watched namespace reaches its first step (the operator also creates the
builtin gateway's Role there, which RBAC allows only if its own Role holds those
permissions); a SitsDeployment in an unwatched namespace is left alone; an alert naming
the unwatched namespace is not found, without a read there. Any 403 in the operator's
log fails the module (running_operator).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.integration.analysis_env import Watcher
from tests.integration.conftest import (
    CHART,
    OPERATOR_NAMESPACE,
    allowed,
    wait_allowed,
    watching,
)
from tests.integration.test_analysis import capacity  # noqa: F401  (the same room for pods)

from sits_localcluster.helm import (
    apply_chart_parts,
    render_chart,
    service_account_kubeconfig,
    service_account_of,
)
from sits_localcluster.prometheus import LocalPrometheus
from sits_localcluster.synthetic import Profile, SyntheticServer
from sits_operator_testing.manifests import deployment, fast_policy
from sits_operator_testing.process import OperatorProcess, running_operator

pytestmark = [pytest.mark.cluster, pytest.mark.usefixtures("capacity")]
HEALTHY = Profile(rps=40, error_ratio=0.0, latency_ms=60)
# A release of its own: its ServiceAccount has none of the session's ClusterRole.
RELEASE = "sits-operator-namespaced"
TEMPLATES = ("serviceaccount.yaml", "rbac.yaml", "rbac-namespaced.yaml")


@dataclass
class NamespacedInstall:
    cluster: Any
    watched: str
    unwatched: str
    account: str
    kubeconfig: Path
    args: list[str]  # the operator's `--namespace` arguments, as the chart renders them

    @property
    def subject(self) -> str:
        return f"system:serviceaccount:{OPERATOR_NAMESPACE}:{self.account}"

    def namespaces(self) -> tuple[str, ...]:
        return tuple(a.removeprefix("--namespace=") for a in self.args)


@pytest.fixture(scope="module")
def install(
    local_cluster: Any, crds_installed: tuple[str, ...], tmp_path_factory: Any
) -> Iterator[NamespacedInstall]:
    suffix = uuid.uuid4().hex[:6]
    watched, unwatched = f"sits-watched-{suffix}", f"sits-unwatched-{suffix}"
    for ns in (watched, unwatched):
        local_cluster.kubectl("create", "namespace", ns)
    values = watching(watched)
    docs = apply_chart_parts(
        local_cluster,
        CHART,
        RELEASE,
        OPERATOR_NAMESPACE,
        TEMPLATES,
        field_manager="sits-tests",
        values=values,
    )
    account = service_account_of(docs)
    shown = ("--show-only", "templates/deployment.yaml")
    (operator_deployment,) = render_chart(CHART, RELEASE, OPERATOR_NAMESPACE, *values, *shown)
    args = operator_deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    kubeconfig = service_account_kubeconfig(
        local_cluster,
        OPERATOR_NAMESPACE,
        account,
        tmp_path_factory.mktemp("namespaced") / "kubeconfig",
    )
    found = NamespacedInstall(
        local_cluster,
        watched,
        unwatched,
        account,
        kubeconfig,
        [a for a in args if a.startswith("--namespace")],
    )
    wait_allowed(local_cluster, found.subject, (watched,))
    yield found
    kubectl = local_cluster.kubectl
    for ns in (watched, unwatched):  # the Roles go with them
        kubectl("delete", "namespace", ns, "--wait=false", check=False)
    kubectl("delete", "clusterrole,clusterrolebinding", RELEASE, "--ignore-not-found", check=False)
    kubectl("delete", "serviceaccount", account, "-n", OPERATOR_NAMESPACE, check=False)


@pytest.fixture(scope="module")
def operator(install: NamespacedInstall, tmp_path_factory: Any) -> Iterator[OperatorProcess]:
    """The operator with the namespaced release's token and the chart's `--namespace`s;
    afterwards no 403 in its log."""
    log_dir = tmp_path_factory.mktemp("operator-namespaced")
    with running_operator(install.kubeconfig, log_dir, namespaces=install.namespaces()) as proc:
        yield proc


@pytest.fixture
def policy(local_cluster: Any, prometheus: LocalPrometheus) -> Iterator[str]:
    name = f"fast-{uuid.uuid4().hex[:6]}"
    body = fast_policy(name, prometheus.url)
    local_cluster.kubectl("apply", "-f", "-", input=json.dumps(body))
    yield name
    local_cluster.kubectl("delete", "sitspolicy", name, "--wait=false", check=False)


@pytest.fixture
def cleanup(install: NamespacedInstall, operator: OperatorProcess) -> Iterator[None]:
    """Delete the SitsDeployments while the operator still runs (their finalizer)."""
    yield
    for ns in (install.watched, install.unwatched):
        install.cluster.kubectl(
            "delete",
            "sitsdeployments",
            "--all",
            "-n",
            ns,
            "--wait=true",
            "--timeout=30s",
            check=False,
        )


def test_the_chart_passes_the_watched_namespaces_and_grants_nothing_else(
    install: NamespacedInstall,
) -> None:
    """What the namespaced release's ServiceAccount may do, asked of the real authorizer:
    everything in the watched namespace, nothing in another, nothing cluster-wide but
    reading SitsPolicies."""
    assert install.args == [f"--namespace={install.watched}"]
    who, watched, unwatched = install.subject, install.watched, install.unwatched
    cluster = install.cluster
    may = [
        ("watch", "sitsdeployments.sits.dev", "-n", watched),
        ("patch", "sitsdeployments.sits.dev", "--subresource=status", "-n", watched),
        ("create", "roles.rbac.authorization.k8s.io", "-n", watched),
        ("create", "events", "-n", watched),
        ("list", "sitspolicies.sits.dev"),
        ("watch", "sitspolicies.sits.dev"),
    ]
    may_not = [
        ("watch", "sitsdeployments.sits.dev", "-n", unwatched),
        ("create", "events", "-n", unwatched),
        ("list", "pods", "-n", unwatched),
        ("list", "deployments.apps", "--all-namespaces"),
        ("watch", "sitsdeployments.sits.dev", "--all-namespaces"),
        ("list", "customresourcedefinitions.apiextensions.k8s.io"),
        ("list", "namespaces"),
        ("create", "sitspolicies.sits.dev"),
        ("get", "secrets", "-n", watched),
    ]
    assert [q for q in may if not allowed(cluster, who, *q)] == []
    assert [q for q in may_not if allowed(cluster, who, *q)] == []


def test_a_rollout_in_the_watched_namespace_reaches_its_first_step(
    install: NamespacedInstall,
    operator: OperatorProcess,
    traffic: SyntheticServer,
    prometheus: LocalPrometheus,
    policy: str,
    cleanup: None,
) -> None:
    ns = install.watched
    traffic.traffic.set(ns, "chat", "v1", HEALTHY)
    traffic.traffic.set(ns, "chat", "v2", HEALTHY)
    manifest = deployment("chat", policy, stepWeight=10, maxWeight=40)
    install.cluster.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(manifest))
    watch = Watcher(install.cluster, ns, "chat")
    status = watch.until("first step", lambda s: s.get("candidateWeight") == 20, timeout=120)
    assert status["phase"] == "Progressing", watch.timeline
    # The builtin gateway's Role: created only because the operator's Role holds its rules.
    role = install.cluster.kubectl("get", "role", "chat-gateway", "-n", ns, "-o", "json")
    assert json.loads(role.stdout)["metadata"]["labels"]["sits.dev/deployment"] == "chat"
    assert operator.forbidden() == []


def test_a_sits_deployment_in_an_unwatched_namespace_is_left_alone(
    install: NamespacedInstall, operator: OperatorProcess, cleanup: None
) -> None:
    """The same manifest in both namespaces: the watched one gets a status; by then, and
    a resync period later, the other has none, nor a finalizer or children. (Its policy
    does not exist: no analysis, only reconciling.)"""
    manifest = deployment("idle", "no-such-policy-for-namespaced-tests")
    manifest["spec"]["traffic"]["router"] = "none"
    for ns in (install.unwatched, install.watched):
        install.cluster.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(manifest))
    Watcher(install.cluster, install.watched, "idle").until(
        "a status in the watched namespace", lambda s: bool(s.get("phase")), timeout=60
    )
    ignored = Watcher(install.cluster, install.unwatched, "idle")
    deadline = time.monotonic() + 25  # past the operator's 20 s resync
    while time.monotonic() < deadline:
        assert ignored.status() == {}, "the operator acted in a namespace it does not watch"
        time.sleep(1)
    out = install.cluster.kubectl("get", "sitsd", "idle", "-n", install.unwatched, "-o", "json")
    metadata = json.loads(out.stdout)["metadata"]
    assert not metadata.get("finalizers"), metadata
    assert not any(k.startswith("sits.dev/") for k in metadata.get("annotations") or {})
    children = install.cluster.kubectl(
        "get",
        "deployments,services",
        "-n",
        install.unwatched,
        "-o",
        "name",
        "-l",
        "sits.dev/deployment=idle",
    )
    assert children.stdout.strip() == ""
    assert operator.forbidden() == []


def test_an_alert_about_an_unwatched_namespace_is_not_found_without_reading_there(
    install: NamespacedInstall, operator: OperatorProcess
) -> None:
    labels = {"alertname": "Burn", "namespace": install.unwatched, "sits_deployment": "idle"}
    body = json.dumps({"alerts": [{"status": "firing", "labels": labels}]}).encode()
    request = urllib.request.Request(operator.alert_webhook_url, data=body, method="POST")
    with pytest.raises(urllib.error.HTTPError) as error:
        urllib.request.urlopen(request, timeout=5)
    answer = json.loads(error.value.read())
    error.value.close()
    assert error.value.code == 404
    assert answer["notFound"] == [
        f"{install.unwatched}/idle: namespace {install.unwatched} is not watched by this operator"
    ]
    assert operator.forbidden() == []
