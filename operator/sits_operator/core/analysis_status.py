"""Turn an analysis Decision into status fields and condition inputs.

The words (the Analysis condition, where the rollout stands) are core/rollout_summary.py's;
this module only picks the inputs a reconcile pass (handlers/reconcile.py) has at hand.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from sits_operator.core.rollout_plan import build_plan
from sits_operator.core.rollout_summary import AnalysisCondition, pending_summary, summarize
from sits_operator.core.rollout_summary import analysis_condition as judged_condition
from sits_operator.model.analysis import AnalysisState, Decision, RuleSamples
from sits_operator.model.durations import format_duration
from sits_operator.model.observed import ObservedState
from sits_operator.model.policy import Policy
from sits_operator.model.spec import SitsDeploymentSpec
from sits_operator.model.status import RolloutSummary

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


def analysis_fields(decision: Decision, candidate: str | None, now: float) -> dict[str, Any]:
    return {
        "analysis": decision.state.to_dict(),
        "slis": sli_rows(decision, now),
        **candidate_columns(decision, candidate),
    }


def commands_pending(state: AnalysisState, commands: dict[Any, str]) -> bool:
    return any(state.acknowledged.get(c.value) != value for c, value in commands.items())


def analysis_condition(
    decision: Decision,
    spec: SitsDeploymentSpec,
    observed: ObservedState,
    policy: Policy,
    observations: tuple[RuleSamples, ...],
) -> AnalysisCondition | None:
    """The Analysis condition after an evaluation (None: keep it as it was)."""
    return judged_condition(decision, build_plan(spec, observed), policy, observations)


def rollout_summary(
    state: AnalysisState,
    spec: SitsDeploymentSpec,
    observed: ObservedState,
    policy: Policy,
    *,
    evaluated: bool = True,
) -> RolloutSummary:
    """Where the rollout stands; `evaluated` False for a revision no evaluation saw yet."""
    if not evaluated:
        return pending_summary(policy)
    return summarize(state, build_plan(spec, observed), policy)
