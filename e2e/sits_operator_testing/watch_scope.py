"""Unrelated objects for the watch-scope test and benchmark (issue 15 item 5): many pods
that are none of the operator's business, and what the operator says it received.

The pods are bound by `nodeName` to a kwok node of their own (no scheduler work; kwok
marks them Running, so each one is a real pod object with a status, as a busy cluster's
are). They carry labels close to the operator's, but not its own: a `managed-by` of
another manager, an `app.kubernetes.io/name`, no `sits.dev/deployment`.

What the operator received is read from its /metrics
(`sits_operator_watch_events_total{resource, selected}`, handlers/watching.py) and its
memory from /proc.
"""

from __future__ import annotations

import asyncio
import os
import re
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client, config
from prometheus_client.parser import text_string_to_metric_families

from sits_localcluster.nodes import KWOK_ANNOTATION_KEY, KWOK_ANNOTATION_VALUE

NODE = "sits-unrelated-0"
NODE_LABEL = "sits.dev/unrelated-node"
TAINT = {"key": NODE_LABEL, "value": "true", "effect": "NoSchedule"}
UNRELATED_LABELS = {
    "app.kubernetes.io/name": "unrelated",
    "app.kubernetes.io/managed-by": "someone-else",  # the operator's label, another value
    "tier": "batch",
}
CHILD_PLURALS = (
    "deployments",
    "services",
    "serviceaccounts",
    "roles",
    "rolebindings",
    "poddisruptionbudgets",
    "pods",
)


def unrelated_node(name: str = NODE, pods: int = 10_000) -> dict[str, Any]:
    """A kwok node for the unrelated pods only: tainted, so the scheduler never puts the
    operator's pods there, and room for `pods` of them."""
    resources = {"cpu": "1k", "memory": "4Ti", "pods": str(pods)}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {NODE_LABEL: "true", "kubernetes.io/hostname": name},
            "annotations": {KWOK_ANNOTATION_KEY: KWOK_ANNOTATION_VALUE},
        },
        "spec": {"taints": [TAINT]},
        "status": {"capacity": resources, "allocatable": resources},
    }


def unrelated_pod(index: int, namespace: str, node: str = NODE) -> dict[str, Any]:
    """A pod the size of a small real one (one container, resources, env, a probe)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"unrelated-{index:05d}",
            "namespace": namespace,
            "labels": {**UNRELATED_LABELS, "shard": str(index % 16)},
            "annotations": {"example.com/owner": "team-batch"},
        },
        "spec": {
            "nodeName": node,
            "tolerations": [{**TAINT, "operator": "Equal"}],
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "worker",
                    "image": "registry.example.com/batch/worker:1.2.3",
                    "args": ["--queue", f"q-{index % 16}"],
                    "env": [{"name": "WORKER_INDEX", "value": str(index)}],
                    "resources": {
                        "requests": {"cpu": "10m", "memory": "16Mi"},
                        "limits": {"memory": "64Mi"},
                    },
                    "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
                }
            ],
        },
    }


def unrelated_others(namespace: str) -> list[dict[str, Any]]:
    """One object of each other child kind, none of them the operator's."""
    meta = {"namespace": namespace, "labels": dict(UNRELATED_LABELS)}
    selector = {"app.kubernetes.io/name": "unrelated"}
    return [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "unrelated", **meta},
            "spec": {
                "replicas": 0,
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {"labels": selector},
                    "spec": {"containers": [{"name": "c", "image": "example.com/c:1"}]},
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "unrelated", **meta},
            "spec": {"selector": selector, "ports": [{"port": 80}]},
        },
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "unrelated", **meta}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "unrelated", **meta},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "unrelated", **meta},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "unrelated",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "unrelated", "namespace": namespace}],
        },
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "unrelated", **meta},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector}},
        },
    ]


async def _create_pods(kubeconfig: Path, pods: list[dict[str, Any]], concurrency: int) -> None:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = concurrency
    async with client.ApiClient(configuration) as api:
        # Raw responses (no model decoding): the client's CPU goes to creating, not parsing.
        create_pod: Any = client.CoreV1Api(api).create_namespaced_pod
        limit = asyncio.Semaphore(concurrency)

        async def create(pod: dict[str, Any]) -> None:
            async with limit:
                response = await create_pod(
                    pod["metadata"]["namespace"], pod, _preload_content=False
                )
                await response.read()
                response.release()
                if response.status not in (201, 409):  # 409: left by an interrupted run
                    raise RuntimeError(f"creating {pod['metadata']['name']}: {response.status}")

        await asyncio.gather(*(create(pod) for pod in pods))


def create_pods(kubeconfig: Path, pods: Iterable[dict[str, Any]], concurrency: int = 32) -> None:
    """Create the pods `concurrency` at a time (a batch system's burst)."""
    asyncio.run(_create_pods(kubeconfig, list(pods), concurrency))


@dataclass(frozen=True)
class Received:
    """What the operator's counter says its watches delivered, by resource."""

    selected: dict[str, float]
    unrelated: dict[str, float]
    rss_bytes: float

    @property
    def unrelated_total(self) -> float:
        return sum(self.unrelated.values())


def scrape(url: str, timeout: float = 5.0) -> Received:
    """Read the operator's /metrics (`url`: http://host:port/metrics)."""
    with urllib.request.urlopen(url, timeout=timeout) as response:
        return parse_received(response.read().decode())


def parse_received(text: str) -> Received:
    """The watch-event counter and the RSS from a Prometheus text exposition."""
    selected = dict.fromkeys(CHILD_PLURALS, 0.0)
    unrelated = dict.fromkeys(CHILD_PLURALS, 0.0)
    rss = float("nan")
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "sits_operator_watch_events_total":
                which = selected if sample.labels["selected"] == "true" else unrelated
                which[sample.labels["resource"]] = float(sample.value)
            elif sample.name == "process_resident_memory_bytes":
                rss = float(sample.value)
    return Received(selected, unrelated, rss)


def memory_mib(pid: int) -> tuple[float, float]:
    """(current RSS, peak RSS) of a process, MiB (VmRSS, VmHWM)."""
    status = Path(f"/proc/{pid}/status").read_text()

    def field(name: str) -> float:
        match = re.search(rf"{name}:\s+(\d+) kB", status)
        return int(match.group(1)) / 1024 if match else float("nan")

    return field("VmRSS"), field("VmHWM")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _delete_pods(kubeconfig: Path, namespace: str) -> None:
    configuration = client.Configuration()
    await config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)
    async with client.ApiClient(configuration) as api:
        delete: Any = client.CoreV1Api(api).delete_collection_namespaced_pod
        response = await delete(namespace, grace_period_seconds=0, _preload_content=False)
        await response.read()
        response.release()


def delete_pods(kubeconfig: Path, namespace: str) -> None:
    """Every pod of `namespace` at once, without grace (one deletecollection request)."""
    asyncio.run(_delete_pods(kubeconfig, namespace))
