"""Containers that cannot run, and container restarts, from the kubelet's container statuses.

Why: a candidate started with a bad vLLM argument never turns ready, so it gets weight 0
(status.effective_weights), but nothing on the SitsDeployment would say why. The kubelet
knows (CrashLoopBackOff, ImagePullBackOff, CreateContainerConfigError, ...) and, with
`terminationMessagePolicy: FallbackToLogsOnError`, keeps the last lines vLLM logged before
it exited. This module turns that into one condition message that names the variant, pod,
container, exit code and those last lines, so `kubectl describe sitsd` tells the story.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from sits_operator.core.naming import Component
from sits_operator.model.analysis import VariantFailure
from sits_operator.model.observed import ObservedContainer, ObservedPod, ObservedState
from sits_operator.model.spec import SitsDeploymentSpec
from sits_operator.model.status import ConditionReason

# A traceback's last lines say what failed; a condition message is read on one screen.
MESSAGE_TAIL_CHARS = 400
# The analysis quotes a failure in its reason, the rollback event and history: shorter.
ANALYSIS_TAIL_CHARS = 200
# metav1.Condition's reason format (the CRD's pattern for status.conditions[].reason).
_CONDITION_REASON = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


class StartingReason(StrEnum):
    """Waiting reasons of a container on its way up: every other waiting reason is a failure.

    Listing the benign reasons rather than the failing ones keeps reasons added by future
    kubelets (or by container runtimes) visible instead of silently ignored.
    """

    CONTAINER_CREATING = "ContainerCreating"
    POD_INITIALIZING = "PodInitializing"


_STARTING = frozenset(StartingReason)


@dataclass(frozen=True)
class FailingContainer:
    """One container the kubelet cannot keep running, with where it is."""

    variant: str
    pod: str
    container: ObservedContainer

    @property
    def reason(self) -> str:
        return self.container.waiting_reason or ""


def is_failing(container: ObservedContainer) -> bool:
    """Waiting for any reason but starting up: crash loops, image and config errors."""
    reason = container.waiting_reason
    return bool(reason) and reason not in _STARTING


def _failing_in(owner: str, pods: tuple[ObservedPod, ...]) -> list[FailingContainer]:
    return [
        FailingContainer(owner, pod.name, c)
        for pod in sorted(pods, key=lambda p: p.name)
        for c in sorted(pod.containers, key=lambda c: c.name)
        if is_failing(c)
    ]


def failing_containers(spec: SitsDeploymentSpec, observed: ObservedState) -> list[FailingContainer]:
    """Failing containers in spec order of variants, then the gateway's (variant ""), each
    by pod and container name. A gateway that cannot pull its image shows here, while
    the variants' pods keep running untouched."""
    found: list[FailingContainer] = []
    for variant in spec.variants:
        found += _failing_in(variant.name, observed.pods_of(variant.name))
    return found + _failing_in("", observed.component_pods(Component.GATEWAY.value))


def variant_restarts(observed: ObservedState, variant: str) -> int:
    """Container restarts summed over the variant's current pods (what kubectl shows)."""
    return sum(pod.restarts for pod in observed.pods_of(variant))


def tail(text: str, limit: int = MESSAGE_TAIL_CHARS) -> str:
    """The end of a log excerpt on one line: lines joined by " | ", cut from the front."""
    joined = " | ".join(line.strip() for line in text.splitlines() if line.strip())
    return joined if len(joined) <= limit else "..." + joined[-(limit - 3) :]


def _detail(container: ObservedContainer) -> str:
    """Exit code and last words when it ran and died; else what the kubelet says."""
    ended = container.last_termination
    if ended is None:
        return tail(container.waiting_message or "")
    how = f"exit code {ended.exit_code}"
    if ended.reason:
        how += f" ({ended.reason})"
    if ended.finished_at:
        how += f" at {ended.finished_at}"
    last_words = tail(ended.message)
    return f"{how}: {last_words}" if last_words else how


def describe(failure: FailingContainer) -> str:
    """`variant v2 pod chat-v2-x container vllm: CrashLoopBackOff after 3 restarts, ...`."""
    container = failure.container
    where = f"variant {failure.variant}" if failure.variant else Component.GATEWAY.value
    head = f"{where} pod {failure.pod} container {container.name}: "
    head += failure.reason
    if container.restart_count:
        head += f" after {container.restart_count} restart(s)"
    detail = _detail(container)
    return f"{head}, {detail}" if detail else head


def failing_message(failures: list[FailingContainer]) -> str:
    """The first failure of each variant in full; how many more there are, in numbers."""
    parts: list[str] = []
    for variant in dict.fromkeys(f.variant for f in failures):
        mine = [f for f in failures if f.variant == variant]
        part = describe(mine[0])
        if len(mine) > 1:
            part += f" (and {len(mine) - 1} more failing container(s) in {variant or 'gateway'})"
        parts.append(part)
    return "; ".join(parts)


def failing_reason(failures: list[FailingContainer]) -> str:
    """The kubelet's own reason (e.g. CrashLoopBackOff) of the first failure."""
    if not failures:
        return ConditionReason.NO_CONTAINER_FAILING
    reason = failures[0].reason
    return reason if _CONDITION_REASON.match(reason) else ConditionReason.CONTAINER_FAILING


def _briefly(failure: FailingContainer) -> str:
    """`pod chat-v2-x container vllm, 3 restart(s), exit code 1: <last words>`, shorter
    than `describe` (no reason of the exit, no timestamp): it goes into a rollback's reason,
    its event and the history, beside the rule's name and period count."""
    container = failure.container
    parts = [f"pod {failure.pod} container {container.name}"]
    if container.restart_count:
        parts.append(f"{container.restart_count} restart(s)")
    ended = container.last_termination
    if ended is not None:
        parts.append(f"exit code {ended.exit_code}")
    words = tail((ended.message if ended else container.waiting_message) or "", ANALYSIS_TAIL_CHARS)
    said = ", ".join(parts)
    return f"{said}: {words}" if words else said


def variant_failures(
    spec: SitsDeploymentSpec, observed: ObservedState
) -> tuple[VariantFailure, ...]:
    """Each variant with failing containers, for the analysis (the gateway's are not a
    variant's): `CrashLoopBackOff (pod ..., 3 restart(s), exit code 1: ...)`."""
    found: list[VariantFailure] = []
    for variant in spec.variants:
        mine = _failing_in(variant.name, observed.pods_of(variant.name))
        if not mine:
            continue
        first = mine[0]
        more = f"; and {len(mine) - 1} more failing container(s)" if len(mine) > 1 else ""
        detail = f"{first.reason} ({_briefly(first)}{more})"
        found.append(VariantFailure(variant.name, first.reason, detail, len(mine)))
    return tuple(found)
