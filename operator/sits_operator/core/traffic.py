"""What traffic really does: decided weights vs. the weights the gateway pods apply.

Pure. For router builtin the operator writes the weights it decided to
`status.traffic.weights` (the gateway follows those), asks every ready gateway pod which
weights it applies (adapters/gateway.py, /sits/v1/routing), and shows in
`status.variants[].weight` the weights the pods report once all of them report the same.
A gateway that still has not applied the decided weights GRACE_SECONDS after the
decision turns TrafficApplied False (reason GatewayBehind), so `kubectl get sitsd` never
shows a split that traffic does not follow without saying so. Time comes in as a number
(the reconciler's injected wall clock), never from a clock read here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sits_operator.model.observed import GatewayReport
from sits_operator.model.spec import RouterKind
from sits_operator.model.status import ConditionReason

# The gateway watches the SitsDeployment: a status write reaches it within a second. Five
# seconds without the decided weights means it is stuck (API access, a crashed watch...).
GRACE_SECONDS = 5.0
# While the gateway lags, look again this often: its catching up raises no watch event.
RECHECK_SECONDS = 5.0


@dataclass(frozen=True)
class TrafficView:
    """The traffic part of a new status.

    field: `status.traffic`; shown: the weights for `status.variants[].weight`;
    condition: (status, reason, message) of TrafficApplied, None to leave it as it was
    (or, for routers without read-back, to drop it); recheck_in: seconds after which a
    reconcile should look again, None when nothing is pending.
    """

    field: dict[str, Any]
    shown: dict[str, int]
    condition: tuple[bool, str, str] | None
    recheck_in: float | None


def to_timestamp(seconds: float) -> str:
    """RFC 3339 with milliseconds: a grace period of seconds needs sub-second times."""
    moment = datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def from_timestamp(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def weight_rows(weights: Mapping[str, int]) -> list[dict[str, Any]]:
    return [{"variant": name, "weight": weight} for name, weight in weights.items()]


def _rows_weights(rows: object) -> dict[str, int]:
    if not isinstance(rows, list):
        return {}
    return {
        str(r["variant"]): int(r.get("weight") or 0)
        for r in rows
        if isinstance(r, dict) and "variant" in r
    }


def decided_at(previous: Mapping[str, Any], decided: Mapping[str, int], now: float) -> float:
    """When these weights were decided: kept while they stay the same, else now."""
    if _rows_weights(previous.get("weights")) == dict(decided):
        kept = from_timestamp(str(previous.get("decidedAt") or ""))
        if kept is not None:
            return kept
    return now


def agreed_weights(reports: Sequence[GatewayReport]) -> dict[str, int] | None:
    """The weights every ready gateway pod reports, when they all answered the same;
    None when there is no pod, one did not answer, or two differ (mid-change)."""
    if not reports or any(r.weights is None for r in reports):
        return None
    first = reports[0].weights
    return dict(first) if first is not None and all(r.weights == first for r in reports) else None


def _describe(weights: Mapping[str, int]) -> str:
    return ", ".join(f"{name}={weight}" for name, weight in weights.items()) or "none"


def _lag_message(
    reports: Sequence[GatewayReport], decided: Mapping[str, int], since: float
) -> tuple[str, str]:
    """(reason, message) of a gateway that does not apply the decided weights."""
    age = f"decided {since:.0f} s ago"
    if not reports:
        return (
            ConditionReason.GATEWAY_UNAVAILABLE,
            f"no ready gateway pod applies the decided weights ({_describe(decided)}, {age})",
        )
    behind = [r for r in reports if r.weights != dict(decided)]
    parts = [
        f"pod {r.pod}: {r.error}" if r.weights is None else f"pod {r.pod}: {_describe(r.weights)}"
        for r in behind
    ]
    head = (
        f"{len(reports) - len(behind)} of {len(reports)} ready gateway pods apply the decided "
        f"weights ({_describe(decided)}, {age})"
    )
    return ConditionReason.GATEWAY_BEHIND, f"{head}; " + "; ".join(parts)


def traffic_view(
    *,
    router: RouterKind,
    decided: Mapping[str, int],
    previous: Mapping[str, Any],
    reports: Sequence[GatewayReport] | None,
    now: float,
) -> TrafficView:
    """status.traffic, the weights to show, and TrafficApplied, for one pass.

    Routers without read-back (gatewayAPI reads its HTTPRoute in the analysis step, none
    has nothing to read) show the decided weights. For builtin the shown weights are the
    agreed reported ones; without agreement, the decided ones, and the condition says
    they are not applied (after the grace period; before it, it stays as it was).
    """
    since = decided_at(previous, decided, now)
    field: dict[str, Any] = {
        "router": router.value,
        "weights": weight_rows(decided),
        "decidedAt": to_timestamp(since),
    }
    if router is not RouterKind.BUILTIN or reports is None:
        return TrafficView(field, dict(decided), None, None)
    applied = [r for r in reports if r.weights == dict(decided)]
    field["gatewayPods"], field["gatewayPodsApplied"] = len(reports), len(applied)
    agreed = agreed_weights(reports)
    shown = agreed if agreed is not None else dict(decided)
    if reports and len(applied) == len(reports):
        message = f"{len(reports)} of {len(reports)} ready gateway pods apply the decided weights"
        return TrafficView(field, shown, (True, ConditionReason.WEIGHTS_APPLIED, message), None)
    elapsed = now - since
    if elapsed < GRACE_SECONDS:
        # Left as it was (absent on a first status): turning False only once the grace
        # period is over makes that turn a change, hence a Warning event.
        return TrafficView(field, shown, None, GRACE_SECONDS - elapsed + 0.1)
    reason, message = _lag_message(reports, decided, elapsed)
    return TrafficView(field, shown, (False, reason, message), RECHECK_SECONDS)
