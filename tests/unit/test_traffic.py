"""Status tells the truth about traffic: gateway read-back, agreement, the 5 s condition.

Time is a number passed in (the reconciler's injected wall clock): no sleeps.
"""

from __future__ import annotations

from typing import Any

import pytest

from sits_operator.adapters.gateway import GatewayPod, parse_report, pod_url
from sits_operator.core.status import StatusInputs, compute_status
from sits_operator.core.traffic import (
    GRACE_SECONDS,
    TrafficView,
    agreed_weights,
    from_timestamp,
    to_timestamp,
    traffic_view,
)
from sits_operator.model.observed import (
    GatewayReport,
    ObservedContainer,
    ObservedDeployment,
    ObservedPod,
    ObservedState,
)
from sits_operator.model.spec import RouterKind
from tests.unit.factories import spec, variant

T0 = 1_800_000_000.0
NEW = {"v1": 75, "v2": 25}
OLD = {"v1": 100, "v2": 0}


def report(pod: str, weights: dict[str, int] | None, error: str = "") -> GatewayReport:
    return GatewayReport(pod, weights, error)


@pytest.mark.parametrize(
    ("reports", "agreed"),
    [
        pytest.param([report("a", NEW), report("b", NEW)], NEW, id="all-same"),
        pytest.param([report("a", NEW), report("b", OLD)], None, id="mid-change"),
        pytest.param([report("a", NEW), report("b", None, "timeout")], None, id="one-silent"),
        pytest.param([], None, id="no-pod"),
        pytest.param([report("a", OLD)], OLD, id="one-pod"),
    ],
)
def test_agreement(reports: list[GatewayReport], agreed: dict[str, int] | None) -> None:
    assert agreed_weights(reports) == agreed


def view(
    reports: list[GatewayReport] | None, now: float, previous: dict[str, Any], **kw: Any
) -> TrafficView:
    return traffic_view(
        router=kw.pop("router", RouterKind.BUILTIN),
        decided=NEW,
        previous=previous,
        reports=reports,
        now=now,
    )


def decided_at(seconds: float) -> dict[str, Any]:
    return {
        "weights": [{"variant": k, "weight": v} for k, v in NEW.items()],
        "decidedAt": to_timestamp(seconds),
    }


def test_a_new_decision_is_stamped_now_and_kept_while_it_stays() -> None:
    first = view([report("a", OLD)], T0, {"weights": [], "decidedAt": to_timestamp(T0 - 99)})
    assert from_timestamp(first.field["decidedAt"]) == pytest.approx(T0, abs=0.001)
    later = view([report("a", OLD)], T0 + 3, first.field)
    assert later.field["decidedAt"] == first.field["decidedAt"]


def test_the_shown_weights_are_what_the_gateway_pods_agree_on() -> None:
    lagging = view([report("a", OLD), report("b", OLD)], T0 + 1, decided_at(T0))
    assert lagging.shown == OLD  # the truth: traffic still follows the old split
    assert lagging.field["weights"] == [
        {"variant": "v1", "weight": 75},
        {"variant": "v2", "weight": 25},
    ]
    applied = view([report("a", NEW), report("b", NEW)], T0 + 1, decided_at(T0))
    assert applied.shown == NEW
    assert applied.condition == (
        True,
        "WeightsApplied",
        "2 of 2 ready gateway pods apply the decided weights",
    )
    assert applied.recheck_in is None
    assert (applied.field["gatewayPods"], applied.field["gatewayPodsApplied"]) == (2, 2)


@pytest.mark.parametrize(
    ("elapsed", "condition", "recheck"),
    [
        pytest.param(0.0, None, GRACE_SECONDS + 0.1, id="just-decided"),
        pytest.param(4.9, None, 0.2, id="within-grace"),
        pytest.param(5.0, "GatewayBehind", 5.0, id="grace-over"),
        pytest.param(60.0, "GatewayBehind", 5.0, id="long-behind"),
    ],
)
def test_a_gateway_behind_the_decision_raises_the_condition_after_five_seconds(
    elapsed: float, condition: str | None, recheck: float
) -> None:
    result = view([report("a", NEW), report("b", OLD)], T0 + elapsed, decided_at(T0))
    assert (result.condition[1] if result.condition else None) == condition
    assert result.recheck_in == pytest.approx(recheck)
    if condition:
        assert result.condition is not None
        assert result.condition[0] is False
        assert "1 of 2 ready gateway pods apply the decided weights" in result.condition[2]
        assert "pod b: v1=100, v2=0" in result.condition[2]


def test_no_ready_gateway_pod_is_gateway_unavailable() -> None:
    result = view([], T0 + 6, decided_at(T0))
    assert result.condition is not None
    assert result.condition[:2] == (False, "GatewayUnavailable")
    assert result.shown == NEW  # nothing to read back: the decision, flagged by the condition


def test_a_first_status_within_the_grace_period_has_no_condition_yet() -> None:
    result = view([report("a", OLD)], T0 + 1, decided_at(T0))
    assert result.condition is None


@pytest.mark.parametrize("router", [RouterKind.NONE, RouterKind.GATEWAY_API])
def test_other_routers_show_the_decision_and_ask_no_gateway(router: RouterKind) -> None:
    result = view(None, T0, {}, router=router)
    assert (result.shown, result.condition, result.recheck_in) == (NEW, None, None)
    assert "gatewayPods" not in result.field


# -- through compute_status ------------------------------------------------------------


def inputs(reports: tuple[GatewayReport, ...] | None, now: float, **kw: Any) -> StatusInputs:
    raw_spec = kw.pop("spec", None) or spec(
        variant(),
        variant("v2", "candidate"),
        traffic={
            "initialWeights": [{"variant": "v1", "weight": 75}, {"variant": "v2", "weight": 25}]
        },
    )
    ready = (
        ObservedDeployment("v1", "r1", 1, 1, 1, 1, 1, 1),
        ObservedDeployment("v2", "r1", 1, 1, 1, 1, 1, 1),
        ObservedDeployment("", None, 2, 2, 2, 2, 1, 1, component="gateway"),
    )
    return StatusInputs(
        generation=1,
        spec=raw_spec,
        problems=(),
        observed=kw.pop("observed", ObservedState(deployments=ready)),
        previous=kw.pop("previous", {}),
        now="2027-01-15T08:00:00Z",
        gateway_reports=reports,
        now_seconds=now,
    )


def test_status_variants_weight_is_the_gateways_and_the_condition_follows() -> None:
    first = compute_status(inputs((report("a", OLD), report("b", OLD)), T0))
    rows = {r["name"]: r["weight"] for r in first.status["variants"]}
    assert rows == OLD
    assert first.status["candidateWeight"] == 0
    assert first.status["traffic"]["weights"] == [
        {"variant": "v1", "weight": 75},
        {"variant": "v2", "weight": 25},
    ]
    assert "TrafficApplied" not in {c["type"] for c in first.status["conditions"]}
    behind = compute_status(
        inputs((report("a", OLD), report("b", OLD)), T0 + 5.5, previous=first.status)
    )
    conditions = {c["type"]: c for c in behind.status["conditions"]}
    assert (conditions["TrafficApplied"]["status"], conditions["TrafficApplied"]["reason"]) == (
        "False",
        "GatewayBehind",
    )
    caught_up = compute_status(
        inputs((report("a", NEW), report("b", NEW)), T0 + 9, previous=behind.status)
    )
    assert {r["name"]: r["weight"] for r in caught_up.status["variants"]} == NEW
    assert caught_up.status["candidateWeight"] == 25
    # A gateway behind held the SitsDeployment Reconciling (core/kstatus.py): catching up
    # makes it Ready again.
    assert conditions["Reconciling"]["reason"] == "GatewayBehind"
    assert [c.type for c in caught_up.flipped] == ["Ready", "Reconciling", "TrafficApplied"]
    assert caught_up.recheck_in is None


def test_switching_to_router_none_drops_traffic_applied() -> None:
    builtin = compute_status(inputs((report("a", NEW),), T0))
    none = spec(variant(), variant("v2", "candidate"), traffic={"router": "none"})
    after = compute_status(inputs(None, T0 + 1, spec=none, previous=builtin.status))
    assert "TrafficApplied" not in {c["type"] for c in after.status["conditions"]}


def test_a_gateway_that_cannot_pull_its_image_is_named_and_variants_keep_their_rows() -> None:
    pulling = ObservedContainer(
        "sits-gateway", waiting_reason="ImagePullBackOff", waiting_message="pull access denied"
    )
    pods = (
        ObservedPod("chat-gateway-x", "", "Pending", containers=(pulling,), component="gateway"),
    )
    deployments = (
        ObservedDeployment("v1", "r1", 1, 1, 1, 1, 1, 1),
        ObservedDeployment("v2", "r1", 1, 1, 1, 1, 1, 1),
        ObservedDeployment("", None, 2, 0, 2, 0, 1, 1, component="gateway"),
    )
    result = compute_status(
        inputs((), T0, observed=ObservedState(deployments=deployments, pods=pods))
    )
    failing = next(c for c in result.status["conditions"] if c["type"] == "ContainersFailing")
    assert (failing["status"], failing["reason"]) == ("True", "ImagePullBackOff")
    assert failing["message"].startswith("gateway pod chat-gateway-x container sits-gateway")
    by_type = {c["type"]: c for c in result.status["conditions"]}
    assert by_type["Progressing"]["message"] == "gateway 0/2 ready"
    assert (by_type["Ready"]["status"], by_type["Ready"]["reason"]) == ("False", "ImagePullBackOff")
    assert {r["name"]: r["readyReplicas"] for r in result.status["variants"]} == {"v1": 1, "v2": 1}


# -- the adapter's reading of one answer ----------------------------------------------


@pytest.mark.parametrize(
    ("body", "weights", "error"),
    [
        ({"ready": True, "weights": {"v1": 90, "v2": 10}}, {"v1": 90, "v2": 10}, ""),
        ({"ready": False, "weights": {"v1": 100}}, None, "has no routing table yet"),
        ({"ready": True, "weights": {"v1": "90"}}, None, "answered without weights"),
        ({"ready": True, "weights": {"v1": True}}, None, "answered without weights"),
        ([1, 2], None, "answered without weights"),
    ],
)
def test_parse_report(body: Any, weights: dict[str, int] | None, error: str) -> None:
    parsed = parse_report("p", body)
    assert (parsed.weights, parsed.error) == (weights, error)


def test_pod_urls_bracket_ipv6() -> None:
    assert pod_url(GatewayPod("p", "10.1.2.3"), 8080) == "http://10.1.2.3:8080/sits/v1/routing"
    assert pod_url(GatewayPod("p", "fd00::5"), 8080) == "http://[fd00::5]:8080/sits/v1/routing"
