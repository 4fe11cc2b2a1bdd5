"""Table-driven tests of status computation: phases, conditions, weights."""

from __future__ import annotations

from typing import Any

import pytest

from sits_operator.core.conditions import set_condition
from sits_operator.core.containers import MESSAGE_TAIL_CHARS, tail
from sits_operator.core.status import StatusInputs, compute_status, effective_weights
from sits_operator.model.observed import (
    ContainerTermination,
    ObservedContainer,
    ObservedDeployment,
    ObservedPod,
    ObservedState,
)
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


# Router builtin (the default) also waits for its gateway: ready here unless a test says.
READY_GATEWAY = ObservedDeployment("", None, 2, 2, 2, 2, 1, 1, component="gateway")


def observed(*deps: ObservedDeployment, pods: tuple[ObservedPod, ...] = ()) -> ObservedState:
    return ObservedState(deployments=(*deps, READY_GATEWAY), pods=pods)


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


def test_invalid_is_stalled_keeps_pod_conditions_and_writes_no_variants() -> None:
    """An invalid spec cannot progress without an edit: Stalled, so not Ready; what the
    pods were doing (Progressing, Unschedulable) stays as last seen."""
    ready = run(spec(), observed(dep("v1", 1), dep("v2", 1)))
    invalid = run(spec(), observed(), previous=ready, problems=("x: bad",))
    assert {k: conds(invalid)[k] for k in ("Ready", "Stalled", "Reconciling", "Progressing")} == {
        "Ready": "False",
        "Stalled": "True",
        "Reconciling": "False",
        "Progressing": "False",
    }
    stalled = next(c for c in invalid["conditions"] if c["type"] == "Stalled")
    assert (stalled["reason"], stalled["message"]) == ("InvalidSpec", "x: bad")
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
        "restarts": 0,
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


# ------------------------------------------------------------ containers that fail

BAD_ARG_LOG = (
    "INFO 12-02 10:00:01 api_server.py:1 vLLM API server version 0.11.0\n"
    "usage: api_server.py [-h] [--model MODEL] ...\n"
    "api_server.py: error: unrecognized arguments: --max-model-lenght=8192\n"
)
CRASHED = ContainerTermination(1, "Error", BAD_ARG_LOG, "2026-12-02T09:59:58Z")


def container(
    name: str = "vllm",
    *,
    restarts: int = 0,
    waiting: str | None = None,
    waiting_message: str | None = None,
    ended: ContainerTermination | None = None,
    ready: bool = False,
) -> ObservedContainer:
    return ObservedContainer(name, restarts, ready, waiting, waiting_message, ended)


def pod(name: str, variant: str, *containers: ObservedContainer) -> ObservedPod:
    return ObservedPod(name, variant, "Running", containers=containers)


HEALTHY_V1 = pod("chat-v1-a", "v1", container(ready=True), container("sits-cache", ready=True))
CRASH_LOOP_V2 = pod(
    "chat-v2-b",
    "v2",
    container(restarts=4, waiting="CrashLoopBackOff", ended=CRASHED),
    container("sits-cache", ready=True),
)


def failing(status: dict[str, Any]) -> dict[str, Any]:
    return dict(next(c for c in status["conditions"] if c["type"] == "ContainersFailing"))


@pytest.mark.parametrize(
    ("pods", "expected_status", "reason", "fragments"),
    [
        pytest.param(
            (HEALTHY_V1, CRASH_LOOP_V2),
            "True",
            "CrashLoopBackOff",
            (
                "variant v2 pod chat-v2-b container vllm: CrashLoopBackOff after 4 restart(s), "
                "exit code 1 (Error) at 2026-12-02T09:59:58Z: ",
                "error: unrecognized arguments: --max-model-lenght=8192",
            ),
            id="bad-vllm-argument",
        ),
        pytest.param(
            (
                HEALTHY_V1,
                pod(
                    "chat-v2-b",
                    "v2",
                    container(
                        waiting="ImagePullBackOff",
                        waiting_message='Back-off pulling image "vllm/vllm-openai:v9"',
                    ),
                ),
            ),
            "True",
            "ImagePullBackOff",
            ('container vllm: ImagePullBackOff, Back-off pulling image "vllm/vllm-openai:v9"',),
            id="image-not-pullable",
        ),
        pytest.param(
            (HEALTHY_V1, pod("chat-v2-b", "v2", container(waiting="ErrImageNeverPull"))),
            "True",
            "ErrImageNeverPull",
            ("variant v2 pod chat-v2-b container vllm: ErrImageNeverPull",),
            id="image-never-pulled",
        ),
        pytest.param(
            (
                HEALTHY_V1,
                pod(
                    "chat-v2-b",
                    "v2",
                    container(
                        waiting="CreateContainerConfigError",
                        waiting_message='secret "hf-token" not found',
                    ),
                ),
            ),
            "True",
            "CreateContainerConfigError",
            ('CreateContainerConfigError, secret "hf-token" not found',),
            id="config-error",
        ),
        pytest.param(
            (HEALTHY_V1, pod("chat-v2-b", "v2", container(waiting="Some new reason"))),
            "True",
            "ContainerFailing",
            ("container vllm: Some new reason",),
            id="reason-not-a-condition-reason",
        ),
        pytest.param(
            (HEALTHY_V1, pod("chat-v2-b", "v2", container(waiting="ContainerCreating"))),
            "False",
            "NoContainerFailing",
            (),
            id="still-creating",
        ),
        pytest.param(
            (HEALTHY_V1, pod("chat-v2-b", "v2", container(waiting="PodInitializing"))),
            "False",
            "NoContainerFailing",
            (),
            id="still-initializing",
        ),
        pytest.param(
            (
                HEALTHY_V1,
                pod("chat-v2-b", "v2", container(restarts=1, ended=CRASHED, ready=True)),
            ),
            "False",
            "NoContainerFailing",
            (),
            id="killed-and-restarted-runs-again",
        ),
    ],
)
def test_containers_failing_condition(
    pods: tuple[ObservedPod, ...], expected_status: str, reason: str, fragments: tuple[str, ...]
) -> None:
    status = run(spec(), observed(dep("v1", 1), dep("v2", 0), pods=pods))
    cond = failing(status)
    assert (cond["status"], cond["reason"]) == (expected_status, reason)
    for fragment in fragments:
        assert fragment in cond["message"]
    assert status["phase"] == ("Degraded" if expected_status == "True" else "Progressing")
    if expected_status == "True":
        assert status["message"] == cond["message"], "kubectl get -o wide shows why"


def test_failing_candidate_gets_no_traffic_and_stable_is_unchanged() -> None:
    healthy = run(WEIGHTED, observed(dep("v1", 1), dep("v2", 1), pods=(HEALTHY_V1,)))
    crashing = run(
        WEIGHTED,
        observed(dep("v1", 1), dep("v2", 0), pods=(HEALTHY_V1, CRASH_LOOP_V2)),
        previous=healthy,
        now=LATER,
    )
    rows = {r["name"]: r for r in crashing["variants"]}
    assert rows["v1"] == {**healthy["variants"][0], "weight": 100}
    assert (rows["v2"]["weight"], rows["v2"]["readyReplicas"], rows["v2"]["restarts"]) == (0, 0, 4)
    assert crashing["candidateWeight"] == 0
    assert failing(crashing)["lastTransitionTime"] == LATER


def test_restarts_are_summed_per_variant_over_pods_and_containers() -> None:
    pods = (
        pod("chat-v1-a", "v1", container(restarts=2, ready=True), container("sits-cache")),
        pod("chat-v1-b", "v1", container(restarts=1, ready=True), container("sits-cache")),
        pod("chat-v2-a", "v2", container(ready=True), container("sits-cache", restarts=3)),
    )
    status = run(spec(), observed(dep("v1", 2), dep("v2", 1), pods=pods))
    assert {r["name"]: r["restarts"] for r in status["variants"]} == {"v1": 3, "v2": 3}
    assert failing(status)["status"] == "False"


def test_each_failing_variant_is_named_once_with_a_count_of_the_rest() -> None:
    pods = (
        pod("chat-v1-a", "v1", container("sits-cache", waiting="CrashLoopBackOff", ended=CRASHED)),
        CRASH_LOOP_V2,
        pod("chat-v2-c", "v2", container(restarts=2, waiting="CrashLoopBackOff", ended=CRASHED)),
    )
    message = failing(run(spec(), observed(dep("v1", 0), dep("v2", 0), pods=pods)))["message"]
    first_v1, first_v2 = message.split("; ")
    assert first_v1.startswith("variant v1 pod chat-v1-a container sits-cache: CrashLoopBackOff")
    assert first_v2.startswith("variant v2 pod chat-v2-b container vllm:")
    assert first_v2.endswith("(and 1 more failing container(s) in v2)")


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        pytest.param("", "", id="empty"),
        pytest.param("one line\n", "one line", id="one-line"),
        pytest.param("a\n\n  b  \nc", "a | b | c", id="lines-joined"),
        pytest.param(
            "x" * 1000 + "\nValueError: bad",
            "..." + ("x" * 1000 + " | ValueError: bad")[-(MESSAGE_TAIL_CHARS - 3) :],
            id="long-log-keeps-its-end",
        ),
    ],
)
def test_termination_message_tail(log: str, expected: str) -> None:
    assert tail(log) == expected
    assert len(tail(log)) <= MESSAGE_TAIL_CHARS
