"""Turn an analysis Decision into status fields and condition inputs."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from sits_operator.model.analysis import AnalysisState, Decision, Verdict
from sits_operator.model.durations import format_duration

SUCCESS_SLI = "success_rate_5m"
LATENCY_SLI = "latency_p95_ms"


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def finite(value: float | None) -> float | None:
    """JSON has no NaN or infinity (Prometheus returns NaN for 0/0): those become null."""
    return value if value is not None and math.isfinite(value) else None


def sli_rows(decision: Decision, now: float) -> list[dict[str, Any]]:
    return [
        {
            "variant": v.variant,
            "name": v.sli,
            "value": finite(v.value),
            "window": format_duration(v.window_seconds),
            "observedAt": iso(now),
            "verdict": v.verdict.value,
        }
        for v in decision.verdicts
    ]


def candidate_columns(decision: Decision, candidate: str | None) -> dict[str, Any]:
    """The printer columns SUCCESS and P95MS: the first candidate's latest samples."""
    columns: dict[str, Any] = {}
    for verdict in decision.verdicts:
        if verdict.variant != candidate or finite(verdict.value) is None:
            continue
        assert verdict.value is not None
        if verdict.sli == SUCCESS_SLI:
            columns["candidateSuccessRate"] = round(verdict.value, 4)
        elif verdict.sli == LATENCY_SLI:
            columns["candidateLatencyP95Ms"] = round(verdict.value, 1)
    return columns


def analysis_condition(decision: Decision, candidates: tuple[str, ...]) -> tuple[bool, str, str]:
    """Healthy when every candidate verdict had data; otherwise say what is missing."""
    mine = [v for v in decision.verdicts if v.variant in candidates]
    errors = [v for v in mine if v.verdict is Verdict.ERROR]
    if errors:
        return (
            False,
            "MetricsError",
            f"query failed for {', '.join(sorted({v.rule for v in errors}))}; rollout frozen",
        )
    no_data = [v for v in mine if v.verdict is Verdict.NO_DATA]
    if no_data:
        rules = ", ".join(sorted({v.rule for v in no_data}))
        return False, "NoData", f"no valid sample for {rules}; rollout holding"
    return True, "Evaluating", decision.reason


def analysis_fields(decision: Decision, candidate: str | None, now: float) -> dict[str, Any]:
    return {
        "analysis": decision.state.to_dict(),
        "slis": sli_rows(decision, now),
        **candidate_columns(decision, candidate),
    }


def commands_pending(state: AnalysisState, commands: dict[Any, str]) -> bool:
    return any(state.acknowledged.get(c.value) != value for c, value in commands.items())
