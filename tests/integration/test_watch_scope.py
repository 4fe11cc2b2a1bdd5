"""Watches scoped on the server (issue 15 item 5): objects that are not the operator's never
reach it, while its own children do.

Unrelated pods (SITS_UNRELATED_PODS, default 300; kwok runs them on a node of their own)
and one unrelated object of every other child kind are created in the test's namespace,
so the namespaced install (SITS_TEST_RBAC=namespaced: one watch per namespace) is checked
as well as the cluster-wide one. The operator's counter of what its watches delivered
(`sits_operator_watch_events_total{resource, selected}`) must show the chat example's
pods and children and not one unrelated object, both while it watches and after a restart
(the initial list); with the selectors switched off the same counter sees the unrelated
pods (so it would catch a regression). Memory and traffic with 5,000 unrelated pods:
`python -m benchmarks.watch_scope` (docs/benchmarks.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sits_localcluster.health import wait_until
from sits_localcluster.prometheus import free_port
from sits_operator.handlers.watching import ENV_SWITCH
from sits_operator_testing.manifests import EXAMPLE
from sits_operator_testing.process import OperatorProcess
from sits_operator_testing.watch_scope import (
    NODE,
    Received,
    create_pods,
    scrape,
    unrelated_node,
    unrelated_others,
    unrelated_pod,
)

pytestmark = pytest.mark.cluster
UNRELATED = int(os.environ.get("SITS_UNRELATED_PODS", "300"))
CHAT = json.loads(json.dumps(EXAMPLE))
CHAT["spec"]["analysis"]["policyRef"]["name"] = "no-such-policy-for-watch-scope-tests"
CHAT["spec"]["traffic"]["router"] = "none"  # no gateway: the variants' objects only


def metrics_args(port: int) -> tuple[str, ...]:
    return ("--metrics-address", f"127.0.0.1:{port}")


@pytest.fixture(scope="module")
def metrics_port() -> int:
    return free_port()


@pytest.fixture(scope="module")
def operator(
    operator_kubeconfig: Path, tmp_path_factory: Any, metrics_port: int
) -> Iterator[OperatorProcess]:
    """The module's operator, with its /metrics on (the counter is read there)."""
    proc = OperatorProcess(
        operator_kubeconfig,
        tmp_path_factory.mktemp("operator"),
        extra_args=metrics_args(metrics_port),
    )
    proc.start()
    try:
        yield proc
    finally:
        proc.stop()
    assert proc.forbidden() == [], "the chart's RBAC lacks a verb the operator used"


@pytest.fixture(scope="module")
def kwok_node(local_cluster: Any) -> Iterator[str]:
    local_cluster.kubectl("apply", "-f", "-", input=json.dumps(unrelated_node()))
    yield NODE
    local_cluster.kubectl("delete", "node", NODE, "--wait=false", check=False)


def add_unrelated(cluster: Any, namespace: str, count: int) -> None:
    """`count` unrelated pods, Running on the kwok node, and one object of each other kind."""
    create_pods(cluster.kubeconfig, (unrelated_pod(i, namespace) for i in range(count)))
    for manifest in unrelated_others(namespace):
        cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(manifest))
    cluster.kubectl(
        "wait",
        "--for=jsonpath={.status.phase}=Running",
        "pods",
        "-l",
        "app.kubernetes.io/name=unrelated",
        "-n",
        namespace,
        "--timeout=180s",
        timeout=200,
    )


def wait(what: str, check: Callable[[], bool], operator: OperatorProcess, timeout: float) -> None:
    ok, _ = wait_until(lambda: (check(), ""), timeout, interval=0.5)
    if not ok:
        pytest.fail(f"timed out waiting for {what}\n--- operator log ---\n{operator.tail()}")


def phase(cluster: Any, namespace: str) -> str:
    result = cluster.kubectl(
        "get", "sitsd", "chat", "-n", namespace, "-o", "jsonpath={.status.phase}", check=False
    )
    return str(result.stdout)


def received(port: int) -> Received:
    return scrape(f"http://127.0.0.1:{port}/metrics")


def chat_children_counted(port: int) -> bool:
    """The chat example's two pods, two Deployments and three Services have arrived (Kopf
    runs event handlers once every index is filled: the counter may trail the indexes)."""
    seen = received(port).selected
    return seen["pods"] >= 2 and seen["deployments"] >= 2 and seen["services"] >= 3


def assert_no_unrelated(port: int) -> None:
    seen = received(port)
    assert seen.unrelated == dict.fromkeys(seen.unrelated, 0.0), (
        "the apiserver sent the operator objects without its labels"
    )


def test_unrelated_objects_never_reach_the_operator(
    local_cluster: Any, namespace: str, operator: OperatorProcess, kwok_node: str, metrics_port: int
) -> None:
    # Unrelated first, then the operator's own: its pods come later in the same watch
    # streams, so once it has seen them it has been offered everything before them.
    add_unrelated(local_cluster, namespace, UNRELATED)
    local_cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(CHAT))
    wait("phase Ready", lambda: phase(local_cluster, namespace) == "Ready", operator, 120)
    wait("the chat children counted", lambda: chat_children_counted(metrics_port), operator, 30)
    assert_no_unrelated(metrics_port)

    # A restart lists every kind again (Kopf fills the indexes before the loop starts).
    operator.restart()
    operator.wait_for_log("resume", f"reconcile loop started for {namespace}/chat", timeout=60)
    wait("the chat children listed", lambda: chat_children_counted(metrics_port), operator, 30)
    assert_no_unrelated(metrics_port)
    running = local_cluster.kubectl(
        "get", "pods", "-n", namespace, "-l", "app.kubernetes.io/name=unrelated", "-o", "name"
    )
    assert len(running.stdout.split()) == UNRELATED  # they were there all along


def test_without_the_selectors_the_counter_sees_the_unrelated_pods(
    local_cluster: Any,
    namespace: str,
    operator: OperatorProcess,
    operator_kubeconfig: Path,
    kwok_node: str,
    tmp_path_factory: Any,
) -> None:
    """The control: the same counter, the selectors off (SITS_SERVER_SIDE_SELECTORS=0,
    Kopf's client-side filters alone, as before): every unrelated pod arrives."""
    count = 20
    add_unrelated(local_cluster, namespace, count)
    port = free_port()
    unscoped = OperatorProcess(
        operator_kubeconfig,
        tmp_path_factory.mktemp("unscoped"),
        extra_args=metrics_args(port),
        extra_env={ENV_SWITCH: "0"},
        namespaces=operator.namespaces,
    )
    operator.stop()  # one operator at a time
    try:
        unscoped.start()

        def all_counted() -> bool:  # each kind's watch delivers in its own time
            seen = received(port).unrelated
            return seen["pods"] >= count and seen["deployments"] >= 1 and seen["services"] >= 1

        wait(
            f"{count} unrelated pods, a Deployment and a Service counted", all_counted, unscoped, 60
        )
    finally:
        unscoped.stop()
        operator.start()
    assert unscoped.forbidden() == []
