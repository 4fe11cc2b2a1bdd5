"""Leader election: core/leadership.py's decisions driven with simulated time, the exact
Lease body the adapter writes, and the guards every write of the operator passes."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from sits_operator.adapters.kube import NoopKubeWriter
from sits_operator.adapters.lease import lease_body, lease_location_from_env, micro_time, record_of
from sits_operator.core.leadership import (
    Action,
    ElectionState,
    LeaseRecord,
    Timing,
    decide,
    may_act,
    next_look_in,
    released,
    written,
)
from sits_operator.handlers.leadership import (
    LeaderOnlyWriter,
    NotLeaderError,
    leader_only_poster,
)
from sits_operator.model.events import EventReason

T = Timing()  # 15 s lease, 10 s renew deadline, 2 s retry
ME, OTHER = "op-a", "op-b"
WALL = "2026-01-01T00:00:00.000000Z"


def held(holder: str, renew: str = WALL, transitions: int = 3) -> LeaseRecord:
    return LeaseRecord(holder, 15, "2025-12-31T23:00:00.000000Z", renew, transitions)


def leading(renewed_at: float, record: LeaseRecord | None = None) -> ElectionState:
    record = record or held(ME)
    return ElectionState(True, renewed_at, record, renewed_at, term=1)


def following(record: LeaseRecord, seen_at: float) -> ElectionState:
    return ElectionState(False, None, record, seen_at)


# (what, state before, Lease read, monotonic now, expected action, written holder, transitions)
CASES: list[tuple[str, ElectionState, LeaseRecord | None, float, Action, str | None, int]] = [
    ("no Lease: create it", ElectionState(), None, 0.0, Action.CREATE, ME, 0),
    (
        "first look at a held Lease: follow",
        ElectionState(),
        held(OTHER),
        100.0,
        Action.FOLLOW,
        None,
        0,
    ),
    ("released Lease: take it at once", ElectionState(), held(""), 0.0, Action.ACQUIRE, ME, 4),
    (
        "unchanged for 14.9 s: still fresh",
        following(held(OTHER), 0.0),
        held(OTHER),
        14.9,
        Action.FOLLOW,
        None,
        0,
    ),
    (
        "unchanged for 15 s: expired, take over",
        following(held(OTHER), 0.0),
        held(OTHER),
        15.0,
        Action.ACQUIRE,
        ME,
        4,
    ),
    (
        "renewed meanwhile: the wait restarts",
        following(held(OTHER), 0.0),
        held(OTHER, renew="2026-01-01T00:00:14.000000Z"),
        15.0,
        Action.FOLLOW,
        None,
        0,
    ),
    ("leader, 2 s after renewing: renew", leading(0.0), held(ME), 2.0, Action.RENEW, ME, 3),
    (
        "Lease names me after a restart: renew, no transition",
        ElectionState(),
        held(ME),
        5.0,
        Action.RENEW,
        ME,
        3,
    ),
    (
        "leader past the renew deadline: step down before anything",
        leading(0.0),
        held(ME),
        10.0,
        Action.STEP_DOWN,
        None,
        0,
    ),
    (
        "resumed after SIGSTOP, another holds it: step down",
        leading(0.0),
        held(OTHER),
        40.0,
        Action.STEP_DOWN,
        None,
        0,
    ),
    (
        "leader, yet another holds it: step down",
        leading(0.0),
        held(OTHER),
        3.0,
        Action.STEP_DOWN,
        None,
        0,
    ),
]


@pytest.mark.parametrize(
    ("state", "record", "now", "action", "holder", "transitions"),
    [case[1:] for case in CASES],
    ids=[case[0] for case in CASES],
)
def test_decisions(
    state: ElectionState,
    record: LeaseRecord | None,
    now: float,
    action: Action,
    holder: str | None,
    transitions: int,
) -> None:
    step = decide(state, record, identity=ME, now=now, wall_now=WALL, timing=T)
    assert step.action is action
    if holder is None:
        assert step.write is None
        return
    assert step.write is not None
    assert step.write.holder == holder
    assert step.write.transitions == transitions
    assert step.write.renew_time == WALL
    assert step.write.lease_duration_seconds == 15


def test_a_renewal_keeps_the_acquire_time_a_takeover_sets_it() -> None:
    renew = decide(leading(0.0), held(ME), identity=ME, now=2.0, wall_now=WALL, timing=T)
    assert renew.write is not None
    assert renew.write.acquire_time == "2025-12-31T23:00:00.000000Z"
    take = decide(ElectionState(), held(""), identity=ME, now=0.0, wall_now=WALL, timing=T)
    assert take.write is not None
    assert take.write.acquire_time == WALL


def test_may_act_only_until_the_renew_deadline_on_the_monotonic_clock() -> None:
    state = leading(100.0)
    assert may_act(state, 100.0, T)
    assert may_act(state, 109.99, T)
    assert not may_act(state, 110.0, T), "paused past the deadline: refuse before renewing"
    assert not may_act(ElectionState(), 0.0, T)
    assert not may_act(replace(state, leading=False), 100.0, T)


def test_a_successful_write_leads_and_opens_a_new_term_once() -> None:
    state = written(ElectionState(), held(ME), sent_at=50.0, now=50.1, timing=T)
    assert (state.leading, state.term, state.renewed_at) == (True, 1, 50.0)
    state = written(state, held(ME), sent_at=52.0, now=52.1, timing=T)
    assert (state.term, state.renewed_at) == (1, 52.0), "a renewal is the same term"
    down = decide(state, held(ME), identity=ME, now=70.0, wall_now=WALL, timing=T)
    assert down.action is Action.STEP_DOWN
    again = written(down.state, held(ME), sent_at=70.0, now=70.1, timing=T)
    assert (again.leading, again.term) == (True, 2), "leading again: a new term"


def test_a_write_that_returns_after_the_deadline_does_not_lead() -> None:
    """Sent, then the process was paused while it was in flight: the success is stale."""
    state = written(ElectionState(), held(ME), sent_at=0.0, now=12.0, timing=T)
    assert not state.leading
    assert not may_act(state, 12.0, T)


def test_simulated_takeover_timeline() -> None:
    """A follower looking every retry period sees the leader's renewals, then none: it
    takes over lease_duration after the last change it saw, never sooner."""
    state, renew_at, now = ElectionState(), 0.0, 0.0
    record = held(OTHER, renew=micro_time(renew_at))
    acquired_at = None
    killed_at = 7.0  # the leader renews at 0, 2, 4, 6 and then dies
    while now < 40.0:
        if now < killed_at and now - renew_at >= 2.0:
            renew_at = now
            record = held(OTHER, renew=micro_time(1000 + renew_at))
        step = decide(state, record, identity=ME, now=now, wall_now=WALL, timing=T)
        state = step.state
        if step.action is Action.ACQUIRE:
            acquired_at = now
            break
        assert step.action is Action.FOLLOW
        now += next_look_in(state, now, T)
    assert acquired_at is not None
    assert 6.0 + T.lease_duration <= acquired_at <= 6.0 + T.lease_duration + T.retry_period
    assert acquired_at - killed_at <= T.lease_duration + T.retry_period


def test_next_look_is_at_the_expiry_when_it_comes_before_the_retry_period() -> None:
    state = following(held(OTHER), 0.0)
    assert next_look_in(state, 0.0, T) == 2.0
    assert next_look_in(state, 14.0, T) == pytest.approx(1.0)
    assert next_look_in(leading(0.0), 1.0, T) == 2.0


def test_release_frees_the_lease_for_an_immediate_takeover() -> None:
    gone = released(held(ME), wall_now=WALL)
    assert (gone.holder, gone.lease_duration_seconds, gone.transitions) == ("", 1, 3)
    step = decide(following(held(ME), 0.0), gone, identity=OTHER, now=0.5, wall_now=WALL, timing=T)
    assert step.action is Action.ACQUIRE


@pytest.mark.parametrize(
    ("timing"), [(15.0, 15.0, 2.0), (15.0, 10.0, 10.0), (15.0, 10.0, 0.0)], ids=str
)
def test_timings_that_cannot_work_are_refused(timing: tuple[float, float, float]) -> None:
    with pytest.raises(ValueError, match="retry_period < renew_deadline < lease_duration"):
        Timing(*timing)


def test_the_lease_body_is_exactly_a_coordination_v1_lease() -> None:
    record = LeaseRecord(ME, 15, "2026-01-01T00:00:00.000001Z", "2026-01-01T00:00:02.5Z", 4)
    body = lease_body("sits-operator", "sits-system", record, "123")
    assert body == {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {"name": "sits-operator", "namespace": "sits-system", "resourceVersion": "123"},
        "spec": {
            "holderIdentity": ME,
            "leaseDurationSeconds": 15,
            "leaseTransitions": 4,
            "acquireTime": "2026-01-01T00:00:00.000001Z",
            "renewTime": "2026-01-01T00:00:02.5Z",
        },
    }
    assert "resourceVersion" not in lease_body("l", "ns", record)["metadata"], "a create"
    assert record_of(body) == record
    assert micro_time(0.25) == "1970-01-01T00:00:00.250000Z"


def test_the_lease_namespace_comes_from_the_environment(tmp_path: Any) -> None:
    missing = tmp_path / "none"
    env = {"SITS_LEADER_ELECTION_NAMESPACE": "ops", "POD_NAMESPACE": "pods"}
    assert lease_location_from_env(env, missing) == ("ops", "sits-operator")
    assert lease_location_from_env({"POD_NAMESPACE": "pods"}, missing)[0] == "pods"
    account = tmp_path / "namespace"
    account.write_text("from-sa\n")
    named = {"SITS_LEADER_ELECTION_NAME": "mine"}
    assert lease_location_from_env(named, account) == ("from-sa", "mine")
    with pytest.raises(RuntimeError, match="SITS_LEADER_ELECTION_NAMESPACE"):
        lease_location_from_env({}, missing)


async def test_a_follower_writes_nothing_and_posts_nothing() -> None:
    leader = [True]
    inner = NoopKubeWriter()
    writer = LeaderOnlyWriter(inner, lambda: leader[0])
    posted: list[str] = []
    post = leader_only_poster(lambda b, t, reason, m: posted.append(reason), lambda: leader[0])
    manifest = {"kind": "Service", "metadata": {"name": "s", "namespace": "ns"}}
    await writer.apply(manifest)
    post({}, "Normal", EventReason.STEP, "")
    leader[0] = False
    with pytest.raises(NotLeaderError):
        await writer.apply(manifest)
    with pytest.raises(NotLeaderError):
        await writer.patch_status(namespace="ns", name="s", status={})
    with pytest.raises(NotLeaderError):
        await writer.delete(kind="Service", namespace="ns", name="s")
    with pytest.raises(NotLeaderError):
        post({}, "Normal", EventReason.STEP, "")
    assert [c for c, _ in inner.calls] == ["apply"]
    assert posted == ["Step"]
