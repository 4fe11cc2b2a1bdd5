"""The gateway's own sliding-window SLIs (span attributes), on a simulated clock."""

from __future__ import annotations

import pytest

from sits_inference.gateway.window import RollingCounts, VariantWindow, histogram_quantile


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


BOUNDS = (0.1, 0.2, 0.5, 1.0)


@pytest.mark.parametrize(
    ("q", "counts", "expected"),
    [
        (0.95, [0, 0, 0, 0, 0], None),
        (0.5, [10, 0, 0, 0, 0], 0.05),
        (0.95, [0, 100, 0, 0, 0], 0.195),
        (0.5, [50, 50, 0, 0, 0], 0.1),
        (0.75, [50, 50, 0, 0, 0], 0.15),
        (0.95, [0, 0, 0, 0, 10], 1.0),  # in +Inf: the highest finite bound, as Prometheus does
    ],
)
def test_histogram_quantile_interpolates_like_prometheus(
    q: float, counts: list[int], expected: float | None
) -> None:
    result = histogram_quantile(q, BOUNDS, counts)
    assert result == (None if expected is None else pytest.approx(expected))


def test_rolling_counts_forget_what_left_the_window() -> None:
    clock = Clock()
    counts = RollingCounts(seconds=3, width=2, clock=clock)
    counts.add(0)
    clock.now += 1
    counts.add(1, 5)
    assert counts.totals == [1, 5]
    clock.now += 2  # the first second is now 3 s old
    counts.advance()
    assert counts.totals == [0, 5]
    clock.now += 100  # a long idle gap clears everything, in bounded work
    counts.advance()
    assert counts.totals == [0, 0]


def test_success_rate_over_five_minutes_and_p95_over_one() -> None:
    clock = Clock()
    window = VariantWindow(BOUNDS, clock=clock)
    assert window.success_rate() is None
    assert window.latency_p95_ms() is None
    for _ in range(90):
        window.record(True, 0.05)
    for _ in range(10):
        window.record(False, 0.8)
    assert window.success_rate() == pytest.approx(0.9)
    assert window.latency_p95_ms() == pytest.approx(750.0)
    clock.now += 61  # latency window (1 m) is empty, success window (5 m) is not
    assert window.latency_p95_ms() is None
    assert window.success_rate() == pytest.approx(0.9)
    clock.now += 240
    assert window.success_rate() is None
