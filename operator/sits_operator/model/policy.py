"""Typed view of a SitsPolicy (crds/sitspolicy.yaml): SLI rules and what to do on gaps."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from sits_operator.model.durations import parse_duration


class Comparison(StrEnum):
    """The rule is breached when `sample <comparison> reference` holds."""

    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


class ActionType(StrEnum):
    ROLLBACK = "rollback"
    SET_WEIGHT = "setWeight"
    PAUSE = "pause"
    HOLD = "hold"


class CompareTo(StrEnum):
    THRESHOLD = "threshold"
    STABLE = "stable"


class NoDataAction(StrEnum):
    HOLD = "hold"
    PAUSE = "pause"
    ROLLBACK = "rollback"


class ErrorAction(StrEnum):
    FREEZE = "freeze"
    PAUSE = "pause"


@dataclass(frozen=True)
class RuleAction:
    type: ActionType
    weight: int | None = None


@dataclass(frozen=True)
class Rule:
    name: str
    sli: str
    query: str
    window_seconds: float
    comparison: Comparison
    action: RuleAction
    threshold: float | None = None
    compare_to: CompareTo = CompareTo.THRESHOLD
    tolerance: float = 0.0
    # Exactly one of these is set; neither means "one period".
    for_periods: int | None = None
    for_seconds: float | None = None
    min_requests: int | None = None


@dataclass(frozen=True)
class Policy:
    name: str
    interval_seconds: float
    min_requests: int
    rules: tuple[Rule, ...]
    no_data_action: NoDataAction = NoDataAction.HOLD
    no_data_after_seconds: float = 600.0
    on_error: ErrorAction = ErrorAction.FREEZE
    promotion_consecutive_passes: int = 3

    def min_requests_for(self, rule: Rule) -> int:
        return self.min_requests if rule.min_requests is None else rule.min_requests


def _rule(raw: dict[str, Any]) -> Rule:
    for_ = raw.get("for") or {}
    action = raw["action"]
    return Rule(
        name=raw["name"],
        sli=raw["sli"],
        query=raw["query"],
        window_seconds=parse_duration(raw.get("window", "5m")),
        comparison=Comparison(raw["comparison"]),
        action=RuleAction(ActionType(action["type"]), action.get("weight")),
        threshold=None if raw.get("threshold") is None else float(raw["threshold"]),
        compare_to=CompareTo(raw.get("compareTo", "threshold")),
        tolerance=float(raw.get("tolerance", 0.0)),
        for_periods=for_.get("periods"),
        for_seconds=parse_duration(for_["duration"]) if for_.get("duration") else None,
        min_requests=raw.get("minRequests"),
    )


def parse_policy(name: str, spec: dict[str, Any]) -> Policy:
    """Build a Policy from a SitsPolicy spec (server-side defaults already applied)."""
    no_data = spec.get("noData") or {}
    return Policy(
        name=name,
        interval_seconds=parse_duration(spec.get("interval", "1m")),
        min_requests=int(spec.get("minRequests", 20)),
        rules=tuple(_rule(r) for r in spec["rules"]),
        no_data_action=NoDataAction(no_data.get("action", "hold")),
        no_data_after_seconds=parse_duration(no_data.get("after", "10m")),
        on_error=ErrorAction((spec.get("onError") or {}).get("action", "freeze")),
        promotion_consecutive_passes=int((spec.get("promotion") or {}).get("consecutivePasses", 3)),
    )
