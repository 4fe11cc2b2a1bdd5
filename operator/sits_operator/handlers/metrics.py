"""The operator's own Prometheus metrics: everything it decides is counted."""

from __future__ import annotations

from enum import StrEnum

from prometheus_client import Counter, Histogram


class ReconcileResult(StrEnum):
    """Values of sits_operator_reconciles_total's `result` label."""

    OK = "ok"
    ERROR = "error"


RECONCILES = Counter("sits_operator_reconciles_total", "Reconcile passes by result.", ["result"])
CHILD_WRITES = Counter(
    "sits_operator_child_writes_total",
    "Server-side applies and deletes of owned objects.",
    ["kind", "action"],
)
STATUS_WRITES = Counter(
    "sits_operator_status_writes_total", "Status subresource writes (skipped when unchanged)."
)
PHASE_TRANSITIONS = Counter(
    "sits_operator_phase_transitions_total", "Phase changes by new phase.", ["phase"]
)
RECONCILE_SECONDS = Histogram(
    "sits_operator_reconcile_duration_seconds",
    "Wall time of one reconcile pass.",
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5),
)
DECISIONS = Counter(
    "sits_operator_decisions_total",
    "Analysis decisions by action and what triggered them (event reason, or period).",
    ["action", "trigger"],
)
EVALUATION_SECONDS = Histogram(
    "sits_operator_evaluation_duration_seconds",
    "Wall time of one analysis evaluation (queries included).",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
PROMETHEUS_ERRORS = Counter(
    "sits_operator_prometheus_errors_total", "Rule queries that failed (Error verdicts)."
)
