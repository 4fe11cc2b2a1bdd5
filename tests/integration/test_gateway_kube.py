"""The Kubernetes source against the real kube-apiserver: weights from the SitsDeployment's
status (written here as the operator's built-in router would), endpoints from
EndpointSlices, both followed by watches within a second.

The apiserver refuses loopback addresses in EndpointSlices, and test traffic may only go to
loopback; so slices carry documentation addresses (192.0.2.0/24, RFC 5737) and, for the
tests that send traffic, a thin wrapper maps them onto the stub upstreams' loopback ports.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from typing import Any

import aiohttp
import pytest
import yaml

from sits_inference.gateway.app import start_gateway
from sits_inference.gateway.config import GatewayConfig
from sits_inference.gateway.sources.kube import KubernetesSource
from sits_inference.gateway.table import RoutingTable
from sits_inference_testing.load import eventually
from sits_inference_testing.stub import start_stub

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(180)]

A, B = "192.0.2.10", "192.0.2.20"


def sitsd(namespace: str) -> dict[str, Any]:
    variant = {
        "image": "vllm/vllm-openai:v0.11.0",
        "model": "Qwen/Qwen2.5-0.5B-Instruct",
        "migProfile": "1g.10gb",
    }
    return {
        "apiVersion": "sits.dev/v1alpha1",
        "kind": "SitsDeployment",
        "metadata": {"name": "chat", "namespace": namespace},
        "spec": {
            "servedModelName": "chat-model",
            "variants": [
                {**variant, "name": "v1", "role": "stable", "revision": "r1"},
                {**variant, "name": "v2", "role": "candidate", "revision": "r2"},
            ],
            "traffic": {
                "router": "builtin",
                "stickySession": {"header": "x-conversation"},
                "initialWeights": [
                    {"variant": "v1", "weight": 90},
                    {"variant": "v2", "weight": 10},
                ],
            },
        },
    }


def endpoint_slice(namespace: str, name: str, service: str, *ready: tuple[str, bool]) -> str:
    doc = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {
                "kubernetes.io/service-name": service,
                "endpointslice.kubernetes.io/managed-by": "sits-tests",
            },
        },
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": [ip], "conditions": {"ready": ok}} for ip, ok in ready],
    }
    return yaml.safe_dump(doc)


class Cluster:
    """kubectl for one namespace, run off the event loop."""

    def __init__(self, local_cluster: Any, namespace: str) -> None:
        self._kubectl = local_cluster.kubectl
        self.namespace = namespace
        self.kubeconfig = str(local_cluster.kubeconfig)

    async def run(self, *args: str, input: str | None = None) -> None:
        await asyncio.to_thread(self._kubectl, "-n", self.namespace, *args, input=input)

    async def apply(self, manifest: str) -> None:
        await self.run("apply", "-f", "-", input=manifest)

    async def set_weights(self, **weights: int) -> float:
        """Patch the status as the built-in router does; return when the write returned."""
        rows = [{"name": n, "weight": w} for n, w in weights.items()]
        patch = json.dumps({"status": {"variants": rows}})
        await self.run(
            "patch", "sitsdeployment", "chat", "--subresource=status", "--type=merge", "-p", patch
        )
        return time.monotonic()


@pytest.fixture
async def cluster(local_cluster: Any, namespace: str) -> Cluster:
    kube = Cluster(local_cluster, namespace)
    await kube.apply(yaml.safe_dump(sitsd(namespace)))
    await kube.apply(endpoint_slice(namespace, "chat-v1-x", "chat-v1", (A, True)))
    await kube.apply(endpoint_slice(namespace, "chat-v2-x", "chat-v2", (B, True)))
    return kube


@pytest.fixture
async def source(cluster: Cluster) -> AsyncIterator[KubernetesSource]:
    kube = KubernetesSource(
        namespace=cluster.namespace, deployment="chat", kubeconfig=cluster.kubeconfig
    )
    await kube.start()
    async with asyncio.timeout(30):
        await kube.wait_ready()
    yield kube
    await kube.close()


def weights(table: RoutingTable) -> dict[str, int]:
    return {v.name: v.weight for v in table.variants}


def endpoints(table: RoutingTable) -> dict[str, set[str]]:
    """Endpoints in the documentation range, i.e. the slices this test wrote (an operator
    running against the same cluster may add its own Services' slices beside them)."""
    return {v.name: {e for e in v.endpoints if "//192.0.2." in e} for v in table.variants}


async def within_a_second(check: Callable[[], bool], since: float) -> None:
    async def holds() -> bool:
        return check()

    await eventually(holds, within=5)
    assert time.monotonic() - since < 1.0, "the change took more than 1 s to take effect"


async def test_weights_follow_the_status_and_endpoints_the_slices(
    cluster: Cluster, source: KubernetesSource
) -> None:
    table = source.current()
    assert weights(table) == {"v1": 90, "v2": 10}, "before any status: spec.traffic.initialWeights"
    assert endpoints(table) == {"v1": {f"http://{A}:8080"}, "v2": {f"http://{B}:8080"}}
    assert table.models == frozenset({"chat-model"})
    assert table.sticky is not None
    assert table.sticky.header == "x-conversation"

    since = await cluster.set_weights(v1=50, v2=50)
    await within_a_second(lambda: weights(source.current()) == {"v1": 50, "v2": 50}, since)
    since = await cluster.set_weights(v1=100, v2=0)
    await within_a_second(lambda: weights(source.current()) == {"v1": 100, "v2": 0}, since)

    await cluster.apply(endpoint_slice(cluster.namespace, "chat-v2-x", "chat-v2", (B, False)))
    since = time.monotonic()
    await within_a_second(lambda: endpoints(source.current())["v2"] == set(), since)
    await cluster.apply(
        endpoint_slice(cluster.namespace, "chat-v2-y", "chat-v2", ("192.0.2.21", True))
    )
    since = time.monotonic()
    await within_a_second(
        lambda: endpoints(source.current())["v2"] == {"http://192.0.2.21:8080"}, since
    )
    await cluster.run("delete", "endpointslice", "chat-v1-x")
    since = time.monotonic()
    await within_a_second(lambda: endpoints(source.current())["v1"] == set(), since)


async def test_a_deleted_deployment_stops_routing_and_a_new_one_resumes_it(
    cluster: Cluster, source: KubernetesSource
) -> None:
    await cluster.run("delete", "sitsdeployment", "chat", "--wait=true")
    await eventually(_async(lambda: source.current().variants == ()), within=5)
    await cluster.apply(yaml.safe_dump(sitsd(cluster.namespace)))
    await eventually(_async(lambda: weights(source.current()) == {"v1": 90, "v2": 10}), within=5)
    assert source.ready


def _async(check: Callable[[], bool]) -> Callable[[], Any]:
    async def run() -> bool:
        return check()

    return run


class LoopbackSource:
    """The Kubernetes source with documentation addresses mapped onto loopback stubs, and
    every other endpoint dropped: test traffic goes to loopback and nowhere else."""

    def __init__(self, inner: KubernetesSource, mapping: dict[str, str]) -> None:
        self._inner, self._mapping = inner, mapping
        self._seen: RoutingTable | None = None
        self._mapped: RoutingTable | None = None

    def current(self) -> RoutingTable:
        table = self._inner.current()
        if table is not self._seen:
            variants = tuple(
                replace(
                    v, endpoints=tuple(self._mapping[e] for e in v.endpoints if e in self._mapping)
                )
                for v in table.variants
            )
            self._seen, self._mapped = table, replace(table, variants=variants)
        assert self._mapped is not None
        return self._mapped

    @property
    def ready(self) -> bool:
        return self._inner.ready

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None


async def test_traffic_follows_the_operators_weights_within_a_second(
    cluster: Cluster, source: KubernetesSource
) -> None:
    a, b = await start_stub("a"), await start_stub("b")
    mapped = LoopbackSource(source, {f"http://{A}:8080": a.url, f"http://{B}:8080": b.url})
    gateway = await start_gateway(GatewayConfig(port=0), mapped)
    url = gateway.url + "/v1/chat/completions"
    body = {"model": "chat-model", "messages": []}
    try:
        async with aiohttp.ClientSession() as http:

            async def variant_of_next_request() -> str:
                async with http.post(url, json=body) as response:
                    assert response.status == 200
                    return response.headers["x-sits-variant"]

            since = await cluster.set_weights(v1=0, v2=100)

            async def all_on_v2() -> bool:
                return {await variant_of_next_request() for _ in range(5)} == {"v2"}

            await eventually(all_on_v2, within=5)
            assert time.monotonic() - since < 1.0
            assert {await variant_of_next_request() for _ in range(50)} == {"v2"}
            async with http.post(url, json={"model": "other", "messages": []}) as response:
                assert response.status == 404, "models come from spec.servedModelName"
    finally:
        await gateway.stop()
        await a.stop()
        await b.stop()
