"""Leader election over a coordination.k8s.io/v1 Lease: the decisions, without I/O.

The rules are client-go's leaderelection package, in pure functions a table test can drive
with simulated time:

- Nobody's clock is trusted but one's own. A follower does not compare the Lease's
  `renewTime` with its wall clock; it notes, on its own monotonic clock, when it *saw* the
  record change, and holds the Lease expired once `leaseDurationSeconds` passed after that
  without a further change. A takeover therefore comes between `lease_duration` and
  `lease_duration + retry_period` after the leader's last renewal.
- The leader renews every `retry_period`; a write carries the resourceVersion it read
  (optimistic concurrency: of two candidates racing for one expired Lease, one gets 409).
- The leader may act only while its last successful renewal, on its monotonic clock taken
  *before* the write was sent, is younger than `renew_deadline` (< `lease_duration`). A
  process that was paused (SIGSTOP, a partition, a stalled event loop) finds its deadline
  passed the moment it resumes and stops acting before anything else runs: `may_act` reads
  the clock, it does not wait for the renew task. The gap between the two durations is
  the margin for the follower's observation lag and the clocks' rate differences.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from enum import StrEnum

LEASE_DURATION_SECONDS = 15.0
RENEW_DEADLINE_SECONDS = 10.0
RETRY_PERIOD_SECONDS = 2.0
# How soon to look again after the Lease is due to expire (a poll, not a busy loop).
MIN_CHECK_SECONDS = 0.05


@dataclass(frozen=True)
class Timing:
    lease_duration: float = LEASE_DURATION_SECONDS
    renew_deadline: float = RENEW_DEADLINE_SECONDS
    retry_period: float = RETRY_PERIOD_SECONDS

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs 0 < retry_period < renew_deadline < lease_duration, "
                f"got {self.retry_period}, {self.renew_deadline}, {self.lease_duration}"
            )


@dataclass(frozen=True)
class LeaseRecord:
    """A Lease's spec as the election reads and writes it (times are MicroTime strings;
    the resourceVersion travels beside it, in the adapter)."""

    holder: str = ""
    lease_duration_seconds: int = int(LEASE_DURATION_SECONDS)
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0


class Action(StrEnum):
    CREATE = "create"  # no Lease yet: create it, held by me
    ACQUIRE = "acquire"  # released, or expired by my observation: take it over
    RENEW = "renew"  # mine: renew it
    FOLLOW = "follow"  # another's, still fresh: write nothing, look again later
    STEP_DOWN = "step-down"  # I was leading and must stop now


@dataclass(frozen=True)
class ElectionState:
    """What one candidate remembers between two looks at the Lease."""

    leading: bool = False
    # Monotonic reading taken before the last successful create/acquire/renew was sent.
    renewed_at: float | None = None
    observed: LeaseRecord | None = None
    # Monotonic reading when `observed` was first seen as it is.
    observed_at: float | None = None
    # Times this process became the leader: a new term means its memory may be stale.
    term: int = 0


@dataclass(frozen=True)
class Step:
    action: Action
    state: ElectionState
    write: LeaseRecord | None = None  # what to write for CREATE, ACQUIRE and RENEW
    reason: str = ""


def may_act(state: ElectionState, now: float, timing: Timing) -> bool:
    """True while this process leads and its last renewal is younger than the deadline."""
    return (
        state.leading
        and state.renewed_at is not None
        and now - state.renewed_at < timing.renew_deadline
    )


def _duration(record: LeaseRecord, timing: Timing) -> float:
    return (
        float(record.lease_duration_seconds)
        if record.lease_duration_seconds > 0
        else (timing.lease_duration)
    )


def _observe(state: ElectionState, record: LeaseRecord, now: float) -> ElectionState:
    if state.observed == record and state.observed_at is not None:
        return state
    return replace(state, observed=record, observed_at=now)


def expires_in(state: ElectionState, now: float, timing: Timing) -> float | None:
    """Seconds until the observed Lease expires by this process's observation (None: no
    holder, it is free now)."""
    record = state.observed
    if record is None or not record.holder or state.observed_at is None:
        return None
    return state.observed_at + _duration(record, timing) - now


def decide(
    state: ElectionState,
    record: LeaseRecord | None,
    *,
    identity: str,
    now: float,
    wall_now: str,
    timing: Timing,
) -> Step:
    """What to do after reading the Lease (`record`, None when there is none).

    `now` is the monotonic clock, `wall_now` the MicroTime written into the record.
    """
    if state.leading and not may_act(state, now, timing):
        since = "never" if state.renewed_at is None else f"{now - state.renewed_at:.1f} s ago"
        return Step(
            Action.STEP_DOWN,
            replace(state, leading=False),
            reason=f"last renewal {since}, past the {timing.renew_deadline:g} s deadline",
        )
    duration = int(timing.lease_duration)
    if record is None:
        fresh = LeaseRecord(identity, duration, wall_now, wall_now, 0)
        return Step(Action.CREATE, state, fresh, reason="no Lease yet")
    state = _observe(state, record, now)
    if record.holder == identity:
        renewal = replace(
            record,
            lease_duration_seconds=duration,
            acquire_time=record.acquire_time or wall_now,
            renew_time=wall_now,
        )
        return Step(Action.RENEW, state, renewal)
    left = expires_in(state, now, timing)
    if left is not None and left > 0:
        if state.leading:
            reason = f"the Lease is held by {record.holder}"
            return Step(Action.STEP_DOWN, replace(state, leading=False), reason=reason)
        return Step(Action.FOLLOW, state, reason=f"{record.holder} holds the Lease")
    why = "released" if not record.holder else f"{record.holder}'s Lease expired"
    takeover = LeaseRecord(identity, duration, wall_now, wall_now, record.transitions + 1)
    return Step(Action.ACQUIRE, state, takeover, reason=why)


def written(
    state: ElectionState, record: LeaseRecord, *, sent_at: float, now: float, timing: Timing
) -> ElectionState:
    """The create/acquire/renew write succeeded. A success that comes back after the
    deadline (the process was paused while it was in flight) does not make it lead: the
    next look renews again before it acts."""
    state = replace(state, observed=record, observed_at=sent_at)
    if now - sent_at >= timing.renew_deadline:
        return replace(state, leading=False)
    term = state.term if state.leading else state.term + 1
    return replace(state, leading=True, renewed_at=sent_at, term=term)


def released(record: LeaseRecord, *, wall_now: str) -> LeaseRecord:
    """The record a leader writes when it shuts down: no holder, so the next candidate
    takes over at once instead of after the lease duration (client-go's ReleaseOnCancel)."""
    return replace(record, holder="", lease_duration_seconds=1, renew_time=wall_now)


def next_look_in(state: ElectionState, now: float, timing: Timing) -> float:
    """Seconds until the next look: the retry period, or sooner when the observed Lease
    expires before then (a follower takes over at the expiry, not up to a period later)."""
    if state.leading:
        return timing.retry_period
    left = expires_in(state, now, timing)
    if left is None:
        return timing.retry_period
    return min(timing.retry_period, max(left, MIN_CHECK_SECONDS))
