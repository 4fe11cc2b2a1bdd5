"""docs/benchmarks.md: each benchmark owns one `## ` section and rewrites only that one."""

from __future__ import annotations

import math
import os
import subprocess
from collections.abc import Sequence
from pathlib import Path

RESULTS = Path(__file__).resolve().parents[1] / "docs" / "benchmarks.md"


def commit() -> str:
    """The checkout's short commit, `+dirty` when files differ from it: every figure in
    docs/benchmarks.md says which code produced it."""
    head = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
    )
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True)
    return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def load_average() -> str:
    """The 1, 5 and 15-minute load averages, as each section records the machine's load."""
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


def median_interval(values: Sequence[float], level: float = 0.95) -> tuple[float, float] | None:
    """A distribution-free interval for the median: the order statistics x(j) and
    x(n-j+1) with the largest j such that Binomial(n, 1/2) puts at most (1-level)/2 below
    j. No assumption on the shape (latencies are skewed); None when n is too small for
    the level (fewer than 6 values for 95 %)."""
    n = len(values)
    tail, below, j = (1 - level) / 2, 0.0, 0
    while j < n and below + math.comb(n, j) / 2**n <= tail:
        below += math.comb(n, j) / 2**n
        j += 1
    if j == 0:
        return None
    ordered = sorted(values)
    return ordered[j - 1], ordered[n - j]


def write_section(section: str, results: Path = RESULTS) -> None:
    """Replace the section with the same `## ` heading as `section`, or append it."""
    heading = section.splitlines()[0]
    text = results.read_text() if results.exists() else "# Benchmarks\n\n"
    if heading in text:
        head, _, tail = text.partition(heading)
        rest = tail.split("\n## ", 1)
        text = head + section + ("\n## " + rest[1] if len(rest) > 1 else "")
    else:
        text = text.rstrip("\n") + "\n\n" + section
    results.write_text(text)
    print(section)
