"""Values of the analysis loop: samples in, verdicts and decisions out, state persisted.

`AnalysisState` is stored in `status.analysis` (camelCase via to_dict/from_dict) so that
a restarted operator resumes exactly where the last one stopped: counters, the last
evaluated period, and the weights it decided.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Any

from sits_operator.model.durations import parse_duration
from sits_operator.model.events import EventReason
from sits_operator.model.spec import (
    API_GROUP,
    DEFAULT_SCALE_DOWN_DELAY,
    DEFAULT_STARTUP_TIMEOUT,
    Role,
)

HISTORY_LIMIT = 20
# The progress deadline is the candidates' startupTimeout plus this: the kubelet's startup
# budget (the startup probe) starts when the container does, after scheduling and the pull
# of a vLLM image of about 10 GB (some 3 minutes at 50 MB/s), which it does not count.
PROGRESS_DEADLINE_ALLOWANCE_SECONDS = 300.0


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


class DecisionAction(StrEnum):
    """What one evaluation did: `Decision.action`, `status.analysis.lastAction` and
    `history[].action`, and the `action` label of `sits_operator_decisions_total`.

    A policy prescribes (model/policy.py: a rule's `ActionType`, `NoDataAction`,
    `ErrorAction`); the analysis decides, and a prescription carried out is recorded as
    the decision of the same word, so each of those values is also a member here
    (tests/unit/test_decision_action.py). The rest are the analysis' own moves.
    """

    RESTART = "restart"  # a fresh analysis: a new revision, or sits.dev/retry
    STEP = "step"  # the next weight step
    PROMOTE = "promote"  # candidates to 100 % (Promoting), then Succeeded
    ROLLBACK = "rollback"  # all traffic to stable (RolledBack)
    SET_WEIGHT = "setWeight"  # a rule's weight cut
    PAUSE = "pause"  # stopped until sits.dev/resume
    RESUME = "resume"  # back to Progressing
    HOLD = "hold"  # nothing moves this period
    FREEZE = "freeze"  # nothing moves: the SLI queries fail (onError.action freeze)
    ADOPT = "adopt"  # the spec now states the terminal outcome: its key taken over
    SCALE_DOWN = "scaleDown"  # the terminal decision's losers to zero replicas
    NONE = "none"  # not evaluated (period already evaluated, terminal) or command ignored


def command_annotation(command: Command) -> str:
    """`sits.dev/<command>`: the operator's annotations are in its API group's domain."""
    return f"{API_GROUP}/{command.value}"


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
class VariantRevision:
    """One variant's part of a revision key: what it is called, its role, what it serves."""

    name: str
    role: Role
    revision: str


def format_revision_key(variants: Iterable[VariantRevision]) -> str:
    """`name:role:revision,...`: names are DNS labels and revisions match
    [A-Za-z0-9-_.] (the CRD's patterns), so neither separator can occur inside a part."""
    return ",".join(f"{v.name}:{v.role.value}:{v.revision}" for v in variants)


def parse_revision_key(key: str) -> tuple[VariantRevision, ...] | None:
    """The variants of a key written by format_revision_key; None for anything else
    (an empty key, or one stored by an operator that wrote opaque keys)."""
    parsed = []
    for part in key.split(",") if key else ():
        fields = part.split(":")
        if len(fields) != 3 or fields[1] not in {r.value for r in Role}:
            return None
        parsed.append(VariantRevision(fields[0], Role(fields[1]), fields[2]))
    return tuple(parsed) or None


@dataclass(frozen=True)
class VariantFailure:
    """A variant with containers the kubelet cannot keep running, as the analysis sees it.

    `detail` is already one short line (pod, container, restarts, exit code, the tail of
    the last log lines), so reasons and events quote it as it is.
    """

    variant: str
    reason: str  # the kubelet's waiting reason of the first one, e.g. CrashLoopBackOff
    detail: str
    containers: int = 1


@dataclass(frozen=True)
class RolloutPlan:
    """What the spec says about this rollout, reduced for the engine."""

    stable: str
    candidates: tuple[str, ...]
    revision_key: str  # format_revision_key of every variant: what is under analysis
    strategy: str  # "canary" | "abTest"
    initial_weights: dict[str, int]
    # Candidate weight per step; a None entry is a pause step (duration in pause_seconds).
    step_weights: tuple[int | None, ...]
    pause_seconds: tuple[float | None, ...]
    # Candidates that should run but have no ready pod yet (core/rollout_plan.py).
    unready: tuple[str, ...] = ()
    # Variants (stable too) with failing containers: a candidate's count as failing periods
    # of the built-in containers rule; a stable's hold the analysis.
    failing: tuple[VariantFailure, ...] = ()
    # How long a candidate may stay unready before it is rolled back (ProgressDeadlineExceeded).
    progress_deadline_seconds: float = (
        parse_duration(DEFAULT_STARTUP_TIMEOUT) + PROGRESS_DEADLINE_ALLOWANCE_SECONDS
    )
    # spec.rollout.interval: the least time a weight step lasts (None: the policy decides).
    step_seconds: float | None = None
    # spec.rollout.scaleDownDelay: how long a variant left without traffic by a terminal
    # phase keeps its pods before it is scaled to zero.
    scale_down_seconds: float = parse_duration(DEFAULT_SCALE_DOWN_DELAY)

    @property
    def candidates_ready(self) -> bool:
        """Every candidate that should run has at least one ready pod."""
        return not self.unready

    def failure_of(self, variant: str) -> VariantFailure | None:
        return next((f for f in self.failing if f.variant == variant), None)


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
    action: DecisionAction
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
    last_action: DecisionAction | None = None
    last_reason: str = ""
    history: tuple[HistoryEntry, ...] = ()
    # When the phase became Succeeded or RolledBack: the scale-down delay counts from here.
    finished_at: float | None = None
    # Variants scaled to zero replicas after the terminal decision (the losers).
    scaled_down: tuple[str, ...] = ()
    # Since when a candidate that should run has had no ready pod (the progress deadline).
    unready_since: float | None = None

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
            "lastAction": self.last_action.value if self.last_action else "",
            "lastReason": self.last_reason,
            "history": [
                {
                    "at": h.at,
                    "action": h.action.value,
                    "reason": h.reason,
                    "weights": dict(h.weights),
                }
                for h in self.history
            ],
            "finishedAt": self.finished_at,
            "scaledDown": list(self.scaled_down),
            "unreadySince": self.unready_since,
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
            last_action=DecisionAction(raw["lastAction"]) if raw.get("lastAction") else None,
            last_reason=str(raw.get("lastReason", "")),
            history=tuple(
                HistoryEntry(
                    float(h["at"]),
                    DecisionAction(str(h["action"])),
                    str(h["reason"]),
                    {str(k): int(v) for k, v in (h.get("weights") or {}).items()},
                )
                for h in raw.get("history") or []
            ),
            finished_at=raw.get("finishedAt"),
            scaled_down=tuple(str(name) for name in raw.get("scaledDown") or ()),
            unready_since=raw.get("unreadySince"),
        )


@dataclass(frozen=True)
class EventNote:
    type: str  # Normal | Warning
    reason: EventReason
    message: str


@dataclass(frozen=True)
class Decision:
    """Everything one evaluation decided. `weights` is None when traffic stays as it is."""

    state: AnalysisState
    action: DecisionAction
    reason: str
    weights: dict[str, int] | None = None
    verdicts: tuple[RuleVerdict, ...] = ()
    events: tuple[EventNote, ...] = ()
