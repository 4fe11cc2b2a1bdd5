"""Each SitsDeployment's own period phase (core/analysis/schedule.py): whole slots of the
shared-answer age, the same on every replica, spread over the interval, and the period
numbers and due times that follow from it."""

from __future__ import annotations

import collections

import pytest

from sits_operator.core.analysis.schedule import (
    DUE_AFTER_START_SECONDS,
    period_index,
    period_phase,
    period_start,
    seconds_to_next_period,
    shared_max_age,
)
from tests.unit.test_analysis_driver import HEALTHY, T0, Run


@pytest.mark.parametrize(
    ("interval", "width", "slots"),
    [(30.0, 2.0, 15), (60.0, 2.0, 30), (8.0, 0.8, 10), (5.0, 0.5, 10), (1.0, 0.1, 10)],
)
def test_phases_are_whole_slots_inside_the_interval(
    interval: float, width: float, slots: int
) -> None:
    phases = {period_phase("team-a", f"chat-{i}", interval) for i in range(2000)}
    assert len(phases) == slots
    assert all(0 <= p < interval for p in phases)
    assert all(abs(p / width - round(p / width)) < 1e-9 for p in phases)
    assert shared_max_age(interval) == pytest.approx(width)


def test_a_thousand_deployments_spread_evenly() -> None:
    """What the analysis-scale benchmark relies on: no slot holds more than about twice
    its share, so the work due at once is a fraction of the whole."""
    counts = collections.Counter(period_phase("team-a", f"chat-{i:04d}", 30.0) for i in range(1000))
    assert len(counts) == 15
    assert max(counts.values()) <= 2 * 1000 / 15


@pytest.mark.parametrize(
    ("first", "second", "same"),
    [
        (("team-a", "chat"), ("team-a", "chat"), True),  # every replica, every leader
        (("team-a", "chat"), ("team-b", "chat"), False),
        (("team-a", "chat"), ("team-a", "chat-2"), False),
    ],
)
def test_the_phase_depends_on_namespace_and_name_only(
    first: tuple[str, str], second: tuple[str, str], same: bool
) -> None:
    """Namespace and name, not the uid: a SitsDeployment re-created by a GitOps sync keeps
    its schedule. ("different" is checked on names known to land in different slots.)"""
    assert (period_phase(*first, 30.0) == period_phase(*second, 30.0)) is same


@pytest.mark.parametrize(
    ("now", "phase", "index", "start", "next_in"),
    [
        (60.0, 0.0, 2, 60.0, 30.5),
        (89.9, 0.0, 2, 60.0, 0.6),
        (60.0, 4.0, 1, 34.0, 4.5),  # before its phase: still the previous period
        (64.0, 4.0, 2, 64.0, 30.5),
        (93.9, 4.0, 2, 64.0, 0.6),
        (94.0, 4.0, 3, 94.0, 30.5),
    ],
)
def test_periods_start_at_the_phase(
    now: float, phase: float, index: int, start: float, next_in: float
) -> None:
    assert period_index(now, 30.0, phase) == index
    assert period_start(now, 30.0, phase) == pytest.approx(start)
    assert seconds_to_next_period(now, 30.0, phase) == pytest.approx(next_in)


def test_the_due_time_lies_in_the_new_period_a_little_after_its_start() -> None:
    for phase in (0.0, 2.0, 28.0):
        now = 1_000_000.3
        due = now + seconds_to_next_period(now, 30.0, phase)
        assert period_index(due, 30.0, phase) == period_index(now, 30.0, phase) + 1
        assert due - period_start(due, 30.0, phase) == pytest.approx(DUE_AFTER_START_SECONDS)


# (seconds after T0 of two evaluations, phase, the second is a new period)
# T0 is one second into a grid period: the grid's boundaries are at T0 - 1 + 30 k, a
# phase of 4 s puts this deployment's at T0 + 3 + 30 k.
@pytest.mark.parametrize(
    ("first", "second", "phase", "new_period"),
    [
        (28.5, 29.5, 0.0, True),  # across the grid boundary T0 + 29
        (28.5, 29.5, 4.0, False),  # both in [T0 + 3, T0 + 33)
        (3.5, 32.5, 4.0, False),
        (3.5, 33.5, 4.0, True),  # across its own boundary T0 + 33
        (2.5, 3.5, 4.0, True),  # across T0 + 3
    ],
)
def test_a_period_is_counted_once_by_its_own_phase(
    first: float, second: float, phase: float, new_period: bool
) -> None:
    run = Run(phase=phase)
    run.period(HEALTHY, at=T0 + first)
    decision = run.period(HEALTHY, at=T0 + second)
    assert ("already evaluated" not in decision.reason) is new_period, decision.reason
