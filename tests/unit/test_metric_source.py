"""Which request metrics the analysis reads (``spec.analysis.source``), and how the
choice reaches every query: the policy's templates and the minimum-traffic count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from sits_operator.adapters.prometheus import REQUESTS_QUERY, Target, render_query
from sits_operator.core.metric_source import metric_source
from sits_operator.model.policy import parse_policy
from sits_operator.model.spec import MetricSource
from tests.unit.factories import spec

REPO = Path(__file__).resolve().parents[2]
ROUTE = {"group": "gateway.networking.k8s.io", "name": "chat"}


def traffic(router: str) -> dict[str, Any]:
    return {"router": router, **({"httpRoute": ROUTE} if router == "gatewayAPI" else {})}


@pytest.mark.parametrize(
    ("router", "source", "expected"),
    [
        ("builtin", None, MetricSource.GATEWAY),
        ("gatewayAPI", None, MetricSource.SIDECAR),
        ("none", None, MetricSource.SIDECAR),
        ("builtin", "sidecar", MetricSource.SIDECAR),
        ("builtin", "gateway", MetricSource.GATEWAY),
        ("gatewayAPI", "sidecar", MetricSource.SIDECAR),
        ("none", "sidecar", MetricSource.SIDECAR),
    ],
)
def test_the_source_is_the_spec_s_else_the_router_s_default(
    router: str, source: str | None, expected: MetricSource
) -> None:
    analysis = {"source": source} if source else {}
    assert metric_source(spec(traffic=traffic(router), analysis=analysis)) is expected


def test_an_unset_router_is_builtin_so_the_gateway() -> None:
    assert metric_source(spec()) is MetricSource.GATEWAY


@pytest.mark.parametrize("source", list(MetricSource))
def test_templates_and_the_traffic_count_select_the_source(source: MetricSource) -> None:
    target = Target("prod", "chat", ("v1", "v2"), source)
    query = render_query('x{source="{{source}}",ns="{{namespace}}"}[{{window}}]', target, 300)
    assert query == f'x{{source="{source}",ns="prod"}}[5m]'
    count = REQUESTS_QUERY.format(namespace="prod", deployment="chat", source=source, window="5m")
    assert f'source="{source}"' in count


@pytest.mark.parametrize("source", list(MetricSource))
def test_every_sits2026_query_selects_exactly_one_source(source: MetricSource) -> None:
    raw = yaml.safe_load((REPO / "policies" / "sits2026.yaml").read_text())
    policy = parse_policy("sits2026", raw["spec"])
    target = Target("prod", "chat", ("v1", "v2"), source)
    for rule in policy.rules:
        query = render_query(rule.query, target, rule.window_seconds)
        assert "{{" not in query
        # every selector of a contract series names the source, so none sums both
        selectors = query.count("sits_request")
        assert query.count(f'source="{source}"') == selectors, query
