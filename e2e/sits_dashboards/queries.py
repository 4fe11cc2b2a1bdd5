"""Every query of the chart's dashboards, with the template variables filled in.

For a test against a real Prometheus: each query should run without error (and, under
load, return series). Panel queries come as Grafana runs them; annotation queries as
``annotation: <name>``; each ``label_values(metric, label)`` variable as ``variable:
<name>`` with the equivalent PromQL ``group by (label) (metric)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from .build import build_dashboards

# Grafana's built-in range variables, by the value a test would give them.
BUILT_IN = ("__rate_interval", "__interval", "__range")
VARIABLE = re.compile(r"\$\{(\w+)\}|\$(\w+)")
LABEL_VALUES = re.compile(r"^label_values\((?P<metric>.+),\s*(?P<label>\w+)\)$", re.DOTALL)
#: What an annotation query is called: Grafana runs these over the dashboard's time range
#: (a range query), not at one instant, so a test should too.
ANNOTATION = "annotation: "


def substitute(expr: str, values: Mapping[str, str]) -> str:
    """``$name`` and ``${name}`` replaced by ``values[name]``; an unknown name raises."""

    def one(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            raise KeyError(f"no value for ${name} in {expr!r}")
        return values[name]

    return VARIABLE.sub(one, expr)


def panels(doc: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    """Every panel that is not a row, collapsed rows' panels included."""
    for panel in doc.get("panels", []):
        if panel.get("type") == "row":
            yield from panel.get("panels", [])
        else:
            yield panel


def raw_queries(doc: Mapping[str, Any]) -> Iterator[tuple[str, str]]:
    """(what, PromQL with variables) of one dashboard: panels, annotations, variables."""
    for panel in panels(doc):
        for target in panel.get("targets", []):
            yield panel["title"], target["expr"]
    for annotation in doc.get("annotations", {}).get("list", []):
        if "expr" in annotation:
            yield f"{ANNOTATION}{annotation['name']}", annotation["expr"]
    for variable in doc.get("templating", {}).get("list", []):
        query = variable.get("query")
        if variable.get("type") == "query" and isinstance(query, str):
            found = LABEL_VALUES.match(query.strip())
            if found:
                promql = f"group by ({found['label']}) ({found['metric']})"
                yield f"variable: {variable['name']}", promql


def dashboard_queries(
    namespace: str,
    sits_deployment: str,
    *,
    source: str = "gateway",
    pod: str | None = None,
    rate_interval: str = "1m",
) -> list[tuple[str, str, str]]:
    """(dashboard title, panel title, PromQL) for every query of every dashboard.

    ``namespace`` and ``sits_deployment`` select one SitsDeployment; ``source`` is the
    request metrics' source the rollout SLIs read (``gateway`` or ``sidecar``); ``pod``
    is a regular expression over pod names (only used with ``=~``), by default the
    SitsDeployment's pods (``<sits_deployment>-.+``, what the dashboards' "All" selects);
    ``rate_interval`` stands for Grafana's ``$__rate_interval``,
    ``$__interval`` and ``$__range`` (at least four scrape intervals).
    """
    values = {
        "namespace": namespace,
        "sits_deployment": sits_deployment,
        "source": source,
        "pod": pod if pod is not None else f"{sits_deployment}-.+",
        **dict.fromkeys(BUILT_IN, rate_interval),
    }
    found: list[tuple[str, str, str]] = []
    for doc in build_dashboards().values():
        for what, expr in raw_queries(doc):
            found.append((str(doc["title"]), what, substitute(expr, values)))
    return found
