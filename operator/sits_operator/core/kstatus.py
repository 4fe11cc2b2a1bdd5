"""Ready, Reconciling and Stalled: the conditions that tools read for health.

kstatus (sigs.k8s.io/cli-utils, used by Flux and kpt) reads a custom resource as
InProgress while `status.observedGeneration` is behind or `Reconciling` is True, Failed
while `Stalled` is True, and Current otherwise; tools that only look at `Ready` (Flux's
health expressions, several kstatus forks) need `Ready` False in both cases. So exactly
one of the three holds: Ready True (at rest), Reconciling True (converging) or Stalled
True (cannot progress without someone's help).

Stalled covers what waiting alone will not fix: an invalid spec, a rollback (terminal
until a new revision or sits.dev/retry), and a blocker that has lasted STALL_AFTER_SECONDS
(no GPU slice, a crash-looping container, a missing SitsPolicy, Prometheus failing, a
gateway that does not apply the weights). Before that deadline the same blocker is only
Reconciling: a Deployment waits its progressDeadlineSeconds the same way.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from sits_operator.core.conditions import find, set_condition
from sits_operator.model.status import Condition, ConditionReason, ConditionType, Phase

# Deployment's default progressDeadlineSeconds: long enough for an image pull of a vLLM
# image or a slice freed by another rollout, short enough to page before a shift ends.
STALL_AFTER_SECONDS = 600.0

# Conditions that block progress in the given status (and, for Analysis, with one of the
# given reasons: NoData is the policy's business, its noData.action decides).
_BLOCKERS: tuple[tuple[ConditionType, str, frozenset[str] | None], ...] = (
    (ConditionType.UNSCHEDULABLE, "True", None),
    (ConditionType.CONTAINERS_FAILING, "True", None),
    (
        ConditionType.ANALYSIS,
        "False",
        frozenset({ConditionReason.POLICY_NOT_FOUND, ConditionReason.METRICS_ERROR}),
    ),
    (ConditionType.TRAFFIC_APPLIED, "False", None),
)

# Phases of a rollout still on its way (Paused too: its desired state, an analysed
# candidate, is not reached; Argo CD's check shows it as Suspended).
_MOVING = {
    Phase.PROGRESSING: ConditionReason.ROLLOUT_PROGRESSING,
    Phase.PROMOTING: ConditionReason.PROMOTING,
    Phase.PAUSED: ConditionReason.PAUSED,
    Phase.PENDING: ConditionReason.ANALYSIS_PENDING,
    Phase.DEGRADED: ConditionReason.ANALYSIS_DEGRADED,
}


class Standing(StrEnum):
    CURRENT = "Current"
    RECONCILING = "Reconciling"
    STALLED = "Stalled"


@dataclass(frozen=True)
class Health:
    standing: Standing
    reason: str
    message: str
    # Seconds until a young blocker turns Stalled (the reconciler looks again then).
    recheck_in: float | None = None


def assess(
    conds: Iterable[Condition], *, phase: Phase, pending: str, message: str, now: float
) -> Health:
    """The one standing that holds, with its reason; `message` is the status message."""
    conds = list(conds)
    invalid = find(conds, ConditionType.INVALID)
    if invalid is not None and invalid.status == "True":
        return Health(Standing.STALLED, ConditionReason.INVALID_SPEC, invalid.message)
    if phase is Phase.ROLLED_BACK:
        return Health(Standing.STALLED, ConditionReason.ROLLED_BACK, message)
    blocker = _oldest_blocker(conds)
    if blocker is not None:
        age = _age(blocker, now)
        if age is not None and age >= STALL_AFTER_SECONDS:
            since = f"{blocker.type} since {blocker.last_transition_time}"
            return Health(Standing.STALLED, blocker.reason, f"{since}: {blocker.message}")
        left = None if age is None else STALL_AFTER_SECONDS - age
        return Health(Standing.RECONCILING, blocker.reason, blocker.message or message, left)
    if pending:
        return Health(Standing.RECONCILING, ConditionReason.VARIANTS_NOT_READY, message)
    if phase in _MOVING:
        return Health(Standing.RECONCILING, _MOVING[phase], message)
    succeeded = phase is Phase.SUCCEEDED
    reason = ConditionReason.SUCCEEDED if succeeded else ConditionReason.ALL_VARIANTS_READY
    return Health(Standing.CURRENT, reason, message)


def apply(conds: list[Condition], health: Health, *, now: str, generation: int) -> list[Condition]:
    """Set Ready, Reconciling and Stalled from one assessment (exactly one is True).

    Ready always carries the reason and message (True or False: why it is, or is not, at
    rest); the other two carry them only while True.
    """
    standing = health.standing
    calm = {
        ConditionType.RECONCILING: health.reason,
        ConditionType.STALLED: ConditionReason.NOT_STALLED,
    }
    for type_, holds in (
        (ConditionType.READY, standing is Standing.CURRENT),
        (ConditionType.RECONCILING, standing is Standing.RECONCILING),
        (ConditionType.STALLED, standing is Standing.STALLED),
    ):
        speaks = holds or type_ == ConditionType.READY
        conds = set_condition(
            conds,
            type_=type_,
            status=holds,
            reason=health.reason if speaks else calm[type_],
            message=health.message if speaks else "",
            now=now,
            generation=generation,
        )
    return conds


def _oldest_blocker(conds: list[Condition]) -> Condition | None:
    """The blocker that has lasted longest (it stalls first); None when none blocks."""
    found = [
        cond
        for type_, bad, reasons in _BLOCKERS
        if (cond := find(conds, type_)) is not None
        and cond.status == bad
        and (reasons is None or cond.reason in reasons)
    ]
    return min(found, key=lambda c: c.last_transition_time, default=None)


def _age(cond: Condition, now: float) -> float | None:
    """Seconds since the condition last flipped; None when its time cannot be read."""
    try:
        since = datetime.fromisoformat(cond.last_transition_time).timestamp()
    except ValueError:
        return None
    return now - since
