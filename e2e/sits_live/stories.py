"""The rollouts the live scenarios and the demo tell: SitsDeployments, policy and traffic.

``healthy``: v1 (stable) and v2 (candidate) serve the same tiny model and LoRA adapter;
v2 should be promoted step by step. ``broken``: v2 ships the adapter truncated (an
interrupted upload), so vLLM refuses to load it and every request for the adapter gets
a 502 from v2's sidecar while base-model requests still succeed: a share of real requests
fails for a real reason, and SITS2026 must roll v2 back after two failing periods.

The policy is SITS2026 (policies/sits2026.yaml: its rules, comparisons, actions and
``for`` clauses) on short periods so a story takes a minute, not an hour: 5 s periods,
15 s windows, 10 requests at least per window. One threshold is changed, and said so:
the p95 latency ceiling. SITS2026's 200 ms is a GPU figure; the tiny model on two shared
CPU cores answers a few tokens in hundreds of milliseconds, so the live policy's ceiling
is ``LATENCY_CEILING_MS`` (a healthy variant stays well under it; see docs/benchmarks.md).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from . import stack

REPO = Path(__file__).resolve().parents[2]
POLICY_NAME = "sits2026-live"
INTERVAL, WINDOW = "5s", "15s"
LATENCY_CEILING_MS = 6000
#: Requests per second per SitsDeployment: base model and adapter. The adapter's share is
#: what a broken adapter fails; 20 % of traffic on the candidate x 40 % adapter requests.
#: What the live policy judges by, for the plots.
THRESHOLDS = {"success_rate": 0.95, "p95_ms": float(LATENCY_CEILING_MS)}
RATES = {stack.SERVED: 2.4, stack.ADAPTER: 1.6}
#: The losers keep their pods for 10 min (not SITS2026's 2 min): the live scenarios retry
#: rollouts on the same variants, which would otherwise wait for vLLM to start again.
ROLLOUT = {"strategy": "canary", "stepWeight": 20, "maxWeight": 60, "scaleDownDelay": "10m"}


def live_policy(prometheus_url: str) -> dict[str, Any]:
    """SITS2026 on 5 s periods and 15 s windows, with the CPU's latency ceiling, querying
    the scenario's own Prometheus (the policy names it; a SitsDeployment cannot)."""
    policy = yaml.safe_load((REPO / "policies" / "sits2026.yaml").read_text())
    policy = copy.deepcopy(policy)
    policy["metadata"] = {"name": POLICY_NAME, "labels": policy["metadata"].get("labels", {})}
    policy["spec"].update(
        {
            "interval": INTERVAL,
            "minRequests": 10,
            "promotion": {"consecutivePasses": 2},
            "prometheus": {"url": prometheus_url},
        }
    )
    for rule in policy["spec"]["rules"]:
        rule["window"] = WINDOW
        if rule["sli"] == "latency_p95_ms":
            rule["threshold"] = LATENCY_CEILING_MS
    return dict(policy)


def analysis() -> dict[str, Any]:
    return {"policyRef": {"name": POLICY_NAME}}


def healthy(name: str, *, gateway_replicas: int = 2) -> dict[str, Any]:
    return stack.sits_deployment(
        name,
        [stack.variant("v1", "stable", "tiny-a"), stack.variant("v2", "candidate", "tiny-b")],
        analysis=analysis(),
        rollout=dict(ROLLOUT),
        gateway_replicas=gateway_replicas,
    )


def broken(name: str, *, gateway_replicas: int = 2) -> dict[str, Any]:
    """v2's adapter artifact is truncated: requests for it fail, base requests do not."""
    return stack.sits_deployment(
        name,
        [
            stack.variant("v1", "stable", "tiny-a"),
            stack.variant("v2", "candidate", "tiny-a-broken-adapter", adapter_dir="broken"),
        ],
        analysis=analysis(),
        rollout=dict(ROLLOUT),
        gateway_replicas=gateway_replicas,
    )


#: The slow story's setting: vLLM schedules one sequence at a time (no continuous batching).
SERIAL_ARGS = ("--max-num-seqs=1",)


def slow(name: str, *, gateway_replicas: int = 1) -> dict[str, Any]:
    """v2 serialises its requests (``SERIAL_ARGS``): it answers everything, only late."""
    return stack.sits_deployment(
        name,
        [
            stack.variant("v1", "stable", "tiny-a"),
            stack.variant("v2", "candidate", "tiny-a-serial", extra_args=SERIAL_ARGS),
        ],
        analysis=analysis(),
        rollout=dict(ROLLOUT),
        gateway_replicas=gateway_replicas,
    )
