"""Fake GPU nodes, sized like the NVIDIA GPU operator's ``mixed`` MIG strategy.

The operator under test schedules inference pods by MIG profile (extended resources such as
``nvidia.com/mig-2g.20gb``). The real kube-scheduler does that binding; kwok only pretends to
be the kubelet. So the nodes must carry the same labels and allocatable that the GPU
operator's device plugin and GPU feature discovery would publish. Tests and docs import
:data:`GPU_NODES` rather than repeating the numbers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

KWOK_ANNOTATION_KEY = "kwok.x-k8s.io/node"
KWOK_ANNOTATION_VALUE = "fake"
#: Passed to the kwok controller so that it manages exactly these nodes and nothing else.
KWOK_NODE_SELECTOR = f"{KWOK_ANNOTATION_KEY}={KWOK_ANNOTATION_VALUE}"

#: What every fake node has besides its GPU slices.
BASE_RESOURCES: dict[str, str] = {"cpu": "64", "memory": "512Gi", "pods": "110"}


@dataclass(frozen=True)
class GpuNodeSpec:
    """One fake GPU node: a name, the GPU model's labels and its MIG slices."""

    name: str
    product: str
    memory_mib: int
    mig_profiles: dict[str, int]
    extra_labels: dict[str, str] = field(default_factory=dict)

    @property
    def labels(self) -> dict[str, str]:
        """Labels GPU feature discovery sets for the ``mixed`` strategy, plus ``type=kwok``."""
        return {
            "kubernetes.io/hostname": self.name,
            "kubernetes.io/os": "linux",
            "kubernetes.io/arch": "amd64",
            "type": "kwok",
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": self.product,
            "nvidia.com/gpu.memory": str(self.memory_mib),
            "nvidia.com/mig.strategy": "mixed",
            "nvidia.com/mig.config": "all-balanced",
            **self.extra_labels,
        }

    @property
    def resources(self) -> dict[str, str]:
        """Capacity and allocatable (identical: nothing is reserved on a fake node)."""
        resources = dict(BASE_RESOURCES)
        resources.update({f"nvidia.com/{p}": str(n) for p, n in self.mig_profiles.items()})
        return resources

    def manifest(self) -> dict[str, Any]:
        """The Node object; status is included because a Node keeps status given on create."""
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": self.name,
                "labels": self.labels,
                "annotations": {KWOK_ANNOTATION_KEY: KWOK_ANNOTATION_VALUE},
            },
            # No taints: pods of the operator under test must land here without tolerations.
            "spec": {},
            "status": self.status_patch()["status"],
        }

    def status_patch(self) -> dict[str, Any]:
        """A merge patch for the status subresource, re-applied by every ``up()``."""
        return {"status": {"capacity": self.resources, "allocatable": self.resources}}


A100_MIG_PROFILES: dict[str, int] = {"mig-1g.10gb": 2, "mig-2g.20gb": 1, "mig-3g.40gb": 1}
H200_MIG_PROFILES: dict[str, int] = {"mig-1g.18gb": 2, "mig-2g.35gb": 1, "mig-3g.71gb": 1}

GPU_NODES: tuple[GpuNodeSpec, ...] = (
    GpuNodeSpec("gpu-a100-0", "NVIDIA-A100-SXM4-80GB", 81920, A100_MIG_PROFILES),
    GpuNodeSpec("gpu-a100-1", "NVIDIA-A100-SXM4-80GB", 81920, A100_MIG_PROFILES),
    GpuNodeSpec("gpu-h200-0", "NVIDIA-H200", 143771, H200_MIG_PROFILES),
)


def nodes_by_name() -> dict[str, GpuNodeSpec]:
    """Index of :data:`GPU_NODES`, for tests that look a scheduled pod's node up."""
    return {spec.name: spec for spec in GPU_NODES}


def nodes_manifest_json() -> str:
    """All nodes as one ``v1/List``, the input of a single ``kubectl apply``."""
    items = [spec.manifest() for spec in GPU_NODES]
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": items})
