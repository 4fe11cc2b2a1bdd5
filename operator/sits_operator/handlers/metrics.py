"""The operator's own Prometheus metrics: everything it decides is counted.

Beside the operator-wide counters, three gauges per SitsDeployment, labelled `namespace`
and `sits_deployment` as the request metrics are (so an alert names the rollout the way the
alert receiver reads it, and rules can join them with the SLIs): `sits_rollout_phase` is 1
for the current phase and 0 for every other (kube-state-metrics' style, so
`sits_rollout_phase{phase="RolledBack"} == 1` is the alert), `sits_rollout_weight` the
traffic share of each variant as status shows it, and `sits_rollout_candidate` 1 for a
variant that is a candidate under analysis (0 otherwise): the chart's candidate alert joins
on it, so an SLO alert routed to the operator's webhook fires on candidates only. All are
removed when the SitsDeployment goes.
"""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import suppress
from enum import StrEnum
from typing import Any

from prometheus_client import Counter, Gauge, Histogram

from sits_operator.model.spec import Role
from sits_operator.model.status import ANALYSING, Phase


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
# Queries per period = the increase over one interval. Batched queries answer for every
# SitsDeployment of a namespace (adapters/prometheus_batch.py), so their rate does not grow
# with the number of SitsDeployments; unbatched ones (templates without {{by}}) do.
PROMETHEUS_QUERIES = Counter(
    "sits_operator_prometheus_queries_total",
    "Queries sent to a SitsPolicy's Prometheus, by policy and whether batched.",
    ["policy", "batched"],
)
EVALUATION_LAG = Histogram(
    "sits_operator_evaluation_lag_seconds",
    "Seconds from an analysis period being due (just after it starts) to the end of the "
    "pass that decided it (weights set, status written).",
    buckets=(0.05, 0.1, 0.25, 0.5, 0.75, 1, 1.5, 2, 3, 5, 10, 30),
)


def observe_lag(due_at: float, now: float) -> None:
    """Record a period's lag; due_at 0 is a loop's first pass (no period was due)."""
    if due_at > 0:
        EVALUATION_LAG.observe(max(now - due_at, 0.0))


def count_query(policy: str, batched: bool) -> None:
    """The Prometheus adapter's hook for every query it sends."""
    PROMETHEUS_QUERIES.labels(policy, "true" if batched else "false").inc()


# Leader election (handlers/leadership.py): 1 while this process may act, 0 while it
# follows; every change of its role, by the role it changed to.
LEADER = Gauge("sits_operator_leader", "1 while this operator process is the leader, else 0.")
LEADER_TRANSITIONS = Counter(
    "sits_operator_leader_transitions_total",
    "Changes of this process's role: became the leader (to=leader), stepped down (to=follower).",
    ["to"],
)

# What the watches of the child kinds deliver (handlers/watching.py): selected="false" is an
# object the apiserver should have kept back (0 while the server-side selectors are on).
WATCH_EVENTS = Counter(
    "sits_operator_watch_events_total",
    "Watch events (initial listing included) of the child kinds, by resource and whether the "
    "object carried the operator's labels.",
    ["resource", "selected"],
)

ROLLOUT_PHASE = Gauge(
    "sits_rollout_phase",
    "1 for the SitsDeployment's current status.phase, 0 for the others.",
    ["namespace", "sits_deployment", "phase"],
)
ROLLOUT_WEIGHT = Gauge(
    "sits_rollout_weight",
    "Percent of the SitsDeployment's traffic on a variant (status.variants[].weight).",
    ["namespace", "sits_deployment", "variant"],
)
ROLLOUT_CANDIDATE = Gauge(
    "sits_rollout_candidate",
    "1 while the variant is a candidate under analysis (phase Progressing, Paused or "
    "Promoting), else 0.",
    ["namespace", "sits_deployment", "variant"],
)

# Per SitsDeployment: the variants it has a weight series for (a variant removed from the
# spec loses its series).
_weighted: dict[tuple[str, str], frozenset[str]] = {}


def observe_rollout(namespace: str, name: str, status: Mapping[str, Any]) -> None:
    """Set both gauges from a computed status (every pass, written or not: a restarted
    operator fills them on its first pass)."""
    current = status.get("phase")
    for phase in Phase:
        ROLLOUT_PHASE.labels(namespace, name, phase.value).set(1 if phase.value == current else 0)
    rows = status.get("variants")
    if rows is None:
        return  # an invalid spec shows no variants: keep the last weights
    weights = {str(row["name"]): float(row.get("weight") or 0) for row in rows}
    for gone in _weighted.get((namespace, name), frozenset()) - weights.keys():
        ROLLOUT_WEIGHT.remove(namespace, name, gone)
        ROLLOUT_CANDIDATE.remove(namespace, name, gone)
    analysing = current in ANALYSING
    for row in rows:
        variant = str(row["name"])
        ROLLOUT_WEIGHT.labels(namespace, name, variant).set(weights[variant])
        candidate = analysing and row.get("role") == Role.CANDIDATE.value
        ROLLOUT_CANDIDATE.labels(namespace, name, variant).set(1 if candidate else 0)
    _weighted[(namespace, name)] = frozenset(weights)


def forget_rollout(namespace: str, name: str) -> None:
    """Remove every series of a SitsDeployment that is gone."""
    for phase in Phase:
        _remove(ROLLOUT_PHASE, namespace, name, phase.value)
    for variant in _weighted.pop((namespace, name), frozenset()):
        _remove(ROLLOUT_WEIGHT, namespace, name, variant)
        _remove(ROLLOUT_CANDIDATE, namespace, name, variant)


def _remove(gauge: Gauge, *labels: str) -> None:
    with suppress(KeyError):  # never set (the loop stopped before its first pass)
        gauge.remove(*labels)
