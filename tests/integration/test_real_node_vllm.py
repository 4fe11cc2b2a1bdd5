"""The operator's pods run for real: vLLM and the cache sidecar on the real node.

The operator itself runs in the cluster, installed by its Helm chart from the local
``sits-operator`` image; the tiny model reaches the pods through a PersistentVolume and a
``pvc://`` model reference, as a user's weights would. Nothing here is faked: the
readiness probe is vLLM's ``/health``, requests reach vLLM through the sidecar via the
variant's ClusterIP, and the memory limit is read back from the container's cgroup.
"""

from __future__ import annotations

import calendar
import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
from openai import OpenAI
from openai.types.chat import ChatCompletionMessageParam
from tests.integration.real_node import (
    container_cgroup,
    container_status,
    kill_container,
    routes,
    wait,
)

from sits_live import stack
from sits_live.stack import ADAPTER, PROJECT_VERSION, SERVED, VLLM_MEMORY, apply, get, pod_ready
from sits_localcluster import network
from sits_localcluster.cluster import LocalCluster
from sits_localcluster.node import NODE_NAME
from sits_operator.core.quantity import parse_bytes
from sits_operator_testing.manifests import fast_policy

# The module fixture may build images (minutes after a source change) and import them, and
# waits for vLLM pods: generous, since the first test carries the fixture's time.
pytestmark = [pytest.mark.cluster, pytest.mark.vllm, pytest.mark.timeout(1800)]

NAME = "chat"
#: A vLLM argument it refuses at start-up: the candidate crash-loops for a real reason.
BAD_ARG = "--max-model-len=not-a-number"
POD_READY_BUDGET_S = 90.0
#: No Prometheus answers here (connection refused in the operator's pod): every SLI query
#: fails, so only the pods can decide; they must (docs/architecture.md section 5).
NO_PROMETHEUS = "http://127.0.0.1:9"
#: The loser keeps crash-looping after the rollback (the ContainersFailing test reads it).
SCALE_DOWN_DELAY = "1h"


@dataclass
class Live:
    cluster: LocalCluster
    namespace: str
    operator_namespace: str
    ready_after_scheduled_s: float
    saw_running_but_unready: bool


def sits_deployment(candidate_args: tuple[str, ...], policy: str) -> dict[str, Any]:
    """The stable serves the tiny model and the LoRA adapter from the volume (kept resident
    by the sidecar's L3 tier); the candidate starts with ``candidate_args`` added, judged
    by ``policy``."""
    return stack.sits_deployment(
        NAME,
        [
            stack.variant("v1", "stable", "tiny-a"),
            stack.variant("v2", "candidate", "tiny-b", extra_args=candidate_args),
        ],
        router="none",
        analysis={"policyRef": {"name": policy}},
        rollout={
            "strategy": "canary",
            "stepWeight": 25,
            "maxWeight": 50,
            "scaleDownDelay": SCALE_DOWN_DELAY,
        },
    )


def _variant_pod(cluster: LocalCluster, namespace: str, variant: str) -> dict[str, Any] | None:
    pods = get(cluster, "pods", "-n", namespace, "-l", f"sits.dev/variant={variant}")["items"]
    live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
    return live[0] if live else None


def _scheduled_at(pod: dict[str, Any]) -> float:
    for cond in pod["status"].get("conditions", []):
        if cond["type"] == "PodScheduled" and cond["status"] == "True":
            stamp = time.strptime(cond["lastTransitionTime"], "%Y-%m-%dT%H:%M:%SZ")
            return float(calendar.timegm(stamp))
    raise AssertionError("pod not scheduled")


def _wait_stable_ready(cluster: LocalCluster, namespace: str) -> tuple[float, bool]:
    """Seconds from the stable pod's scheduling to Ready, and whether Ready lagged Running."""
    saw_unready = False

    def ready() -> bool:
        nonlocal saw_unready
        pod = _variant_pod(cluster, namespace, "v1")
        if pod is None:
            return False
        vllm = container_status(pod, "vllm")
        if vllm and "running" in vllm["state"] and not vllm["ready"]:
            saw_unready = True
        return pod_ready(pod)

    wait("the stable vLLM pod Ready", ready, timeout=600, step=1.0)
    pod = _variant_pod(cluster, namespace, "v1")
    assert pod is not None
    return time.time() - _scheduled_at(pod), saw_unready


@pytest.fixture(scope="module")
def live(local_cluster: LocalCluster, crds_installed: tuple[str, ...]) -> Iterator[Live]:
    """A watched namespace, the operator from its chart, the model volume, the rollout."""
    cluster = local_cluster
    cluster.ensure_images(stack.IMAGES)
    suffix = uuid.uuid4().hex[:6]
    namespace, operator_ns = f"sits-live-{suffix}", f"sits-system-{suffix}"
    cluster.kubectl("create", "namespace", namespace)
    operator = stack.OperatorInstall(cluster, operator_ns, (namespace,))
    volume = stack.ModelVolume(cluster, namespace)
    # SITS2026 on 4 s periods: failingContainers rolls back after 2 failing periods.
    policy = fast_policy(
        f"crash-{suffix}", NO_PROMETHEUS, noData={"action": "hold", "after": "10m"}
    )
    try:
        operator.install()
        volume.create()
        apply(cluster, None, policy)
        apply(cluster, namespace, sits_deployment((BAD_ARG,), policy["metadata"]["name"]))
        ready_s, saw_unready = _wait_stable_ready(cluster, namespace)
        yield Live(cluster, namespace, operator_ns, ready_s, saw_unready)
    finally:
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        operator.uninstall()
        volume.delete()
        name = policy["metadata"]["name"]
        cluster.kubectl("delete", "sitspolicy", name, "--ignore-not-found", check=False)


def test_operator_runs_in_the_cluster_from_its_chart(live: Live) -> None:
    pods = get(live.cluster, "pods", "-n", live.operator_namespace)["items"]
    (pod,) = pods
    assert pod["spec"]["nodeName"] == NODE_NAME
    assert pod["spec"]["containers"][0]["image"] == f"sits.local/sits-operator:{PROJECT_VERSION}"
    assert pod_ready(pod)
    # The operator in the pod reconciled the rollout (status written, children applied).
    sitsd = get(live.cluster, "sitsdeployment", "-n", live.namespace, NAME)
    assert sitsd["status"]["observedGeneration"] == sitsd["metadata"]["generation"]


def test_vllm_pod_is_ready_only_once_vllm_answers_health(live: Live) -> None:
    pod = _variant_pod(live.cluster, live.namespace, "v1")
    assert pod is not None
    assert pod["spec"]["nodeName"] == NODE_NAME
    vllm = next(c for c in pod["spec"]["containers"] if c["name"] == "vllm")
    assert vllm["readinessProbe"]["httpGet"]["path"] == "/health"
    assert live.saw_running_but_unready, "Ready came with the container start: probe not real?"
    print(f"stable vLLM pod Ready {live.ready_after_scheduled_s:.1f} s after it was scheduled")
    assert live.ready_after_scheduled_s <= POD_READY_BUDGET_S * 2


def test_openai_client_reaches_vllm_through_the_sidecar_on_the_cluster_ip(live: Live) -> None:
    service = get(live.cluster, "service", "-n", live.namespace, f"{NAME}-v1")
    cluster_ip = service["spec"]["clusterIP"]
    port = service["spec"]["ports"][0]["port"]
    assert cluster_ip.startswith(network.SERVICE_CIDR.rsplit(".", 2)[0])
    # The pod is Ready; the Service routes to it once its EndpointSlice and kube-proxy
    # follow (a fresh-clone CI once got "connection refused" in between).
    wait("the Service to route to the Ready pod", lambda: routes(cluster_ip, port), 60, 0.5)
    messages: list[ChatCompletionMessageParam] = [
        {"role": "user", "content": "What is the capital of France?"}
    ]
    with OpenAI(
        base_url=f"http://{cluster_ip}:{port}/v1",
        api_key="unused",
        max_retries=0,
        http_client=httpx2.Client(trust_env=False),
    ) as client:
        first = client.chat.completions.with_raw_response.create(
            model=SERVED,
            messages=messages,
            max_tokens=8,
            temperature=0,
        )
        second = client.chat.completions.with_raw_response.create(
            model=SERVED,
            messages=messages,
            max_tokens=8,
            temperature=0,
        )
    assert first.headers["x-sits-cache"] == "miss"
    assert second.headers["x-sits-cache"] == "hit", "L1 served by the sidecar in the pod"
    assert second.parse().choices[0].message.content == first.parse().choices[0].message.content


def test_lora_adapter_from_the_volume_is_served(live: Live) -> None:
    """The adapter reached the pod through the PV (pvc://) and the sidecar made it resident."""
    service = get(live.cluster, "service", "-n", live.namespace, f"{NAME}-v1")
    base = f"http://{service['spec']['clusterIP']}:{service['spec']['ports'][0]['port']}/v1"
    with OpenAI(
        base_url=base, api_key="unused", max_retries=0, http_client=httpx2.Client(trust_env=False)
    ) as client:

        def listed() -> bool:
            return ADAPTER in {m.id for m in client.models.list().data}

        wait(f"vLLM to list the adapter {ADAPTER}", listed, timeout=120, step=2.0)
        out = client.completions.create(model=ADAPTER, prompt="hello", max_tokens=4, temperature=0)
    assert out.model == ADAPTER
    assert out.choices[0].text is not None


def test_memory_limit_is_the_containers_cgroup_limit(live: Live) -> None:
    pod = _variant_pod(live.cluster, live.namespace, "v1")
    assert pod is not None
    limit = Path(container_cgroup(pod, "vllm"), "memory.limit_in_bytes").read_text()
    assert int(limit) == parse_bytes(VLLM_MEMORY)


def test_crashlooping_candidate_shows_in_conditions_and_stable_is_untouched(live: Live) -> None:
    before = get(live.cluster, "deployment", "-n", live.namespace, f"{NAME}-v1")

    def failing() -> bool:
        status = get(live.cluster, "sitsdeployment", "-n", live.namespace, NAME)["status"]
        conds = {c["type"]: c for c in status.get("conditions", [])}
        cond = conds.get("ContainersFailing") or {}
        return cond.get("status") == "True" and cond.get("reason") == "CrashLoopBackOff"

    wait("ContainersFailing=True (CrashLoopBackOff) on the SitsDeployment", failing, timeout=240)
    status = get(live.cluster, "sitsdeployment", "-n", live.namespace, NAME)["status"]
    cond = next(c for c in status["conditions"] if c["type"] == "ContainersFailing")
    assert "v2" in cond["message"]
    assert "max-model-len" in cond["message"], cond["message"]  # vLLM's own last words
    weights = {v["name"]: v.get("weight") for v in status["variants"]}
    assert weights["v2"] == 0
    after = get(live.cluster, "deployment", "-n", live.namespace, f"{NAME}-v1")
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert after["spec"] == before["spec"]


def test_the_policy_rolls_the_crash_looping_candidate_back_and_says_why(live: Live) -> None:
    """The bad argument is the candidate's own failure: each period that sees it in
    CrashLoopBackOff fails the built-in rule `containers`; after the policy's 2 it is
    RolledBack, and status and a Warning event say why in the kubelet's and vLLM's words.
    No Prometheus answers: an outage freezes the SLIs, the pods still decide."""

    def rolled_back() -> bool:
        status = get(live.cluster, "sitsdeployment", "-n", live.namespace, NAME)["status"]
        return bool(status.get("phase") == "RolledBack")

    wait("the crash-looping candidate RolledBack", rolled_back, timeout=300)
    status = get(live.cluster, "sitsdeployment", "-n", live.namespace, NAME)["status"]
    assert "containers: v2: CrashLoopBackOff" in status["message"], status["message"]
    assert "max-model-len" in status["message"], status["message"]  # vLLM's last words
    stalled = next(c for c in status["conditions"] if c["type"] == "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "RolledBack")
    assert "CrashLoopBackOff" in stalled["message"]
    analysis = status["analysis"]
    assert analysis["breaches"]["containers"]["periods"] == 2, analysis["breaches"]
    rollback = [h for h in analysis["history"] if h["action"] == "rollback"]
    assert len(rollback) == 1
    assert "v2: CrashLoopBackOff" in rollback[0]["reason"]
    assert {v["name"]: v.get("weight") for v in status["variants"]} == {"v1": 100, "v2": 0}

    events = get(
        live.cluster,
        "events",
        "-n",
        live.namespace,
        "--field-selector",
        f"involvedObject.kind=SitsDeployment,involvedObject.name={NAME}",
    )["items"]
    rolled = [e for e in events if e["reason"] == "RolledBack"]
    assert rolled, [(e["reason"], e["message"]) for e in events]
    assert rolled[0]["type"] == "Warning"
    assert "v2: CrashLoopBackOff" in rolled[0]["message"]
    assert "for 2 of 2 periods" in rolled[0]["message"]


def test_a_killed_vllm_container_is_restarted_and_counted_in_status(live: Live) -> None:
    pod = _variant_pod(live.cluster, live.namespace, "v1")
    assert pod is not None
    kill_container(live.cluster, pod, "vllm")

    def restarted_and_shown() -> bool:
        status = get(live.cluster, "sitsdeployment", "-n", live.namespace, NAME)["status"]
        v1 = next(v for v in status["variants"] if v["name"] == "v1")
        return int(v1.get("restarts", 0)) >= 1

    wait("the restart in status.variants[v1].restarts", restarted_and_shown, timeout=120)
    wait(
        "the stable pod Ready again",
        lambda: pod_ready(_variant_pod(live.cluster, live.namespace, "v1") or {}),
        timeout=300,
        step=1.0,
    )
    print(json.dumps(get(live.cluster, "sitsdeployment", "-n", live.namespace, NAME)["status"]))
