"""Dashboard 2, cache tiers: the sidecar's L1 semantic cache, L2 vector index, L3 LoRA.

The sidecar's ``sits_cache_*`` series carry no SitsDeployment label of their own (one
sidecar per pod): they are selected by the target labels every scrape adds, ``namespace``
and ``pod`` (the chart's PodMonitor and a ``kubernetes_sd_configs`` job both set them).
The ``pod`` variable lists the pods of the chosen SitsDeployment: its variants' pods are
named ``<sits_deployment>-<variant>-...``.
"""

from __future__ import annotations

from grafana_foundation_sdk.builders import dashboard as dash_b

from . import parts
from .parts import THIRD, Query

UID = "sits-cache-tiers"
TITLE = "SITS / Cache tiers"

POD = 'namespace="$namespace", pod=~"$pod"'
RATE = "[$__rate_interval]"


def variables() -> list[parts.Variable]:
    return [
        parts.datasource_variable(),
        parts.label_variable("namespace", "Namespace", "sits_cache_requests_total", "namespace"),
        parts.label_variable(
            "sits_deployment",
            "SitsDeployment",
            'sits_requests_total{namespace="$namespace", source="sidecar"}',
            "sits_deployment",
        ),
        parts.label_variable(
            "pod",
            "Pod",
            'sits_cache_requests_total{namespace="$namespace", pod=~"$sits_deployment-.+"}',
            "pod",
            multi=True,
        ),
    ]


def hit_ratio(tier: str) -> Query:
    hits = f'sum by (pod) (rate(sits_cache_hits_total{{{POD}, tier="{tier}"}}{RATE}))'
    misses = f'sum by (pod) (rate(sits_cache_misses_total{{{POD}, tier="{tier}"}}{RATE}))'
    return Query(f"{hits} / ({hits} + {misses})", "{{pod}}")


def p95(metric: str, by: str, selector: str, legend: str) -> Query:
    return Query(
        f"histogram_quantile(0.95, sum by ({by}, le) (rate({metric}_bucket{{{selector}}}{RATE})))",
        legend,
    )


def per_second(metric: str, by: str, selector: str = POD, legend: str = "") -> Query:
    return Query(
        f"sum by ({by}) (rate({metric}{{{selector}}}{RATE}))",
        legend or " ".join("{{" + label.strip() + "}}" for label in by.split(",")),
    )


def build() -> dash_b.Dashboard:
    return (
        dash_b.Dashboard(TITLE)
        .uid(UID)
        .description(
            "The cache sidecar of a SitsDeployment's pods: L1 semantic cache, L2 vector "
            "index, L3 LoRA adapter residency (sits_cache_* series)."
        )
        .tags(["sits", "cache"])
        .time("now-3h", "now")
        .refresh("30s")
        .tooltip(parts.CROSSHAIR)
        .variables(variables())
        .with_row(parts.row("Requests through the sidecar"))
        .with_panel(
            parts.timeseries(
                "Sidecar requests by outcome",
                "Chat and completion requests by what the sidecar did: hit (served from "
                "L1), miss, bypass, skip, error, rejected, cancelled.",
                [per_second("sits_cache_requests_total", "outcome")],
                unit="reqps",
                stacked=True,
            )
        )
        .with_panel(
            parts.timeseries(
                "Request latency p95: hit vs miss",
                "Request to last byte, by outcome: a hit's benefit over vLLM.",
                [p95("sits_cache_request_duration_seconds", "outcome", POD, "{{outcome}}")],
                unit="s",
            )
        )
        .with_row(parts.row("L1 semantic cache"))
        .with_panel(
            parts.timeseries(
                "L1 hit ratio",
                "Hits / (hits + misses) of L1 lookups, per pod.",
                [hit_ratio("semantic")],
                unit="percentunit",
                max_value=1,
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "L1 near-miss rejections by reason",
                "Candidates above the similarity threshold that the near-miss guard "
                "refused (number, year, negation, antonym, order, entity, ...).",
                [per_second("sits_cache_near_miss_rejections_total", "reason")],
                unit="ops",
                width=THIRD,
                stacked=True,
            )
        )
        .with_panel(
            parts.timeseries(
                "L1 lookup latency p95",
                "Embedding and search of one L1 lookup.",
                [
                    p95(
                        "sits_cache_lookup_duration_seconds",
                        "pod",
                        f'{POD}, tier="semantic"',
                        "{{pod}}",
                    )
                ],
                unit="s",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "L1 entries",
                "Entries held by L1, per pod.",
                [Query(f'sum by (pod) (sits_cache_entries{{{POD}, tier="semantic"}})', "{{pod}}")],
                unit="short",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "L1 evictions and expiry",
                "Entries removed for capacity (by reason) and by TTL.",
                [
                    per_second(
                        "sits_cache_evictions_total",
                        "reason",
                        f'{POD}, tier="semantic"',
                        "evicted {{reason}}",
                    ),
                    Query(
                        f"sum(rate(sits_cache_semantic_expired_total{{{POD}}}{RATE}))",
                        "expired (TTL)",
                    ),
                ],
                unit="ops",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "Coalesced requests by result",
                "Identical requests that waited for one already at vLLM, by what they "
                "found (hit, miss, timeout).",
                [per_second("sits_cache_coalesced_total", "result")],
                unit="reqps",
                width=THIRD,
            )
        )
        .with_row(parts.row("L2 vector index"))
        .with_panel(
            parts.timeseries(
                "L2 hot-list hits",
                "Inverted lists scanned by L2 queries per second, by whether they were "
                "resident (hot) or cold.",
                [
                    per_second(
                        "sits_cache_vector_list_accesses_total",
                        "residency",
                        POD,
                        "lists {{residency}}",
                    ),
                ],
                unit="ops",
                width=THIRD,
                stacked=True,
            )
        )
        .with_panel(
            parts.timeseries(
                "L2 hit ratio",
                "Queries whose inverted lists were all resident / all queries, per pod.",
                [hit_ratio("vector")],
                unit="percentunit",
                max_value=1,
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "L2 latency p95",
                "POST /v1/retrieve end to end (by input), and the index search alone.",
                [
                    p95(
                        "sits_cache_vector_retrieval_duration_seconds",
                        "input",
                        POD,
                        "retrieve ({{input}})",
                    ),
                    p95(
                        "sits_cache_lookup_duration_seconds",
                        "tier",
                        f'{POD}, tier="vector"',
                        "search",
                    ),
                ],
                unit="s",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "L2 resident lists",
                "Inverted lists kept resident, of all lists in the open index.",
                [
                    Query(f"sum by (pod) (sits_cache_vector_resident_lists{{{POD}}})", "{{pod}}"),
                    Query(f"sum by (pod) (sits_cache_vector_lists{{{POD}}})", "{{pod}} all"),
                ],
                unit="short",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "L2 resident and locked bytes",
                "Index, vector and document bytes kept resident, and of those pinned with mlock.",
                [
                    Query(
                        f"sum by (pod) (sits_cache_vector_resident_bytes{{{POD}}})",
                        "{{pod}} resident",
                    ),
                    Query(
                        f"sum by (pod) (sits_cache_vector_locked_bytes{{{POD}}})",
                        "{{pod}} locked",
                    ),
                ],
                unit="bytes",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "L2 list promotions and demotions",
                "Lists made resident after start (hot), and cold lists given up.",
                [
                    Query(
                        f"sum(rate(sits_cache_vector_list_promotions_total{{{POD}}}{RATE}))",
                        "promoted",
                    ),
                    per_second(
                        "sits_cache_evictions_total",
                        "reason",
                        f'{POD}, tier="vector"',
                        "demoted ({{reason}})",
                    ),
                ],
                unit="ops",
                width=THIRD,
            )
        )
        .with_row(parts.row("L3 LoRA adapter residency"))
        .with_panel(
            parts.timeseries(
                "L3 resident adapters",
                "Adapters loaded in vLLM by the residency manager, and requests waiting "
                "for theirs.",
                [
                    Query(
                        f"sum by (pod) (sits_cache_lora_resident_adapters{{{POD}}})",
                        "{{pod}} resident",
                    ),
                    Query(
                        f"sum by (pod) (sits_cache_lora_waiting_requests{{{POD}}})",
                        "{{pod}} waiting",
                    ),
                ],
                unit="short",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "L3 adapter loads by outcome",
                "Loads through vLLM's runtime API: success, rejected, timeout, unreachable.",
                [per_second("sits_cache_lora_loads_total", "outcome")],
                unit="ops",
                width=THIRD,
                stacked=True,
            )
        )
        .with_panel(
            parts.timeseries(
                "L3 evictions by reason",
                "Adapters unloaded for a slot (capacity) or replaced by a newer version.",
                [
                    per_second(
                        "sits_cache_evictions_total",
                        "reason",
                        f'{POD}, tier="lora"',
                        "{{reason}}",
                    )
                ],
                unit="ops",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "L3 hit ratio",
                "Requests whose adapter was resident when they arrived / all adapter "
                "requests, per pod.",
                [hit_ratio("lora")],
                unit="percentunit",
                max_value=1,
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "L3 load duration p95",
                "One successful adapter load call, and the time requests waited for their adapter.",
                [
                    p95("sits_cache_lora_load_duration_seconds", "pod", POD, "{{pod}} load"),
                    p95(
                        "sits_cache_lookup_duration_seconds",
                        "pod",
                        f'{POD}, tier="lora"',
                        "{{pod}} wait",
                    ),
                ],
                unit="s",
                width=THIRD,
            )
        )
        .with_panel(
            parts.timeseries(
                "L3 adapter refreshes and re-applies",
                "One-token requests keeping a resident adapter ahead of vLLM's LRU, and "
                "adapters loaded again after vLLM lost them.",
                [
                    Query(
                        f"sum(rate(sits_cache_lora_refreshes_total{{{POD}}}{RATE}))",
                        "refreshed",
                    ),
                    Query(
                        f"sum(rate(sits_cache_lora_reapplied_total{{{POD}}}{RATE}))",
                        "re-applied",
                    ),
                ],
                unit="ops",
                width=THIRD,
            )
        )
    )
