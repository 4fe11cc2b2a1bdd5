"""Status vocabulary: phases, condition types and reasons shared by core and handlers."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Phase(StrEnum):
    PENDING = "Pending"
    PROGRESSING = "Progressing"
    READY = "Ready"
    PAUSED = "Paused"
    PROMOTING = "Promoting"
    SUCCEEDED = "Succeeded"
    ROLLED_BACK = "RolledBack"
    DEGRADED = "Degraded"
    INVALID = "Invalid"


#: The phases in which a candidate is under analysis or being promoted: what an abort (a
#: manual one or an alert's) acts on, and what `sits_rollout_candidate` reports.
ANALYSING = frozenset({Phase.PROGRESSING, Phase.PAUSED, Phase.PROMOTING})


class ConditionType(StrEnum):
    READY = "Ready"
    PROGRESSING = "Progressing"
    INVALID = "Invalid"
    UNSCHEDULABLE = "Unschedulable"
    CONTAINERS_FAILING = "ContainersFailing"
    ANALYSIS = "Analysis"
    # Router builtin: do the gateway pods apply the decided weights (core/traffic.py)?
    # Router gatewayAPI: False while the operator may not write the HTTPRoute.
    TRAFFIC_APPLIED = "TrafficApplied"
    # kstatus (sigs.k8s.io/cli-utils kstatus, Flux, Argo CD's Lua check): the operator is
    # still converging (True: InProgress), or cannot progress without help (True: Failed).
    RECONCILING = "Reconciling"
    STALLED = "Stalled"


# Conditions whose True means something is wrong ("abnormal-true", like Unschedulable):
# turning True is a Warning event (Reconciling is abnormal-true too, but a rollout that
# converges is normal: it is QUIET instead).
ABNORMAL_TRUE = frozenset(
    {
        ConditionType.INVALID,
        ConditionType.UNSCHEDULABLE,
        ConditionType.CONTAINERS_FAILING,
        ConditionType.STALLED,
    }
)

# Conditions whose flips get no event of their own: PhaseChanged already tells them.
QUIET = frozenset({ConditionType.PROGRESSING, ConditionType.RECONCILING})


# Conditions whose False means something is wrong: turning False is a Warning event.
ABNORMAL_FALSE = frozenset({ConditionType.TRAFFIC_APPLIED})


class ConditionReason(StrEnum):
    """Reasons the operator itself gives; a failing container's reason is the kubelet's."""

    INVALID_SPEC = "InvalidSpec"
    SPEC_VALID = "SpecValid"
    INSUFFICIENT_GPU_RESOURCES = "InsufficientGPUResources"
    SCHEDULED = "Scheduled"
    NO_CONTAINER_FAILING = "NoContainerFailing"
    # When the kubelet's waiting reason is not a valid condition reason (never seen so far).
    CONTAINER_FAILING = "ContainerFailing"
    VARIANTS_NOT_READY = "VariantsNotReady"
    ALL_VARIANTS_READY = "AllVariantsReady"
    ROLLING_OUT = "RollingOut"
    ROLLOUT_COMPLETE = "RolloutComplete"
    WEIGHTS_APPLIED = "WeightsApplied"
    GATEWAY_BEHIND = "GatewayBehind"
    GATEWAY_UNAVAILABLE = "GatewayUnavailable"
    # An HTTPRoute in another namespace without a ReferenceGrant (core/reference_grant.py).
    REFERENCE_GRANT_MISSING = "ReferenceGrantMissing"
    # Analysis condition (core/analysis_status.py, handlers/reconcile.py).
    POLICY_NOT_FOUND = "PolicyNotFound"
    METRICS_ERROR = "MetricsError"
    NO_DATA = "NoData"
    EVALUATING = "Evaluating"
    # Ready, Reconciling and Stalled (core/kstatus.py); a blocker's own reason otherwise.
    SUCCEEDED = "Succeeded"
    ROLLED_BACK = "RolledBack"
    ROLLOUT_PROGRESSING = "RolloutProgressing"
    PROMOTING = "Promoting"
    PAUSED = "Paused"
    ANALYSIS_PENDING = "AnalysisPending"
    ANALYSIS_DEGRADED = "AnalysisDegraded"
    NOT_STALLED = "NotStalled"


@dataclass(frozen=True)
class Condition:
    """A Kubernetes-convention condition (metav1.Condition)."""

    type: str
    status: str
    reason: str
    message: str
    last_transition_time: str
    observed_generation: int = 0

    def to_dict(self) -> dict[str, object]:
        return {
            "type": self.type,
            "status": self.status,
            "reason": self.reason,
            "message": self.message,
            "lastTransitionTime": self.last_transition_time,
            "observedGeneration": self.observed_generation,
        }

    @classmethod
    def from_dict(cls, raw: dict[str, object]) -> Condition:
        gen = raw.get("observedGeneration", 0)
        return cls(
            type=str(raw.get("type", "")),
            status=str(raw.get("status", "Unknown")),
            reason=str(raw.get("reason", "")),
            message=str(raw.get("message", "")),
            last_transition_time=str(raw.get("lastTransitionTime", "")),
            observed_generation=gen if isinstance(gen, int) else 0,
        )


@dataclass(frozen=True)
class RolloutSummary:
    """Where an analysed rollout stands, in words (core/rollout_summary.py).

    `position` says where traffic is ("step 2 of 4 at 40 %", "paused at ...", "rolled
    back: all traffic on v1"); `progress` what the next move waits for ("1 of 3 passing
    periods before step 3"). Both come from the stored analysis state only, never from
    the clock of the pass, so recomputing them between evaluations changes nothing and
    the reconciler's unchanged-status check still skips the write.
    """

    phase: Phase
    position: str
    progress: str

    @property
    def text(self) -> str:
        return f"{self.position}: {self.progress}" if self.progress else self.position
