"""The pure parts of the analysis-scale benchmark's lag measurement
(benchmarks/evaluation_watch.py): each deployment's evaluation of a period counts once,
against the right boundary, and only for boundaries inside the measured window."""

from __future__ import annotations

import math

import pytest
from benchmarks.evaluation_watch import (
    Arrival,
    deployment_phase,
    evaluation_lags,
    parse_line,
    quantile,
    summary,
)


def on_grid(key: str, interval: float) -> float:
    return 0.0


def test_each_deployment_is_measured_from_its_own_phase() -> None:
    phase = deployment_phase("ns-a/chat-0001", 30.0)
    start = 60.0 + phase  # one of its periods
    arrivals = [Arrival(start + 0.9, "ns-a/chat-0001", start + 0.5)]
    assert evaluation_lags(arrivals, 30.0, 45.0, 105.0) == pytest.approx([0.9])


def test_an_event_line_names_the_object_and_its_evaluation() -> None:
    assert parse_line("ns-a/chat-0001 1733385630.52\n", 12.0) == Arrival(
        12.0, "ns-a/chat-0001", 1733385630.52
    )


@pytest.mark.parametrize("line", ["ns-a/chat-0001 \n", "ns-a/chat-0001\n", ""])
def test_an_object_not_yet_analysed_is_no_evaluation(line: str) -> None:
    assert parse_line(line, 12.0) is None


def test_each_evaluation_counts_once_from_its_boundary() -> None:
    arrivals = [
        Arrival(60.9, "a", 60.5),
        Arrival(61.2, "b", 60.5),
        Arrival(61.4, "a", 60.5),  # the same pass's second status change: not counted
        Arrival(91.7, "a", 90.6),
    ]
    assert evaluation_lags(arrivals, 30.0, 45.0, 105.0, on_grid) == pytest.approx([0.9, 1.2, 1.7])


def test_only_boundaries_inside_the_window_count() -> None:
    arrivals = [
        Arrival(31.0, "a", 30.5),  # boundary 30: before the window
        Arrival(52.0, "a", 50.0),  # first pass under a new policy: boundary 30 too
        Arrival(61.0, "a", 60.5),
        Arrival(122.0, "a", 120.5),  # boundary 120: at the window's end, outside
    ]
    assert evaluation_lags(arrivals, 30.0, 45.0, 120.0, on_grid) == pytest.approx([1.0])


def test_a_late_event_still_counts_for_its_own_period() -> None:
    """Arrival order is not evaluation order: an event that arrives after the next
    boundary is still the earlier period's, with its whole lag."""
    arrivals = [Arrival(95.0, "a", 60.5), Arrival(93.0, "b", 90.5)]
    lags = evaluation_lags(arrivals, 30.0, 45.0, 105.0, on_grid)
    assert sorted(lags) == pytest.approx([3.0, 35.0])


@pytest.mark.parametrize(("q", "expected"), [(0.5, 50.0), (0.99, 99.0), (1.0, 100.0), (0.001, 1.0)])
def test_quantiles_are_observed_values(q: float, expected: float) -> None:
    assert quantile([float(v) for v in range(100, 0, -1)], q) == expected


def test_no_samples_give_no_figures() -> None:
    figures = summary([])
    assert figures["count"] == 0
    assert all(math.isnan(figures[k]) for k in ("p50", "p99", "max"))
