"""The Wilson score interval the L1 benchmark reports beside each rate, and the held-out
set's loader. (Pure: no embedding involved.)"""

from __future__ import annotations

import doctest

import pytest
from benchmarks.workloads.semantic import CATEGORIES, describe, load_heldout
from benchmarks.workloads.semantic import evaluate as ev


def test_doctest() -> None:
    failed, attempted = doctest.testmod(ev, raise_on_error=False)
    assert attempted >= 4
    assert failed == 0


@pytest.mark.parametrize("n", [1, 10, 53, 320, 1542])
def test_zero_successes_upper_bound_is_closed_form(n: int) -> None:
    z = 1.96
    low, high = ev.wilson(0, n)
    assert low == 0.0
    assert high == pytest.approx(z * z / (n + z * z))


@pytest.mark.parametrize(("k", "n"), [(0, 5), (1, 10), (3, 320), (17, 60), (200, 344), (9, 9)])
def test_symmetric_bounded_and_contains_the_estimate(k: int, n: int) -> None:
    low, high = ev.wilson(k, n)
    mirror_low, mirror_high = ev.wilson(n - k, n)
    assert 0.0 <= low <= k / n <= high <= 1.0
    assert low == pytest.approx(1 - mirror_high, abs=1e-12)
    assert high == pytest.approx(1 - mirror_low, abs=1e-12)


def test_published_value() -> None:
    # Newcombe (1998), table I, example (a): 81 / 263 -> 0.2553 to 0.3662 (Wilson, 95 %).
    low, high = ev.wilson(81, 263)
    assert (round(low, 4), round(high, 4)) == (0.2553, 0.3662)


def test_narrows_with_more_items() -> None:
    small, large = ev.wilson(1, 100), ev.wilson(10, 1000)
    assert large[1] - large[0] < small[1] - small[0]


def test_no_items_and_bad_counts() -> None:
    assert ev.wilson(0, 0) == (0.0, 1.0)
    with pytest.raises(ValueError, match="5 successes of 4"):
        ev.wilson(5, 4)


def test_heldout_loads_with_prefixed_ids() -> None:
    held = load_heldout()
    counts = describe(held)
    assert counts["intents"] == 114
    assert counts["paraphrase_queries"] == 344
    assert counts["near_misses"] == 320
    assert sum(counts["near_by_category"].values()) == 320
    assert {p.category for p in held.near_misses} <= set(CATEGORIES)
    assert all(i.id.startswith("heldout:") for i in held.intents)
    assert all(
        p.stored_intent.startswith("heldout:") and p.query_intent.startswith("heldout:")
        for p in held.near_misses
    )
