"""The analysis scenarios' objects: the fast SITS2026 policy and the chat canary."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
SITS2026 = yaml.safe_load((REPO / "policies" / "sits2026.yaml").read_text())
EXAMPLE = yaml.safe_load((REPO / "examples" / "chat-canary.yaml").read_text())


def fast_policy(name: str, prometheus_url: str | None = None, **overrides: Any) -> dict[str, Any]:
    """SITS2026's rules on short windows: 4 s periods, 10 s windows, 12 s latency duration,
    querying the test's Prometheus (the policy names it; a SitsDeployment cannot).

    The thresholds, comparisons, period counts and actions stay exactly SITS2026's.
    """
    policy = copy.deepcopy(SITS2026)
    policy["metadata"] = {"name": name}
    spec = policy["spec"]
    spec.update(
        {
            "interval": "4s",
            "minRequests": 5,
            "noData": {"action": "pause", "after": "12s"},
            "promotion": {"consecutivePasses": 2},
        }
    )
    for rule in spec["rules"]:
        rule["window"] = "10s"
        if "duration" in rule.get("for", {}):
            rule["for"] = {"duration": "12s"}
    if prometheus_url is not None:
        spec["prometheus"] = {"url": prometheus_url}
    spec.update(overrides)
    return dict(policy)


def deployment(name: str, policy: str, **rollout: Any) -> dict[str, Any]:
    manifest = copy.deepcopy(EXAMPLE)
    manifest["metadata"] = {"name": name}
    manifest["spec"]["traffic"].pop("initialWeights")
    manifest["spec"]["rollout"] = {
        "strategy": "canary",
        "stepWeight": 25,
        "maxWeight": 50,
        "interval": "4s",
        **rollout,
    }
    manifest["spec"]["analysis"] = {"policyRef": {"name": policy}}
    return dict(manifest)
