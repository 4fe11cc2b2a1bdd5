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


class ConditionType(StrEnum):
    READY = "Ready"
    PROGRESSING = "Progressing"
    INVALID = "Invalid"
    UNSCHEDULABLE = "Unschedulable"
    ANALYSIS = "Analysis"


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
