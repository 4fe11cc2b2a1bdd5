"""Values of the analysis loop: samples in, verdicts and decisions out, state persisted.

`AnalysisState` is stored in `status.analysis` (camelCase via to_dict/from_dict) so that
a restarted operator resumes exactly where the last one stopped: counters, the last
evaluated period, and the weights it decided.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

HISTORY_LIMIT = 20


class Verdict(StrEnum):
    PASS = "Pass"
    FAIL = "Fail"
    NO_DATA = "NoData"
    ERROR = "Error"


class AnalysisPhase(StrEnum):
    PROGRESSING = "Progressing"  # candidate under analysis, stepping up
    PAUSED = "Paused"  # stopped by a rule, the no-data policy, an error policy, or by hand
    PROMOTING = "Promoting"  # all steps passed; candidate taking all traffic
    SUCCEEDED = "Succeeded"  # candidate at 100 %: terminal until a new revision
    ROLLED_BACK = "RolledBack"  # all traffic on stable: terminal until new revision or retry
    DEGRADED = "Degraded"  # analysis impossible (e.g. the policy is missing)


class Command(StrEnum):
    """Manual control through annotations sits.dev/<command>."""

    PROMOTE = "promote"
    ABORT = "abort"
    PAUSE = "pause"
    RESUME = "resume"
    RETRY = "retry"


@dataclass(frozen=True)
class Sample:
    """One variant's value for one rule in one period, with the requests behind it."""

    value: float | None
    requests: float | None = None

    @property
    def is_number(self) -> bool:
        return self.value is not None and not math.isnan(self.value) and not math.isinf(self.value)


@dataclass(frozen=True)
class RuleSamples:
    """Result of one rule's query for every variant; `error` when the query failed."""

    rule: str
    by_variant: dict[str, Sample] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True)
class RolloutPlan:
    """What the spec says about this rollout, reduced for the engine."""

    stable: str
    candidates: tuple[str, ...]
    revision_key: str  # changes when any candidate's revision (or the set) changes
    strategy: str  # "canary" | "abTest"
    initial_weights: dict[str, int]
    # Candidate weight per step; a None entry is a pause step (duration in pause_seconds).
    step_weights: tuple[int | None, ...]
    pause_seconds: tuple[float | None, ...]
    candidates_ready: bool = True


@dataclass(frozen=True)
class RuleVerdict:
    rule: str
    sli: str
    variant: str
    verdict: Verdict
    value: float | None
    window_seconds: float


@dataclass(frozen=True)
class Breach:
    """Progress of one rule toward its action: consecutive failing periods, or since when."""

    periods: int = 0
    since: float | None = None


@dataclass(frozen=True)
class HistoryEntry:
    at: float
    action: str
    reason: str
    weights: dict[str, int]


@dataclass(frozen=True)
class AnalysisState:
    phase: AnalysisPhase = AnalysisPhase.PROGRESSING
    revision_key: str = ""
    weights: dict[str, int] = field(default_factory=dict)
    step_index: int = 0
    step_started_at: float | None = None
    consecutive_passes: int = 0
    breaches: dict[str, Breach] = field(default_factory=dict)
    no_data_since: float | None = None
    error_since: float | None = None
    last_period: int | None = None  # floor(evaluated_at / interval) of the last counted period
    last_evaluated_at: float | None = None
    paused_reason: str = ""
    acknowledged: dict[str, str] = field(default_factory=dict)  # command -> annotation value
    last_action: str = ""
    last_reason: str = ""
    history: tuple[HistoryEntry, ...] = ()

    def with_history(self, entry: HistoryEntry) -> AnalysisState:
        return replace(self, history=(*self.history, entry)[-HISTORY_LIMIT:])

    def to_dict(self) -> dict[str, Any]:
        return {
            "phase": self.phase.value,
            "revisionKey": self.revision_key,
            "weights": dict(self.weights),
            "stepIndex": self.step_index,
            "stepStartedAt": self.step_started_at,
            "consecutivePasses": self.consecutive_passes,
            "breaches": {
                k: {"periods": b.periods, "since": b.since}
                for k, b in sorted(self.breaches.items())
            },
            "noDataSince": self.no_data_since,
            "errorSince": self.error_since,
            "lastPeriod": self.last_period,
            "lastEvaluatedAt": self.last_evaluated_at,
            "pausedReason": self.paused_reason,
            "acknowledged": dict(self.acknowledged),
            "lastAction": self.last_action,
            "lastReason": self.last_reason,
            "history": [
                {"at": h.at, "action": h.action, "reason": h.reason, "weights": dict(h.weights)}
                for h in self.history
            ],
        }

    @classmethod
    def from_dict(cls, raw: dict[str, Any] | None) -> AnalysisState:
        if not raw:
            return cls()
        return cls(
            phase=AnalysisPhase(raw.get("phase", AnalysisPhase.PROGRESSING.value)),
            revision_key=str(raw.get("revisionKey", "")),
            weights={str(k): int(v) for k, v in (raw.get("weights") or {}).items()},
            step_index=int(raw.get("stepIndex", 0)),
            step_started_at=raw.get("stepStartedAt"),
            consecutive_passes=int(raw.get("consecutivePasses", 0)),
            breaches={
                str(k): Breach(int(v.get("periods", 0)), v.get("since"))
                for k, v in (raw.get("breaches") or {}).items()
            },
            no_data_since=raw.get("noDataSince"),
            error_since=raw.get("errorSince"),
            last_period=raw.get("lastPeriod"),
            last_evaluated_at=raw.get("lastEvaluatedAt"),
            paused_reason=str(raw.get("pausedReason", "")),
            acknowledged={str(k): str(v) for k, v in (raw.get("acknowledged") or {}).items()},
            last_action=str(raw.get("lastAction", "")),
            last_reason=str(raw.get("lastReason", "")),
            history=tuple(
                HistoryEntry(
                    float(h["at"]),
                    str(h["action"]),
                    str(h["reason"]),
                    {str(k): int(v) for k, v in (h.get("weights") or {}).items()},
                )
                for h in raw.get("history") or []
            ),
        )


@dataclass(frozen=True)
class EventNote:
    type: str  # Normal | Warning
    reason: str
    message: str


@dataclass(frozen=True)
class Decision:
    """Everything one evaluation decided. `weights` is None when traffic stays as it is."""

    state: AnalysisState
    action: str
    reason: str
    weights: dict[str, int] | None = None
    verdicts: tuple[RuleVerdict, ...] = ()
    events: tuple[EventNote, ...] = ()
