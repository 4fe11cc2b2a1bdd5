"""What a committed promotion and a scale-down change in the rendered children.

Roles are not in any Deployment or pod template, so naming the promoted candidate stable
applies the two variant Services (their role label) and nothing else; a scaled-down
variant is its Deployment at zero replicas.
"""

from __future__ import annotations

from typing import Any

import pytest

from sits_operator.core import naming
from sits_operator.core.plan import plan_children
from sits_operator.core.render import render_children
from sits_operator.core.rollout_plan import build_plan, revision_key, running_spec, scaled_down
from sits_operator.model.analysis import AnalysisPhase, AnalysisState
from sits_operator.model.observed import ObservedChild, ObservedDeployment, ObservedState
from sits_operator.model.settings import OperatorSettings
from sits_operator.model.spec import SitsDeploymentSpec
from tests.unit.factories import OWNER, spec, variant

SETTINGS = OperatorSettings()
V1 = variant("v1", "stable", revision="a")
V2 = variant("v2", "candidate", revision="b")
BEFORE = spec(V1, V2)
SWAPPED = spec({**V1, "role": "candidate"}, {**V2, "role": "stable"})
ALONE = spec({**V2, "role": "stable"})


def children(s: SitsDeploymentSpec) -> dict[str, dict[str, Any]]:
    return {f"{m['kind']}/{m['metadata']['name']}": m for m in render_children(OWNER, s, SETTINGS)}


def observed(s: SitsDeploymentSpec) -> tuple[ObservedChild, ...]:
    """The children of `s` as the watch cache shows them once applied."""
    return tuple(
        ObservedChild(
            m["kind"],
            m["metadata"]["name"],
            None,
            m["metadata"]["annotations"][naming.ANNOTATION_TEMPLATE_HASH],
        )
        for m in render_children(OWNER, s, SETTINGS)
    )


@pytest.mark.parametrize(
    ("after", "applied", "deleted"),
    [
        pytest.param(SWAPPED, ["Service/chat-v1", "Service/chat-v2"], [], id="roles-swapped"),
        pytest.param(
            ALONE,
            ["Service/chat-v2"],
            ["Deployment/chat-v1", "Service/chat-v1"],
            id="old-stable-removed",
        ),
    ],
)
def test_a_committed_promotion_touches_no_deployment_it_keeps(
    after: SitsDeploymentSpec, applied: list[str], deleted: list[str]
) -> None:
    plan = plan_children(render_children(OWNER, after, SETTINGS), observed(BEFORE))
    assert [f"{m['kind']}/{m['metadata']['name']}" for m in plan.apply] == applied
    assert [f"{k.kind}/{k.name}" for k in plan.delete] == deleted


def test_roles_live_on_services_not_on_pods() -> None:
    rendered = children(SWAPPED)
    for name in ("chat-v1", "chat-v2"):
        deployment = rendered[f"Deployment/{name}"]
        assert naming.LABEL_ROLE not in deployment["metadata"]["labels"]
        assert naming.LABEL_ROLE not in deployment["spec"]["template"]["metadata"]["labels"]
    assert rendered["Service/chat-v2"]["metadata"]["labels"][naming.LABEL_ROLE] == "stable"
    assert rendered["Service/chat-v1"]["metadata"]["labels"][naming.LABEL_ROLE] == "candidate"
    before = children(BEFORE)
    assert before["Deployment/chat-v2"] == rendered["Deployment/chat-v2"]


def test_a_scaled_down_variant_renders_at_zero_replicas_and_needs_no_ready_pod() -> None:
    running = running_spec(BEFORE, frozenset({"v2"}))
    rendered = children(running)
    assert rendered["Deployment/chat-v2"]["spec"]["replicas"] == 0
    assert rendered["Deployment/chat-v1"]["spec"]["replicas"] == 1
    assert (
        rendered["Deployment/chat-v2"]["spec"]["template"]
        == (children(BEFORE)["Deployment/chat-v2"]["spec"]["template"])
    ), "scaling changes no pod template"
    nothing_ready = ObservedState(deployments=(ObservedDeployment("v2", "b", 0, 0, 0, 0, 1, 1),))
    assert build_plan(running, nothing_ready).candidates_ready
    assert not build_plan(BEFORE, nothing_ready).candidates_ready
    assert running_spec(BEFORE, frozenset()) is BEFORE


SUCCEEDED = AnalysisState(
    phase=AnalysisPhase.SUCCEEDED,
    revision_key=revision_key(BEFORE),
    weights={"v1": 0, "v2": 100},
    scaled_down=("v1",),
)


@pytest.mark.parametrize(
    ("current", "expected"),
    [
        pytest.param(BEFORE, {"v1"}, id="same-spec"),
        pytest.param(SWAPPED, {"v1"}, id="committed-promotion-keeps-it-at-zero"),
        pytest.param(ALONE, set(), id="removed"),
        pytest.param(
            spec({**V1, "revision": "a2"}, V2), set(), id="new-revision-runs-it-again-at-once"
        ),
    ],
)
def test_which_variants_run_at_zero(current: SitsDeploymentSpec, expected: set[str]) -> None:
    assert scaled_down(current, SUCCEEDED) == expected


@pytest.mark.parametrize(
    ("rollout", "step_seconds", "scale_down_seconds"),
    [
        pytest.param({}, None, 120.0, id="defaults"),
        pytest.param({"interval": "2m", "scaleDownDelay": "30s"}, 120.0, 30.0, id="set"),
        pytest.param({"scaleDownDelay": "0s"}, None, 0.0, id="scale-down-at-once"),
    ],
)
def test_the_plan_reads_interval_and_scale_down_delay(
    rollout: dict[str, str], step_seconds: float | None, scale_down_seconds: float
) -> None:
    plan = build_plan(spec(V1, V2, rollout=rollout), ObservedState())
    assert (plan.step_seconds, plan.scale_down_seconds) == (step_seconds, scale_down_seconds)
