"""Turn Kopf watch-cache entries into the core's Observed* values.

The index functions of handlers/operator.py call these on every watch event of a child;
they keep only what the core needs, so the caches stay small even with hundreds of
SitsDeployments.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sits_operator.core import naming
from sits_operator.model.observed import (
    ContainerTermination,
    ObservedChild,
    ObservedContainer,
    ObservedDeployment,
    ObservedPod,
    ObservedState,
)

#: A SitsDeployment as its children's watch events name it: (namespace, name). The key of
#: the watch caches here and of the wake-up signals (handlers/wakeups.py).
ParentKey = tuple[str, str]


def parent_key(namespace: str | None, labels: Mapping[str, str]) -> ParentKey | None:
    parent = labels.get(naming.LABEL_DEPLOYMENT)
    if namespace is None or parent is None:
        return None
    return (namespace, parent)


def child_entry(kind: str, meta: Mapping[str, Any], labels: Mapping[str, str]) -> ObservedChild:
    annotations = meta.get("annotations") or {}
    return ObservedChild(
        kind=kind,
        name=str(meta.get("name")),
        variant=labels.get(naming.LABEL_VARIANT),
        template_hash=annotations.get(naming.ANNOTATION_TEMPLATE_HASH),
        resource_version=str(meta.get("resourceVersion", "")),
    )


def deployment_entry(
    meta: Mapping[str, Any], labels: Mapping[str, str], status: Mapping[str, Any]
) -> ObservedDeployment:
    return ObservedDeployment(
        variant=labels.get(naming.LABEL_VARIANT, ""),
        revision=labels.get(naming.LABEL_REVISION),
        replicas=int(status.get("replicas") or 0),
        ready_replicas=int(status.get("readyReplicas") or 0),
        updated_replicas=int(status.get("updatedReplicas") or 0),
        available_replicas=int(status.get("availableReplicas") or 0),
        generation=int(meta.get("generation") or 0),
        observed_generation=int(status.get("observedGeneration") or 0),
        component=labels.get(naming.LABEL_COMPONENT, ""),
    )


def termination_entry(terminated: Mapping[str, Any] | None) -> ContainerTermination | None:
    """A container's state.terminated or lastState.terminated; None when absent."""
    if not terminated:
        return None
    return ContainerTermination(
        exit_code=int(terminated.get("exitCode") or 0),
        reason=str(terminated.get("reason") or ""),
        message=str(terminated.get("message") or ""),
        finished_at=str(terminated.get("finishedAt") or ""),
    )


def container_entry(raw: Mapping[str, Any]) -> ObservedContainer:
    """One containerStatuses[] item.

    The termination worth showing is the latest: the current state's while the container
    lies dead (before its restart), else the previous run's (lastState), which is what a
    container in CrashLoopBackOff carries.
    """
    state = raw.get("state") or {}
    waiting = state.get("waiting") or {}
    ended = termination_entry(state.get("terminated"))
    if ended is None:
        ended = termination_entry((raw.get("lastState") or {}).get("terminated"))
    return ObservedContainer(
        name=str(raw.get("name") or ""),
        restart_count=int(raw.get("restartCount") or 0),
        ready=bool(raw.get("ready")),
        waiting_reason=waiting.get("reason"),
        waiting_message=waiting.get("message"),
        last_termination=ended,
    )


def pod_entry(
    name: str, labels: Mapping[str, str], spec: Mapping[str, Any], status: Mapping[str, Any]
) -> ObservedPod:
    message = None
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            message = str(cond.get("message") or cond.get("reason") or "unschedulable")
    return ObservedPod(
        name=name,
        variant=labels.get(naming.LABEL_VARIANT, ""),
        phase=str(status.get("phase") or "Pending"),
        unschedulable_message=message,
        node_name=spec.get("nodeName"),
        containers=tuple(container_entry(c) for c in status.get("containerStatuses") or []),
        component=labels.get(naming.LABEL_COMPONENT, ""),
        ip=status.get("podIP") or None,
        ready=any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        ),
    )


def _entries(index: Mapping[ParentKey, Iterable[Any]], key: ParentKey) -> tuple[Any, ...]:
    return tuple(index.get(key, ()))


def observed_state(
    key: ParentKey,
    *,
    children: Mapping[ParentKey, Iterable[ObservedChild]],
    deployments: Mapping[ParentKey, Iterable[ObservedDeployment]],
    pods: Mapping[ParentKey, Iterable[ObservedPod]],
) -> ObservedState:
    return ObservedState(
        children=_entries(children, key),
        deployments=_entries(deployments, key),
        pods=_entries(pods, key),
    )
