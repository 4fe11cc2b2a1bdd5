"""The real node's budget: warm node start, and a vLLM pod's time from scheduled to Ready.

Targets (the real-node issue): warm node start at most 30 s; a vLLM pod Ready at most 90 s
after it is scheduled. The pod is the operator's own rendering of a variant (vLLM plus the
cache sidecar, the tiny model from a local PersistentVolume), created directly so that
only the node and the containers are timed. Writes its section of docs/benchmarks.md.

    .venv/bin/python -m benchmarks.real_node [--starts 5] [--pods 3]
"""

from __future__ import annotations

import argparse
import calendar
import json
import os
import statistics
import time
import uuid
from typing import Any

from benchmarks.results import commit, write_section
from sits_localcluster import addons, realnode
from sits_localcluster.cluster import LocalCluster
from sits_localcluster.images.specs import VLLM_VERSION
from sits_localcluster.node import REAL_NODE_LABEL, REAL_NODE_TOLERATION
from sits_operator.core.render import render_children
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import ObjectRef, parse_spec
from sits_vllm.model import ensure_tiny_model

INFERENCE_IMAGE = "sits.local/sits-inference:0.1.0"


def warm_starts(cluster: LocalCluster, runs: int) -> list[float]:
    """Stop the node (its host state removed) and start it again, images already imported."""
    times = []
    for _ in range(runs):
        cluster._stop_node()
        left = cluster.node_leftovers()
        assert not left, f"down left {left}"
        start = time.monotonic()
        cluster._ensure_node()
        times.append(time.monotonic() - start)
    return times


def _spec() -> dict[str, Any]:
    variant = {
        "image": f"sits.local/vllm-cpu:{VLLM_VERSION}",
        "model": "pvc://models/tiny",
        "replicas": 1,
        "migProfile": "1g.10gb",
        "vllmArgs": ["--dtype=float32", "--max-model-len=256", "--enforce-eager"],
        "resources": {"memory": "4Gi"},
    }
    return {
        "servedModelName": "tiny",
        "variants": [
            {**variant, "name": "v1", "role": "stable", "revision": "a"},
            {**variant, "name": "v2", "role": "candidate", "revision": "b"},
        ],
        "traffic": {"router": "none"},
    }


def vllm_pod(namespace: str, name: str) -> dict[str, Any]:
    """The stable variant's pod as the operator renders it, placed on the real node."""
    owner = ObjectRef(namespace=namespace, name="bench", uid=str(uuid.uuid4()))
    settings = OperatorSettings(cache_sidecar_image=INFERENCE_IMAGE)
    children = render_children(owner, parse_spec(_spec()), settings)
    deployment = next(c for c in children if c["kind"] == "Deployment")
    template = deployment["spec"]["template"]
    spec = template["spec"]
    spec["nodeSelector"] = {**spec.get("nodeSelector", {}), **REAL_NODE_LABEL}
    spec["tolerations"] = [*spec.get("tolerations", []), dict(REAL_NODE_TOLERATION)]
    for container in spec["containers"]:
        if container["name"] == "vllm":
            container["env"] = [
                *container.get("env", []),
                {"name": "VLLM_CPU_KVCACHE_SPACE", "value": "1"},
            ]
    meta = {"name": name, "namespace": namespace, "labels": template["metadata"]["labels"]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _pod(cluster: LocalCluster, namespace: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("get", "pod", "-n", namespace, name, "-o", "json").stdout
    value: dict[str, Any] = json.loads(out)
    return value


def _since_scheduled(pod: dict[str, Any]) -> float | None:
    conds = {c["type"]: c for c in pod["status"].get("conditions", [])}
    sched, ready = conds.get("PodScheduled"), conds.get("Ready")
    if not (sched and ready and ready["status"] == "True"):
        return None
    return _epoch(ready["lastTransitionTime"]) - _epoch(sched["lastTransitionTime"])


def _epoch(stamp: str) -> float:
    return float(calendar.timegm(time.strptime(stamp, "%Y-%m-%dT%H:%M:%SZ")))


def pod_ready_times(cluster: LocalCluster, runs: int) -> list[float]:
    cluster.ensure_images(("vllm-cpu", "sits-inference"))
    namespace = f"bench-node-{uuid.uuid4().hex[:6]}"
    volume = f"tiny-model-{namespace}"
    cluster.kubectl("create", "namespace", namespace)
    model = realnode.volume_dir(cluster.node_layout(), f"{volume}/tiny", ensure_tiny_model())
    pv = addons.local_volume(volume, str(model.parent), "1Gi", namespace, "models")
    claim = addons.volume_claim("models", namespace, "1Gi", volume)
    times: list[float] = []
    try:
        for doc in (pv, claim):
            cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
        for i in range(runs):
            name = f"vllm-{i}"
            cluster.kubectl("apply", "-f", "-", input=json.dumps(vllm_pod(namespace, name)))
            deadline = time.monotonic() + 600
            while (took := _since_scheduled(_pod(cluster, namespace, name))) is None:
                assert time.monotonic() < deadline, f"{name} not Ready in 600 s"
                time.sleep(1)
            times.append(took)
            cluster.kubectl("delete", "pod", "-n", namespace, name, "--wait=true")
    finally:
        cluster.kubectl("delete", "namespace", namespace, "--wait=false", check=False)
        cluster.kubectl("delete", "pv", volume, "--wait=false", check=False)
        realnode.remove_volume_data(cluster.node_layout(), volume)
    return times


def _row(what: str, values: list[float], target: float) -> str:
    med = statistics.median(values)
    verdict = "met" if max(values) <= target else f"missed (worst {max(values):.1f} s)"
    listed = ", ".join(f"{v:.1f}" for v in values)
    return (
        f"| {what} | {len(values)} | {med:.1f} | {min(values):.1f} | {max(values):.1f} "
        f"| {target:.0f} | {verdict} | {listed} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--pods", type=int, default=3)
    args = parser.parse_args()
    cluster = LocalCluster(progress=print, node=True)
    cluster.up(persist=True)
    load = os.getloadavg()[0]
    starts = warm_starts(cluster, args.starts)
    pods = pod_ready_times(cluster, args.pods)
    section = "\n".join(
        [
            "## Real node: warm start and vLLM pod start-up",
            "",
            f"Commit `{commit()}`, 2 cores, load average {load:.1f} at the start. "
            "`python -m benchmarks.real_node`. Warm start: `down` of the node (every "
            "container, mount, chain and the bridge removed) then `up` with the images "
            "already in containerd, up to CoreDNS Ready. vLLM pod: the operator's rendering "
            "of a variant (vLLM + sits-cache sidecar, tiny model on a local PV), from "
            "PodScheduled to Ready (both probes real; one-second resolution).",
            "",
            "| what | runs | median s | min s | max s | target s | verdict | all runs |",
            "|---|---|---|---|---|---|---|---|",
            _row("warm node start", starts, 30),
            _row("vLLM pod scheduled -> Ready", pods, 90),
            "",
        ]
    )
    write_section(section)


if __name__ == "__main__":
    main()
