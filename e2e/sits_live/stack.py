"""What the live scenarios and the live demo run on: the operator from its chart on the real
node, the tiny model and its LoRA adapters on a PersistentVolume, and SitsDeployments
whose variants are real vLLM CPU pods with the cache sidecar.

Nothing here is a stand-in: the images are the ones ``sits_localcluster.images`` builds,
the operator is installed with ``helm upgrade --install`` as a user would, and a broken
variant is broken by its artifact (a truncated adapter file that vLLM really refuses to
load), not by a switch in product code.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sits_localcluster import addons, realnode
from sits_localcluster.cluster import LocalCluster
from sits_localcluster.helm import helm_install, helm_uninstall, local_install_values
from sits_localcluster.images.specs import VLLM_VERSION
from sits_localcluster.node import NODE_NAME, REAL_NODE_LABEL, REAL_NODE_TOLERATION
from sits_operator.core import naming
from sits_vllm.model import ensure_tiny_model, make_lora_adapter

PROJECT_VERSION = "0.1.0"
VLLM_IMAGE = f"sits.local/vllm-cpu:{VLLM_VERSION}"
IMAGES = ("vllm-cpu", "sits-inference", "sits-operator")
SERVED = "tiny"
#: What vLLM on the CPU needs on this machine (tiny model, 1 GiB KV cache, no compile).
CPU_ARGS = ("--dtype=float32", "--max-model-len=256", "--enforce-eager")
VLLM_MEMORY = "4Gi"
CLAIM = "models"
#: The LoRA adapter every variant serves; the broken revision ships it truncated.
ADAPTER = "a1"

#: The pod settings that place a pod on the real node (the kwok nodes only pretend).
ON_REAL_NODE: dict[str, Any] = {
    "nodeSelector": dict(REAL_NODE_LABEL),
    "tolerations": [dict(REAL_NODE_TOLERATION)],
}

Progress = Callable[[str], object]


def get(cluster: LocalCluster, *args: str) -> dict[str, Any]:
    """``kubectl get ... -o json``."""
    value: dict[str, Any] = json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)
    return value


def apply(cluster: LocalCluster, namespace: str | None, *objects: dict[str, Any]) -> None:
    doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
    ns = ["-n", namespace] if namespace else []
    cluster.kubectl("apply", *ns, "-f", "-", input=doc)


def pod_ready(pod: dict[str, Any]) -> bool:
    conditions = pod.get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def truncated_copy(adapter: Path, target: Path) -> Path:
    """The adapter with its weights cut in half, as an interrupted upload leaves it: the
    config still parses, so the failure shows only when vLLM loads the weights."""
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(adapter, target)
    weights = target / "adapter_model.safetensors"
    data = weights.read_bytes()
    weights.write_bytes(data[: len(data) // 2])
    return target


@dataclass
class ModelVolume:
    """The tiny model and adapters in one node directory, bound to one namespace's claim.

    Layout under the volume: ``tiny/`` (the model), ``adapters/<name>/`` (good adapters),
    ``broken/<name>/`` (the same adapters truncated).
    """

    cluster: LocalCluster
    namespace: str
    name: str = ""

    def __post_init__(self) -> None:
        self.name = self.name or f"tiny-model-{self.namespace}"

    def create(self) -> None:
        lay = self.cluster.node_layout()
        model = ensure_tiny_model()
        root = realnode.volume_dir(lay, f"{self.name}/tiny", model).parent
        adapter = make_lora_adapter(model, seed=1)
        realnode.volume_dir(lay, f"{self.name}/adapters/{ADAPTER}", adapter)
        staging = lay.volumes_dir / f"{self.name}.broken-staging"
        try:
            broken = truncated_copy(adapter, staging)
            realnode.volume_dir(lay, f"{self.name}/broken/{ADAPTER}", broken)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        pv = addons.local_volume(self.name, str(root), "1Gi", self.namespace, CLAIM)
        apply(self.cluster, None, pv)
        apply(
            self.cluster,
            self.namespace,
            addons.volume_claim(CLAIM, self.namespace, "1Gi", self.name),
        )

    def delete(self) -> None:
        self.cluster.kubectl("delete", "pv", self.name, "--wait=false", check=False)
        realnode.remove_volume_data(self.cluster.node_layout(), self.name)


def variant(
    name: str,
    role: str,
    revision: str,
    *,
    adapter_dir: str = "adapters",
    extra_args: tuple[str, ...] = (),
) -> dict[str, Any]:
    """A vLLM CPU variant serving the tiny model and adapter ``a1`` from the volume."""
    return {
        "name": name,
        "role": role,
        "image": VLLM_IMAGE,
        "model": f"pvc://{CLAIM}/tiny",
        "revision": revision,
        "replicas": 1,
        "migProfile": "1g.10gb",
        "gpuProduct": "NVIDIA-A100-SXM4-80GB",
        "resources": {"memory": VLLM_MEMORY},
        "vllmArgs": [*CPU_ARGS, *extra_args],
        "lora": {
            "maxLoras": 2,
            "maxLoraRank": 8,
            "adapters": [
                {
                    "name": ADAPTER,
                    "source": f"pvc://{CLAIM}/{adapter_dir}/{ADAPTER}",
                    "pinned": True,
                },
            ],
        },
    }


def sits_deployment(
    name: str,
    variants: list[dict[str, Any]],
    *,
    router: str = "builtin",
    analysis: dict[str, Any] | None = None,
    rollout: dict[str, Any] | None = None,
    gateway_replicas: int = 2,
) -> dict[str, Any]:
    traffic: dict[str, Any] = {"router": router}
    if router == "builtin":
        # The gateway pods too run on the real node (the kwok nodes would only pretend).
        traffic["gateway"] = {"replicas": gateway_replicas, "pod": dict(ON_REAL_NODE)}
    spec: dict[str, Any] = {
        "servedModelName": SERVED,
        "podDefaults": {
            **ON_REAL_NODE,
            "env": [{"name": "VLLM_CPU_KVCACHE_SPACE", "value": "1"}],
        },
        "variants": variants,
        "traffic": traffic,
    }
    if analysis is not None:
        spec["analysis"] = analysis
    if rollout is not None:
        spec["rollout"] = rollout
    return {
        "apiVersion": "sits.dev/v1alpha1",
        "kind": "SitsDeployment",
        "metadata": {"name": name},
        "spec": spec,
    }


@dataclass
class OperatorInstall:
    """The operator installed by its chart from the local image, watching ``watch``."""

    cluster: LocalCluster
    namespace: str
    watch: tuple[str, ...]
    release: str = "sits"
    values: dict[str, Any] = field(default_factory=dict)

    def install(self) -> None:
        values = local_install_values(PROJECT_VERSION, watch=self.watch)
        values["defaultPolicy"] = {"install": False}
        # One replica (leader election still on: it holds the Lease): on two shared cores a
        # second copy only costs memory, and the live scenarios kill "the" operator pod.
        # Two replicas and failover are tests/integration/test_leader_election.py's.
        values["replicaCount"] = 1
        values.update(self.values)
        helm_install(self.cluster, self.release, self.namespace, values)

    def uninstall(self) -> None:
        helm_uninstall(self.cluster, self.release, self.namespace)
        self.cluster.kubectl("delete", "namespace", self.namespace, "--wait=false", check=False)

    def pod(self) -> dict[str, Any] | None:
        pods = get(self.cluster, "pods", "-n", self.namespace)["items"]
        live = [p for p in pods if not p["metadata"].get("deletionTimestamp")]
        return live[0] if live else None


def variant_pods(cluster: LocalCluster, namespace: str, deployment: str) -> list[dict[str, Any]]:
    pods = get(cluster, "pods", "-n", namespace, "-l", f"{naming.LABEL_DEPLOYMENT}={deployment}")
    return [p for p in pods["items"] if not p["metadata"].get("deletionTimestamp")]


def all_ready(cluster: LocalCluster, namespace: str, deployment: str, count: int) -> bool:
    """At least ``count`` pods of the SitsDeployment (variants and gateways) on the real
    node, every one of them Ready (kwok's pods only pretend to be)."""
    pods = variant_pods(cluster, namespace, deployment)
    real = [p for p in pods if p["spec"].get("nodeName") == NODE_NAME]
    return len(real) >= count and len(real) == len(pods) and all(pod_ready(p) for p in real)
