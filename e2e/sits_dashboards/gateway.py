"""Dashboard 3, gateway and vLLM: what clients see at the gateway beside what vLLM does.

Gateway panels read the request metrics with ``source="gateway"``. vLLM's own ``vllm:*``
series (names of the vLLM release the project pins, 0.32.0: ``vllm:kv_cache_usage_perc``
replaced ``vllm:gpu_cache_usage_perc``) come from the ``vllm`` container's port, which
the chart's PodMonitor does not scrape: the operator annotates every variant pod with
``sits.dev/vllm-metrics-port`` for a scrape job of its own. They are selected by the
target labels ``namespace`` and ``pod``, like the sidecar's.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash_b

from . import parts
from .parts import HALF, THIRD, Query

UID = "sits-gateway-vllm"
TITLE = "SITS / Gateway and vLLM"

GATEWAY = 'namespace="$namespace", sits_deployment="$sits_deployment", source="gateway"'
GATEWAY_OWN = 'namespace="$namespace", sits_deployment="$sits_deployment"'
VLLM = 'namespace="$namespace", pod=~"$pod"'
RATE = "[$__rate_interval]"


def variables() -> list[parts.Variable]:
    return [
        parts.datasource_variable(),
        parts.label_variable(
            "namespace", "Namespace", 'sits_requests_total{source="gateway"}', "namespace"
        ),
        parts.label_variable(
            "sits_deployment",
            "SitsDeployment",
            'sits_requests_total{namespace="$namespace", source="gateway"}',
            "sits_deployment",
        ),
        parts.label_variable(
            "pod",
            "vLLM pod",
            'vllm:num_requests_running{namespace="$namespace", pod=~"$sits_deployment-.+"}',
            "pod",
            multi=True,
        ),
    ]


def quantile(q: float, metric: str, selector: str, by: str, legend: str) -> Query:
    return Query(
        f"histogram_quantile({q}, sum by ({by}, le) (rate({metric}_bucket{{{selector}}}{RATE})))",
        legend,
    )


def build() -> dash_b.Dashboard:
    return (
        dash_b.Dashboard(TITLE)
        .uid(UID)
        .description(
            "The A/B gateway of a SitsDeployment (request rate, latency and TTFT by "
            "variant) beside its vLLM pods' own vllm:* series."
        )
        .tags(["sits", "gateway", "vllm"])
        .time("now-3h", "now")
        .refresh("30s")
        .tooltip(parts.CROSSHAIR)
        .variables(variables())
        .with_row(parts.row("Gateway (source=gateway)"))
        .with_panel(
            parts.timeseries(
                "Gateway request rate by variant",
                "Requests per second the gateway sent to each variant, by outcome.",
                [
                    Query(
                        f"sum by (variant, outcome) (rate(sits_requests_total{{{GATEWAY}}}{RATE}))",
                        "{{variant}} {{outcome}}",
                    )
                ],
                unit="reqps",
                width=THIRD,
                stacked=True,
            )
        )
        .with_panel(
            parts.timeseries(
                "Gateway latency by variant (p50, p95)",
                "Receipt to last byte, as seen by the gateway.",
                [
                    quantile(
                        0.5,
                        "sits_request_duration_seconds",
                        GATEWAY,
                        "variant",
                        "{{variant}} p50",
                    ),
                    quantile(
                        0.95,
                        "sits_request_duration_seconds",
                        GATEWAY,
                        "variant",
                        "{{variant}} p95",
                    ),
                ],
                unit="s",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "Gateway time to first token by variant (p50, p95)",
                "Streams: receipt to the first chunk from the variant.",
                [
                    quantile(
                        0.5,
                        "sits_time_to_first_token_seconds",
                        GATEWAY,
                        "variant",
                        "{{variant}} p50",
                    ),
                    quantile(
                        0.95,
                        "sits_time_to_first_token_seconds",
                        GATEWAY,
                        "variant",
                        "{{variant}} p95",
                    ),
                ],
                unit="s",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "Weights the gateway applies",
                "Percent of new requests per variant in the gateway's routing table "
                "(follows the SitsDeployment's status).",
                [
                    Query(
                        f"sum by (variant) (sits_gateway_variant_weight_percent{{{GATEWAY_OWN}}})",
                        "{{variant}}",
                    )
                ],
                unit="percent",
                max_value=100,
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "Ready endpoints per variant",
                "Ready pods the gateway knows per variant (EndpointSlices).",
                [
                    Query(
                        f"sum by (variant) (sits_gateway_variant_endpoints{{{GATEWAY_OWN}}})",
                        "{{variant}}",
                    )
                ],
                unit="short",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "Rejected and retried requests",
                "Answered by the gateway before a variant was chosen (by code and reason), "
                "and resent once after a pooled connection closed.",
                [
                    Query(
                        "sum by (code, reason) "
                        f"(rate(sits_gateway_rejected_total{{{GATEWAY_OWN}}}{RATE}))",
                        "rejected {{code}} {{reason}}",
                    ),
                    Query(
                        "sum by (variant) "
                        f"(rate(sits_gateway_upstream_retries_total{{{GATEWAY_OWN}}}{RATE}))",
                        "retried {{variant}}",
                    ),
                ],
                unit="reqps",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "Tokens per second by variant",
                "Input and output tokens reported by the responses' usage.",
                [
                    Query(
                        "sum by (variant, token_type) "
                        f"(rate(sits_tokens_total{{{GATEWAY}}}{RATE}))",
                        "{{variant}} {{token_type}}",
                    )
                ],
                unit="short",
                width=HALF,
            )
        )
        .with_panel(
            parts.timeseries(
                "Time to first token p95: gateway vs vLLM",
                "The gateway's TTFT per variant beside vLLM's own per pod: the "
                "difference is the proxies and the network.",
                [
                    quantile(
                        0.95,
                        "sits_time_to_first_token_seconds",
                        GATEWAY,
                        "variant",
                        "gateway {{variant}}",
                    ),
                    quantile(0.95, "vllm:time_to_first_token_seconds", VLLM, "pod", "vLLM {{pod}}"),
                ],
                unit="s",
                width=HALF,
            )
        )
        .with_row(parts.row("vLLM"))
        .with_panel(
            parts.timeseries(
                "vLLM requests running and waiting",
                "Requests in model execution batches, and queued for one.",
                [
                    Query(f"sum by (pod) (vllm:num_requests_running{{{VLLM}}})", "{{pod}} running"),
                    Query(f"sum by (pod) (vllm:num_requests_waiting{{{VLLM}}})", "{{pod}} waiting"),
                ],
                unit="short",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "vLLM KV-cache usage",
                "vllm:kv_cache_usage_perc (1 = the whole KV cache in use).",
                [Query(f"max by (pod) (vllm:kv_cache_usage_perc{{{VLLM}}})", "{{pod}}")],
                unit="percentunit",
                max_value=1,
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "vLLM tokens per second",
                "Prefill (prompt) and generated tokens processed.",
                [
                    Query(
                        f"sum by (pod) (rate(vllm:prompt_tokens_total{{{VLLM}}}{RATE}))",
                        "{{pod}} prompt",
                    ),
                    Query(
                        f"sum by (pod) (rate(vllm:generation_tokens_total{{{VLLM}}}{RATE}))",
                        "{{pod}} generation",
                    ),
                ],
                unit="short",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "vLLM finished requests by reason",
                "Requests vLLM completed, by finish reason (stop, length, abort...).",
                [
                    Query(
                        "sum by (pod, finished_reason) "
                        f"(rate(vllm:request_success_total{{{VLLM}}}{RATE}))",
                        "{{pod}} {{finished_reason}}",
                    )
                ],
                unit="reqps",
                width=HALF,
            )
        )
        .with_panel(
            parts.timeseries(
                "vLLM queue time and end-to-end latency p95",
                "Time requests waited in vLLM's queue, and vLLM's own end-to-end latency.",
                [
                    quantile(0.95, "vllm:request_queue_time_seconds", VLLM, "pod", "{{pod}} queue"),
                    quantile(0.95, "vllm:e2e_request_latency_seconds", VLLM, "pod", "{{pod}} e2e"),
                ],
                unit="s",
                width=HALF,
            )
        )
    )
