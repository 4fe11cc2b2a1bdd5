"""Event vocabulary: the reasons of the Kubernetes Events the operator posts.

Why an enum: an Event's reason is an interface. `kubectl get events --field-selector
reason=RolledBack`, alert rules, the webhooks' `events` filters (model/notifications.py)
and the notification kinds (core/notifications.py `classify`) all match on it, so each
reason is spelled once, here, and every function that posts an event takes an
`EventReason`, never a free string.

An event reason is not a condition reason (model/status.py `ConditionReason`), nor a
phase: where the words are the same ("Paused", "RolledBack", "ReferenceGrantMissing")
the values are equal strings, but each enum keeps its own concept.
"""

from __future__ import annotations

from enum import StrEnum

from sits_operator.model.status import ConditionType


class EventReason(StrEnum):
    """The reason of every Kubernetes Event the operator posts on a SitsDeployment."""

    # Analysis decisions (core/analysis; notification kind "decision").
    ANALYSIS_STARTED = "AnalysisStarted"  # the first revision's analysis
    ANALYSIS_RESTARTED = "AnalysisRestarted"  # a new candidate revision
    RETRY = "Retry"  # restarted by sits.dev/retry
    PROMOTION_COMMITTED = "PromotionCommitted"  # the spec now states the promotion
    ROLLBACK_COMMITTED = "RollbackCommitted"  # the spec now states the rollback
    STEP = "Step"
    WEIGHT_CUT = "WeightCut"  # a rule's setWeight action
    PAUSED = "Paused"  # Normal by hand (sits.dev/pause), Warning by the policy
    RESUMED = "Resumed"
    PROMOTING = "Promoting"  # candidates at 100 %, one more healthy period to go
    PROMOTED = "Promoted"
    ROLLED_BACK = "RolledBack"
    PROGRESS_DEADLINE_EXCEEDED = "ProgressDeadlineExceeded"  # a rollback: never got ready
    SCALED_DOWN = "ScaledDown"  # the terminal decision's losers at zero replicas
    COMMAND_IGNORED = "CommandIgnored"  # a sits.dev/<command> with nothing to do
    NO_DATA = "NoData"  # SLI data missing past noData.after
    ANALYSIS_ERROR = "AnalysisError"  # SLI queries started failing
    ANALYSIS_RECOVERED = "AnalysisRecovered"  # ... and answer again
    # Alert-driven rollback (adapters/alert_webhook.py).
    ALERT_ROLLBACK = "AlertRollback"
    ALERT_IGNORED = "AlertIgnored"
    # The reconciler (handlers/reconcile.py, handlers/operator.py).
    PHASE_CHANGED = "PhaseChanged"  # notification kind "phase"
    APPLIED = "Applied"  # owned objects written; notification kind "children"
    DELETED = "Deleted"  # ... and deleted
    REFERENCE_GRANT_MISSING = "ReferenceGrantMissing"  # router gatewayAPI may not write
    RECONCILE_FAILED = "ReconcileFailed"  # a pass failed; the loop retries after a backoff
    # A condition flipped: "<type><status>" (`condition_flipped`; kind "condition").
    READY_TRUE = "ReadyTrue"
    READY_FALSE = "ReadyFalse"
    PROGRESSING_TRUE = "ProgressingTrue"
    PROGRESSING_FALSE = "ProgressingFalse"
    INVALID_TRUE = "InvalidTrue"
    INVALID_FALSE = "InvalidFalse"
    UNSCHEDULABLE_TRUE = "UnschedulableTrue"
    UNSCHEDULABLE_FALSE = "UnschedulableFalse"
    CONTAINERS_FAILING_TRUE = "ContainersFailingTrue"
    CONTAINERS_FAILING_FALSE = "ContainersFailingFalse"
    ANALYSIS_TRUE = "AnalysisTrue"
    ANALYSIS_FALSE = "AnalysisFalse"
    TRAFFIC_APPLIED_TRUE = "TrafficAppliedTrue"
    TRAFFIC_APPLIED_FALSE = "TrafficAppliedFalse"
    RECONCILING_TRUE = "ReconcilingTrue"
    RECONCILING_FALSE = "ReconcilingFalse"
    STALLED_TRUE = "StalledTrue"
    STALLED_FALSE = "StalledFalse"


def condition_flipped(type_: str, status: str) -> EventReason:
    """The reason of the event for a condition that turned `status` (True or False, the
    only statuses the operator sets): ReadyFalse, TrafficAppliedTrue..."""
    return EventReason(f"{type_}{status}")


#: Every condition flip's reason (the notification kind "condition").
CONDITION_FLIPS = frozenset(
    condition_flipped(kind.value, status) for kind in ConditionType for status in ("True", "False")
)
