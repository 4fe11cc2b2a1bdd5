"""Which resident adapter to give up when a slot is needed: decayed frequency x reload cost.

The value of keeping adapter ``a`` resident is the expected cost of *not* having it:

    value(a, now) = decayed_requests(a, now) * reload_cost(a)

``decayed_requests`` is a request count in which each request's weight halves every
``half_life_s`` (LFU with exponential aging); ``reload_cost`` is the adapter's size in
bytes, a stable proxy for load time (disk read plus host-to-device copy). Every adapter
occupies one slot whatever its size (vLLM pads slots to ``--max-lora-rank``), so unlike
GDSF there is no division by size: a large adapter is simply more expensive to lose.
With equal sizes the policy is LFU with aging.

Why not LRU: adapter popularity is heavily skewed (a few tenants send most requests).
Under LRU every request for a rare adapter pushes out the least recently used one, which
is regularly a popular adapter that was merely quiet for a moment; it is then reloaded
seconds later. Under decayed frequency the M-1 most popular adapters stay put and rare
adapters churn through the remaining slot: for Zipf(1.1) over 32 adapters and 4 slots
that is ~50 % hits against LRU's ~37 % (see ``benchmarks/lora_residency.py``). Aging keeps
the advantage when popularity shifts: a formerly hot adapter's count halves every
half-life, so a new favourite overtakes it within a few half-lives, not never (pure LFU).

Ties (equal value) go to the adapter idle the longest, then by name, so choices are
deterministic. The policy is pure: the caller supplies ``now`` and the candidates.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Candidate:
    """An adapter that may be evicted now (resident, idle, not pinned)."""

    name: str
    cost: float
    last_used: float


@dataclass
class _Count:
    value: float
    stamp: float


class DecayedFrequency:
    """Per-adapter request counts that halve every ``half_life_s`` seconds."""

    def __init__(self, half_life_s: float) -> None:
        if half_life_s <= 0:
            raise ValueError("half_life_s must be positive")
        self._rate = math.log(2.0) / half_life_s
        self._counts: dict[str, _Count] = {}

    def record(self, name: str, now: float) -> None:
        """One more request for ``name`` at ``now``."""
        self._counts[name] = _Count(self.count(name, now) + 1.0, now)

    def count(self, name: str, now: float) -> float:
        """The decayed request count of ``name`` at ``now`` (0 if never requested)."""
        entry = self._counts.get(name)
        if entry is None:
            return 0.0
        return entry.value * math.exp(-self._rate * max(0.0, now - entry.stamp))

    def value(self, candidate: Candidate, now: float) -> float:
        """What keeping ``candidate`` resident is worth: decayed count x reload cost."""
        return self.count(candidate.name, now) * max(candidate.cost, 1.0)

    def choose_victim(self, candidates: Iterable[Candidate], now: float) -> Candidate | None:
        """The least valuable candidate (ties: idle longest, then name), or None if none."""
        return min(
            candidates,
            key=lambda c: (self.value(c, now), c.last_used, c.name),
            default=None,
        )
