"""Build the three dashboards and write them as the chart's JSON files."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grafana_foundation_sdk.builders import dashboard as dash_b
from grafana_foundation_sdk.cog.encoder import JSONEncoder

from . import cache, gateway, rollout
from .policy import Policy, load_policy

REPO = Path(__file__).resolve().parents[2]
# The chart's templates/dashboards.yaml reads every JSON file here (.Files.Glob).
DASHBOARD_DIR = REPO / "charts" / "sits-operator" / "dashboards"

# The annotations every Grafana dashboard has (alerts and annotations made in Grafana).
BUILT_IN_ANNOTATION: dict[str, Any] = {
    "builtIn": 1,
    "datasource": {"type": "grafana", "uid": "-- Grafana --"},
    "enable": True,
    "hide": True,
    "iconColor": "rgba(0, 211, 255, 1)",
    "name": "Annotations & Alerts",
    "type": "dashboard",
}


@dataclass(frozen=True)
class Dashboard:
    """One dashboard of the chart: its file name (``<name>.json``), uid and builder."""

    name: str
    uid: str
    build: Callable[[Policy], dash_b.Dashboard]
    annotations: Callable[[], list[dict[str, object]]] = list


DASHBOARDS = (
    Dashboard("sits-rollout-overview", rollout.UID, rollout.build, rollout.annotation_queries),
    Dashboard("sits-cache-tiers", cache.UID, lambda _: cache.build()),
    Dashboard("sits-gateway-vllm", gateway.UID, lambda _: gateway.build()),
)


def to_json(dashboard: Dashboard, policy: Policy) -> dict[str, Any]:
    """The dashboard as Grafana stores it, with its Prometheus annotations."""
    model = dashboard.build(policy).build()
    doc: dict[str, Any] = json.loads(json.dumps(model, cls=JSONEncoder))
    doc["annotations"] = {"list": [BUILT_IN_ANNOTATION, *dashboard.annotations()]}
    doc.pop("id", None)  # Grafana assigns ids; provisioned dashboards are found by uid
    for number, panel in enumerate(doc.get("panels", []), start=1):
        panel["id"] = number  # unique within the dashboard (links and "view panel" use it)
    return doc


def build_dashboards(policy: Policy | None = None) -> dict[str, dict[str, Any]]:
    """File name -> dashboard JSON object, for every dashboard the chart ships."""
    policy = policy or load_policy()
    return {f"{d.name}.json": to_json(d, policy) for d in DASHBOARDS}


def render_json(doc: dict[str, Any]) -> str:
    """Stable text: sorted keys, two-space indent, a final newline (diffs stay small)."""
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


def write_dashboards(out: Path = DASHBOARD_DIR) -> list[Path]:
    """Write every dashboard into ``out``, and remove JSON files no dashboard writes."""
    out.mkdir(parents=True, exist_ok=True)
    docs = build_dashboards()
    for stale in out.glob("*.json"):
        if stale.name not in docs:
            stale.unlink()
    written = []
    for name, doc in docs.items():
        path = out / name
        path.write_text(render_json(doc))
        written.append(path)
    return written
