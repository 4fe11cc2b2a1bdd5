"""The SITS2026 policy's rules, as the SLI panels show them.

The panels run the policy's own query templates (the operator fills the same
placeholders, ``sits_operator.adapters.prometheus.render_query``) with Grafana's
variables in place of one SitsDeployment's values, and draw each rule's threshold: a
panel shows what the operator judges, not a look-alike.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
POLICY_FILE = REPO / "policies" / "sits2026.yaml"
# The policy's placeholders and the dashboard variables that stand for them.
PLACEHOLDERS = {
    "namespace": "$namespace",
    "deployment": "$sits_deployment",
    "source": "$source",
    # Batched templates (policies/sits2026.yaml): the panel shows one deployment.
    "by": "variant",
    "deployment_regex": "$sits_deployment",
}


@dataclass(frozen=True)
class PolicyRule:
    name: str
    sli: str
    window: str
    query: str  # with the dashboard's variables
    comparison: str
    threshold: float
    action: str


@dataclass(frozen=True)
class Policy:
    name: str
    interval: str
    min_requests: int
    rules: tuple[PolicyRule, ...]

    def rule(self, sli: str) -> PolicyRule:
        for rule in self.rules:
            if rule.sli == sli:
                return rule
        raise KeyError(f"{self.name} has no rule for SLI {sli}")


def dashboard_query(template: str, window: str) -> str:
    query = " ".join(template.split())
    for key, variable in {**PLACEHOLDERS, "window": window}.items():
        query = query.replace("{{" + key + "}}", variable)
    left = re.findall(r"\{\{\w+\}\}", query)
    if left:
        raise ValueError(f"unknown placeholders {left} in {template!r}")
    return query


def _action(spec: dict[str, Any]) -> str:
    kind = str(spec["type"])
    return f"{kind} {spec['weight']}%" if "weight" in spec else kind


def load_policy(path: Path = POLICY_FILE) -> Policy:
    doc = yaml.safe_load(path.read_text())
    spec = doc["spec"]
    rules = tuple(
        PolicyRule(
            name=str(rule["name"]),
            sli=str(rule["sli"]),
            window=str(rule["window"]),
            query=dashboard_query(str(rule["query"]), str(rule["window"])),
            comparison=str(rule["comparison"]),
            threshold=float(rule["threshold"]),
            action=_action(rule["action"]),
        )
        for rule in spec["rules"]
    )
    return Policy(
        name=str(doc["metadata"]["name"]),
        interval=str(spec["interval"]),
        min_requests=int(spec["minRequests"]),
        rules=rules,
    )
