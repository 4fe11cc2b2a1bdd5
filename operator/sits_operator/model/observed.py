"""What the operator reads back from the cluster, reduced to what decisions need.

Handlers build these from Kopf indexes (watch caches); the core only ever sees these
small immutable values, never raw API objects, which keeps the core testable by tables.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class ObservedChild:
    """A Deployment or Service owned by a SitsDeployment."""

    kind: str
    name: str
    variant: str | None
    template_hash: str | None
    resource_version: str = ""


@dataclass(frozen=True)
class ObservedDeployment:
    """Rollout progress of one variant's Deployment (from its status)."""

    variant: str
    revision: str | None
    replicas: int
    ready_replicas: int
    updated_replicas: int
    available_replicas: int
    generation: int
    observed_generation: int


@dataclass(frozen=True)
class ObservedPod:
    """Scheduling state of one pod; PodScheduled=False carries the scheduler's reason."""

    name: str
    variant: str
    phase: str
    unschedulable_message: str | None = None
    node_name: str | None = None


@dataclass(frozen=True)
class ObservedState:
    """Everything observed about one SitsDeployment's children."""

    children: tuple[ObservedChild, ...] = ()
    deployments: tuple[ObservedDeployment, ...] = ()
    pods: tuple[ObservedPod, ...] = field(default=())

    def deployment(self, variant: str) -> ObservedDeployment | None:
        return next((d for d in self.deployments if d.variant == variant), None)

    def pods_of(self, variant: str) -> tuple[ObservedPod, ...]:
        return tuple(p for p in self.pods if p.variant == variant)
