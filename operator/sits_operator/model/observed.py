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
    # naming.Component of a Deployment that is no variant's (the gateway); "" for variants.
    component: str = ""


@dataclass(frozen=True)
class ContainerTermination:
    """How a container last ended (status.containerStatuses[].lastState.terminated).

    With terminationMessagePolicy FallbackToLogsOnError the kubelet puts the last lines
    of the container's log into `message` when it fails, so a bad vLLM argument reaches
    the SitsDeployment's conditions without anyone reading pod logs.
    """

    exit_code: int
    reason: str = ""
    message: str = ""
    finished_at: str = ""


@dataclass(frozen=True)
class ObservedContainer:
    """What the kubelet reports of one container: restarts, why it waits, how it ended."""

    name: str
    restart_count: int = 0
    ready: bool = False
    waiting_reason: str | None = None
    waiting_message: str | None = None
    last_termination: ContainerTermination | None = None


@dataclass(frozen=True)
class ObservedPod:
    """Scheduling and container state of one pod.

    PodScheduled=False carries the scheduler's reason; `containers` the kubelet's view.
    """

    name: str
    variant: str
    phase: str
    unschedulable_message: str | None = None
    node_name: str | None = None
    containers: tuple[ObservedContainer, ...] = ()
    # The gateway's pods: component "gateway"; their address and readiness say which
    # pods the operator asks for the weights they apply (core/traffic.py).
    component: str = ""
    ip: str | None = None
    ready: bool = False

    @property
    def restarts(self) -> int:
        return sum(c.restart_count for c in self.containers)


@dataclass(frozen=True)
class ObservedState:
    """Everything observed about one SitsDeployment's children."""

    children: tuple[ObservedChild, ...] = ()
    deployments: tuple[ObservedDeployment, ...] = ()
    pods: tuple[ObservedPod, ...] = field(default=())

    def deployment(self, variant: str) -> ObservedDeployment | None:
        return next((d for d in self.deployments if d.variant == variant and not d.component), None)

    def pods_of(self, variant: str) -> tuple[ObservedPod, ...]:
        return tuple(p for p in self.pods if p.variant == variant and not p.component)

    def component_pods(self, component: str) -> tuple[ObservedPod, ...]:
        return tuple(p for p in self.pods if p.component == component)

    def component_deployment(self, component: str) -> ObservedDeployment | None:
        return next((d for d in self.deployments if d.component == component), None)


@dataclass(frozen=True)
class GatewayReport:
    """What one ready gateway pod answered on /sits/v1/routing: the weights it applies.

    `weights` is None when the pod did not answer in time or answered nonsense; `error`
    then says why (the TrafficApplied condition quotes it).
    """

    pod: str
    weights: dict[str, int] | None
    error: str = ""
    origin: dict[str, object] = field(default_factory=dict)
