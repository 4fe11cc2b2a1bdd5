"""benchmarks/results.py: the median's distribution-free interval every section reports."""

from __future__ import annotations

import math

import pytest
from benchmarks.results import median_interval


@pytest.mark.parametrize(
    ("n", "ranks"),
    [(6, (1, 6)), (10, (2, 9)), (20, (6, 15)), (30, (10, 21)), (100, (40, 61))],
)
def test_the_ranks_are_the_textbook_ones(n: int, ranks: tuple[int, int]) -> None:
    values = [float(10 * i) for i in range(n, 0, -1)]  # unsorted on purpose
    assert median_interval(values) == (10.0 * ranks[0], 10.0 * ranks[1])


@pytest.mark.parametrize("n", range(6, 80))
def test_coverage_is_at_least_the_level_and_one_rank_more_would_lose_it(n: int) -> None:
    low, _ = median_interval([float(i) for i in range(1, n + 1)]) or (0, 0)
    j = int(low)
    outside = 2 * sum(math.comb(n, i) for i in range(j)) / 2**n
    assert 1 - outside >= 0.95
    assert 1 - (outside + 2 * math.comb(n, j) / 2**n) < 0.95


def test_too_few_values_for_the_level_give_no_interval() -> None:
    assert median_interval([1.0, 2.0, 3.0, 4.0, 5.0]) is None
    assert median_interval([]) is None
