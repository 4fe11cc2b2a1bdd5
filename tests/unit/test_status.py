"""Table-driven tests of status computation: phases, conditions, weights."""

from __future__ import annotations

from typing import Any

import pytest

from sits_operator.core.conditions import set_condition
from sits_operator.core.status import StatusInputs, compute_status, effective_weights
from sits_operator.model.observed import ObservedDeployment, ObservedPod, ObservedState
from sits_operator.model.spec import SitsDeploymentSpec
from sits_operator.model.status import Condition
from tests.unit.factories import spec, variant

NOW = "2026-12-02T10:00:00Z"
LATER = "2026-12-02T10:05:00Z"
WEIGHTED = spec(
    variant(),
    variant("v2", "candidate"),
    traffic={"initialWeights": [{"variant": "v1", "weight": 90}, {"variant": "v2", "weight": 10}]},
)


def dep(
    variant: str,
    ready: int,
    replicas: int = 1,
    updated: int | None = None,
    gen: int = 1,
    observed_gen: int = 1,
) -> ObservedDeployment:
    return ObservedDeployment(
        variant,
        "r",
        replicas,
        ready,
        ready if updated is None else updated,
        ready,
        gen,
        observed_gen,
    )


def observed(*deps: ObservedDeployment, pods: tuple[ObservedPod, ...] = ()) -> ObservedState:
    return ObservedState(deployments=deps, pods=pods)


UNSCHEDULABLE = ObservedPod(
    "chat-v2-x", "v2", "Pending", "0/3 nodes are available: 3 Insufficient nvidia.com/mig-7g.80gb."
)


def run(
    s: SitsDeploymentSpec | None,
    obs: ObservedState,
    previous: dict[str, Any] | None = None,
    problems: tuple[str, ...] = (),
    now: str = NOW,
) -> dict[str, Any]:
    inputs = StatusInputs(7, s, problems, obs, previous or {}, now)
    return compute_status(inputs).status


def conds(status: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in status["conditions"]}


@pytest.mark.parametrize(
    ("obs", "problems", "phase", "expected"),
    [
        pytest.param(
            observed(),
            (),
            "Progressing",
            {"Ready": "False", "Progressing": "True", "Invalid": "False"},
            id="no-children",
        ),
        pytest.param(
            observed(dep("v1", 1), dep("v2", 0)),
            (),
            "Progressing",
            {"Ready": "False", "Progressing": "True"},
            id="candidate-not-ready",
        ),
        pytest.param(
            observed(dep("v1", 1), dep("v2", 1)),
            (),
            "Ready",
            {"Ready": "True", "Progressing": "False", "Unschedulable": "False"},
            id="all-ready",
        ),
        pytest.param(
            observed(dep("v1", 1), dep("v2", 1, gen=2, observed_gen=1)),
            (),
            "Progressing",
            {"Ready": "False"},
            id="stale-generation-not-ready",
        ),
        pytest.param(
            observed(dep("v1", 1), dep("v2", 1, replicas=2, updated=1)),
            (),
            "Progressing",
            {"Ready": "False"},
            id="rolling-update",
        ),
        pytest.param(
            observed(dep("v1", 1), dep("v2", 0), pods=(UNSCHEDULABLE,)),
            (),
            "Degraded",
            {"Unschedulable": "True", "Ready": "False"},
            id="unschedulable",
        ),
        pytest.param(
            observed(),
            ("spec.variants[0].lora: bad",),
            "Invalid",
            {"Invalid": "True"},
            id="invalid",
        ),
    ],
)
def test_phase_and_conditions(
    obs: ObservedState, problems: tuple[str, ...], phase: str, expected: dict[str, str]
) -> None:
    status = run(spec(), obs, problems=problems)
    assert status["phase"] == phase
    assert expected.items() <= conds(status).items()
    assert status["observedGeneration"] == 7


def test_unschedulable_message_names_variant_profile_and_scheduler_reason() -> None:
    status = run(spec(), observed(dep("v1", 1), dep("v2", 0), pods=(UNSCHEDULABLE,)))
    unsched = next(c for c in status["conditions"] if c["type"] == "Unschedulable")
    assert unsched["message"].startswith("variant v2 (1g.10gb): 0/3 nodes are available")
    assert "Insufficient nvidia.com/mig-7g.80gb" in status["message"]


def test_invalid_keeps_previous_readiness_and_writes_no_variants() -> None:
    ready = run(spec(), observed(dep("v1", 1), dep("v2", 1)))
    invalid = run(spec(), observed(), previous=ready, problems=("x: bad",))
    assert conds(invalid)["Ready"] == "True"
    assert "variants" not in invalid


@pytest.mark.parametrize(
    ("s", "obs", "weights"),
    [
        pytest.param(
            spec(),
            observed(dep("v1", 1), dep("v2", 1)),
            {"v1": 100, "v2": 0},
            id="default-all-on-stable",
        ),
        pytest.param(
            WEIGHTED,
            observed(dep("v1", 1), dep("v2", 1)),
            {"v1": 90, "v2": 10},
            id="initial-weights",
        ),
        pytest.param(
            WEIGHTED,
            observed(dep("v1", 1), dep("v2", 0)),
            {"v1": 100, "v2": 0},
            id="unready-candidate-gets-no-traffic",
        ),
        pytest.param(
            WEIGHTED,
            observed(dep("v1", 0), dep("v2", 0)),
            {"v1": 90, "v2": 10},
            id="nothing-ready-keeps-intent",
        ),
    ],
)
def test_effective_weights(
    s: SitsDeploymentSpec, obs: ObservedState, weights: dict[str, int]
) -> None:
    assert effective_weights(s, obs) == weights


def test_status_columns_for_kubectl_get() -> None:
    status = run(WEIGHTED, observed(dep("v1", 1), dep("v2", 1)))
    assert (status["stableVariant"], status["candidateVariant"], status["candidateWeight"]) == (
        "v1",
        "v2",
        10,
    )
    assert status["variants"][1] == {
        "name": "v2",
        "role": "candidate",
        "revision": "r1",
        "replicas": 1,
        "readyReplicas": 1,
        "updatedReplicas": 1,
        "weight": 10,
    }


def test_recomputing_an_unchanged_state_changes_nothing() -> None:
    """Same inputs later in time: identical status, so the reconciler skips the write."""
    obs = observed(dep("v1", 1), dep("v2", 1))
    first = run(spec(), obs)
    inputs = StatusInputs(7, spec(), (), obs, first, LATER)
    result = compute_status(inputs)
    assert not result.differs_from(first)
    assert not result.phase_changed
    assert result.flipped == ()


def test_transition_time_moves_only_on_flip() -> None:
    first = run(spec(), observed(dep("v1", 1), dep("v2", 0)))
    second = run(spec(), observed(dep("v1", 1), dep("v2", 1)), previous=first, now=LATER)
    times = {c["type"]: c["lastTransitionTime"] for c in second["conditions"]}
    assert times["Ready"] == LATER  # flipped False -> True
    assert times["Invalid"] == NOW  # stayed False


@pytest.mark.parametrize(
    ("old_status", "new_status", "moves"),
    [("True", True, False), ("False", True, True), ("True", False, True)],
)
def test_set_condition_table(old_status: str, new_status: bool, moves: bool) -> None:
    old = [Condition("Ready", old_status, "r", "m", NOW)]
    (new,) = set_condition(
        old, type_="Ready", status=new_status, reason="r2", message="m2", now=LATER, generation=2
    )
    assert new.last_transition_time == (LATER if moves else NOW)
    assert (new.reason, new.message, new.observed_generation) == ("r2", "m2", 2)
