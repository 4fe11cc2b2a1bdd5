"""Choosing a variant, then an endpoint, for one request. Pure: no I/O, no clock.

Sticky requests use weighted rendezvous hashing (highest random weight): every routable
variant scores ``-weight / ln(u)`` with ``u`` a uniform hash of (session key, variant);
the highest score wins. A session lands on a variant with probability proportional to
its weight, and when one weight changes, only the sessions whose winner changes move:
raising a variant's weight only pulls sessions *to* it, lowering it only pushes sessions
*off* it, which is the least movement any weighted scheme can achieve. A weight of 0
scores nothing, so its sessions move to the remaining variants and it gets no new
traffic. Unlike a ring, no virtual nodes are needed for an even split, and the result
does not depend on the order variants are listed in.

The hash is keyed BLAKE2b, not Python's ``hash()``: the choice must be identical on every
gateway replica and across restarts, and ``hash()`` is salted per process.

Requests without a session key are split by a weighted draw from an injectable
``random.Random``, so tests can seed it.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from .table import RoutingTable, VariantRoute

_TWO_64 = float(2**64)


def unit_hash(key: bytes, salt: bytes) -> float:
    """A stable uniform value in the open interval (0, 1) for ``(key, salt)``."""
    digest = hashlib.blake2b(key, digest_size=8, key=salt[:64]).digest()
    return (int.from_bytes(digest, "big") + 0.5) / _TWO_64


def rendezvous_score(key: bytes, salt: bytes, weight: float) -> float:
    """Weighted rendezvous score; higher wins, weight 0 never wins."""
    if weight <= 0:
        return -math.inf
    return -weight / math.log(unit_hash(key, salt))


def rendezvous_pick(key: bytes, candidates: Sequence[tuple[bytes, float]]) -> int:
    """Index of the winning ``(salt, weight)`` candidate, -1 when none has weight."""
    best, best_score = -1, -math.inf
    for index, (salt, weight) in enumerate(candidates):
        score = rendezvous_score(key, salt, weight)
        if score > best_score:
            best, best_score = index, score
    return best


@dataclass(frozen=True, slots=True)
class Pick:
    """Where one request goes."""

    variant: str
    endpoint: str


class _VariantPool:
    """One routable variant's endpoints: rendezvous for sessions, round-robin otherwise."""

    __slots__ = ("_cycle", "_salted", "route", "salt")

    def __init__(self, route: VariantRoute) -> None:
        self.route = route
        self.salt = route.name.encode()
        self._salted = [(e.encode(), 1.0) for e in route.endpoints]
        self._cycle = itertools.cycle(route.endpoints)

    def endpoint(self, session: bytes | None) -> str:
        if session is None or len(self._salted) == 1:
            return next(self._cycle)
        # Same session, same pod: vLLM's prefix cache keeps the conversation's KV blocks.
        return self.route.endpoints[rendezvous_pick(session, self._salted)]


class Balancer:
    """Precomputed choice structures for one routing table (rebuilt when it changes)."""

    def __init__(self, table: RoutingTable, rng: random.Random | None = None) -> None:
        self.table = table
        self._rng = rng or random.Random()
        self._pools = [_VariantPool(v) for v in table.variants if v.routable]
        self._candidates = [(p.salt, float(p.route.weight)) for p in self._pools]
        self._cumulative = list(itertools.accumulate(p.route.weight for p in self._pools))

    @property
    def routable(self) -> tuple[str, ...]:
        return tuple(p.route.name for p in self._pools)

    def pick(self, session: str | None = None) -> Pick | None:
        """The variant and endpoint for a request; None when nothing can take it."""
        if not self._pools:
            return None
        key = session.encode() if session else None
        pool = self._pools[self._index(key)]
        return Pick(pool.route.name, pool.endpoint(key))

    def _index(self, key: bytes | None) -> int:
        if key is not None:
            return rendezvous_pick(key, self._candidates)
        draw = self._rng.random() * self._cumulative[-1]
        return bisect.bisect_right(self._cumulative, draw)
