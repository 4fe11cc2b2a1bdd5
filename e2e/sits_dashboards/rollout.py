"""Dashboard 1, rollout overview: one SitsDeployment's phase, weights and SLIs.

Variables: ``namespace`` and ``sits_deployment`` (label values of the request metrics;
the operator's ``sits_rollout_*`` gauges carry the same two labels), and ``source``:
which proxy's series the SLIs read, as ``spec.analysis.source`` does.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash_b

from . import parts
from .parts import FULL_WIDTH, HALF, THIRD, Query
from .policy import Policy

UID = "sits-rollout-overview"
TITLE = "SITS / Rollout overview"

ROLLOUT = 'namespace="$namespace", sits_deployment="$sits_deployment"'
REQUESTS = 'namespace="$namespace", sits_deployment="$sits_deployment", source="$source"'
SUCCESS_SLI = "success_rate_5m"
LATENCY_SLI = "latency_p95_ms"


def variables() -> list[parts.Variable]:
    return [
        parts.datasource_variable(),
        parts.label_variable("namespace", "Namespace", "sits_requests_total", "namespace"),
        parts.label_variable(
            "sits_deployment",
            "SitsDeployment",
            'sits_requests_total{namespace="$namespace"}',
            "sits_deployment",
        ),
        parts.choice_variable("source", "Metric source", ["gateway", "sidecar"]),
    ]


def annotation_queries() -> list[dict[str, object]]:
    return [
        parts.prometheus_annotation(
            "Phase changes",
            f"(sits_rollout_phase{{{ROLLOUT}}} == 1)"
            f" and (changes(sits_rollout_phase{{{ROLLOUT}}}[1m]) > 0)",
            "purple",
            title="Phase {{phase}}",
            text="SitsDeployment {{namespace}}/{{sits_deployment}} entered {{phase}}",
        ),
        parts.prometheus_annotation(
            "Decisions (all SitsDeployments)",
            "sum by (action, trigger) (increase(sits_operator_decisions_total[1m])) > 0",
            "orange",
            title="Decision {{action}}",
            text="{{action}} (trigger {{trigger}}); the counter is operator-wide: "
            "kubectl sits or status.analysis.history names the SitsDeployment",
        ),
    ]


def build(policy: Policy) -> dash_b.Dashboard:
    success = policy.rule(SUCCESS_SLI)
    latency = policy.rule(LATENCY_SLI)
    weight = f"sum by (variant) (sits_rollout_weight{{{ROLLOUT}}})"
    dashboard = (
        dash_b.Dashboard(TITLE)
        .uid(UID)
        .description(
            "One SitsDeployment: phase, traffic weight per variant, and the "
            f"{policy.name} SLIs per variant with the policy's thresholds."
        )
        .tags(["sits", "rollout"])
        .time("now-3h", "now")
        .refresh("30s")
        .tooltip(parts.CROSSHAIR)
        .variables(variables())
        .with_row(parts.row("Rollout"))
        .with_panel(
            parts.stat(
                "Phase",
                "status.phase of the SitsDeployment (sits_rollout_phase == 1).",
                [Query(f"sits_rollout_phase{{{ROLLOUT}}} == 1", "{{phase}}")],
                unit="none",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "Traffic weight per variant",
                "Percent of the SitsDeployment's traffic on each variant "
                "(status.variants[].weight, sits_rollout_weight).",
                [Query(weight, "{{variant}}")],
                unit="percent",
                width=FULL_WIDTH - THIRD,
                max_value=100,
                stacked=True,
            )
        )
        .with_panel(
            parts.state_timeline(
                "Phase history",
                "Which phase the SitsDeployment was in (sits_rollout_phase == 1).",
                [Query(f"sits_rollout_phase{{{ROLLOUT}}} == 1", "{{phase}}")],
            )
        )
        .with_row(parts.row(f"SLIs ({policy.name}, source $source)"))
        .with_panel(
            parts.timeseries(
                f"Success rate per variant ({success.sli})",
                f"The policy's rule {success.name}: {success.sli} {success.comparison} "
                f"{success.threshold:g} -> {success.action} (dashed line: the threshold).",
                [Query(success.query, "{{variant}}")],
                unit="percentunit",
                max_value=1,
                threshold_line=("red", [(success.threshold, "green")]),
            )
        )
        .with_panel(
            parts.timeseries(
                f"p95 latency per variant ({latency.sli})",
                f"The policy's rule {latency.name}: {latency.sli} {latency.comparison} "
                f"{latency.threshold:g} ms -> {latency.action} (dashed line: the threshold).",
                [Query(latency.query, "{{variant}}")],
                unit="ms",
                threshold_line=("green", [(latency.threshold, "red")]),
            )
        )
        .with_panel(
            parts.timeseries(
                f"Requests per variant in the rule window (minRequests {policy.min_requests})",
                "What the operator's minimum-traffic check counts: a variant under "
                "minRequests in the window has no verdict (dashed line).",
                [
                    Query(
                        f"sum by (variant) (increase(sits_requests_total{{{REQUESTS}}}"
                        f"[{success.window}]))",
                        "{{variant}}",
                    )
                ],
                unit="short",
                threshold_line=("orange", [(float(policy.min_requests), "green")]),
            )
        )
        .with_panel(
            parts.timeseries(
                "Errors per variant by code",
                "Requests counted as errors (5xx, 429, timeouts, connection failures), per second.",
                [
                    Query(
                        f"sum by (variant, code) (rate(sits_requests_total{{{REQUESTS}, "
                        f'outcome="error"}}[$__rate_interval]))',
                        "{{variant}} {{code}}",
                    )
                ],
                unit="reqps",
            )
        )
        .with_row(parts.row("Operator"))
        .with_panel(
            parts.timeseries(
                "Analysis decisions (all SitsDeployments)",
                "sits_operator_decisions_total by action and trigger: the counter carries "
                "no SitsDeployment label.",
                [
                    Query(
                        "sum by (action, trigger) "
                        "(increase(sits_operator_decisions_total[$__rate_interval]))",
                        "{{action}} ({{trigger}})",
                    )
                ],
                unit="short",
                width=HALF,
                bars=True,
            )
        )
        .with_panel(
            parts.timeseries(
                "Request rate per variant",
                "Requests per second per variant, every outcome.",
                [
                    Query(
                        f"sum by (variant) (rate(sits_requests_total{{{REQUESTS}}}"
                        "[$__rate_interval]))",
                        "{{variant}}",
                    )
                ],
                unit="reqps",
                width=HALF,
            )
        )
    )
    return dashboard
