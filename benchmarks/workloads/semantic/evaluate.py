"""Hit and false-hit rates of the L1 decision rule, for a sweep of thresholds.

The rule is the cache's own (`SemanticCache._lookup`): the `CANDIDATES` most similar
stored texts in order, the first at or above the threshold that the guard accepts (or,
without the guard, simply the first at or above it). Here the search is exact (numpy
over all stored rows), so the sweep measures the rule, not the index; the end-to-end
run with the real cache at the default threshold measures both.

Protocols:
- paraphrases: one phrasing of every intent is stored in one cache; every other phrasing
  is a query. A hit on the query's own intent is a correct hit; a hit on another intent
  is a wrong answer.
- near misses: per pair, the stored side alone in a cache, the other side as the query;
  any hit is a false hit.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from benchmarks.workloads.semantic import Workload
from sits_inference.cache.embedding import Vectors
from sits_inference.cache.semantic import guard
from sits_inference.cache.semantic.cache import CANDIDATES

SPLITS = ("dev", "heldout", "all")


@dataclass(frozen=True, slots=True)
class Query:
    text: str
    intent: str
    split: str
    # (similarity, stored intent, guard verdict: None = accepted, else the reason)
    candidates: tuple[tuple[float, str, str | None], ...]


@dataclass(frozen=True, slots=True)
class Pair:
    similarity: float
    verdict: str | None
    category: str
    split: str


@dataclass(slots=True)
class Rates:
    queries: int = 0
    correct: int = 0
    wrong: int = 0
    near: int = 0
    false_hits: int = 0
    lost_to_guard: Counter[str] = field(default_factory=Counter)
    false_by_category: Counter[str] = field(default_factory=Counter)
    near_by_category: Counter[str] = field(default_factory=Counter)

    @property
    def hit_rate(self) -> float:
        return self.correct / max(1, self.queries)

    @property
    def wrong_rate(self) -> float:
        return self.wrong / max(1, self.queries)

    @property
    def false_rate(self) -> float:
        return self.false_hits / max(1, self.near)


def paraphrase_queries(
    workload: Workload, vectors: dict[str, Vectors], stored: Sequence[tuple[str, str]]
) -> list[Query]:
    """Top candidates among `stored` (text, intent) for every non-stored phrasing."""
    matrix = np.stack([vectors[t] for t, _ in stored])
    out: list[Query] = []
    for intent in workload.intents:
        for i, text in enumerate(intent.phrasings):
            if i == intent.stored:
                continue
            sims = matrix @ vectors[text]
            top = np.argsort(-sims)[:CANDIDATES]
            candidates = tuple(
                (float(sims[j]), stored[j][1], guard.check(text, stored[j][0])) for j in top
            )
            out.append(Query(text, intent.id, intent.split, candidates))
    return out


def near_pairs(workload: Workload, vectors: dict[str, Vectors]) -> list[Pair]:
    return [
        Pair(
            float(vectors[p.stored] @ vectors[p.query]),
            guard.check(p.query, p.stored),
            p.category,
            p.split,
        )
        for p in workload.near_misses
    ]


def decide(
    candidates: Sequence[tuple[float, str, str | None]], threshold: float, guarded: bool
) -> str | None:
    for similarity, intent, verdict in candidates:
        if similarity < threshold:
            return None
        if not guarded or verdict is None:
            return intent
    return None


def rates(
    queries: Sequence[Query], pairs: Sequence[Pair], threshold: float, guarded: bool, split: str
) -> Rates:
    r = Rates()
    for q in queries:
        if split != "all" and q.split != split:
            continue
        r.queries += 1
        answer = decide(q.candidates, threshold, guarded)
        if answer == q.intent:
            r.correct += 1
        elif answer is not None:
            r.wrong += 1
        elif guarded:
            own = [c for c in q.candidates if c[1] == q.intent and c[0] >= threshold]
            if own and own[0][2] is not None:
                r.lost_to_guard[own[0][2]] += 1
    for p in pairs:
        if split != "all" and p.split != split:
            continue
        r.near += 1
        r.near_by_category[p.category] += 1
        if p.similarity >= threshold and (not guarded or p.verdict is None):
            r.false_hits += 1
            r.false_by_category[p.category] += 1
    return r


def choose_threshold(
    queries: Sequence[Query],
    pairs: Sequence[Pair],
    thresholds: Sequence[float],
    min_hit: float = 0.65,
) -> float:
    """The strictest threshold that still answers enough paraphrases, on the dev split.

    A false hit (a wrong answer served) costs more than a miss (one more call to vLLM),
    and the guard only judges near misses it has words for; every step down in threshold
    lets in topical neighbours that only the threshold stands against. So: the highest
    threshold whose dev hit rate is at least `min_hit` (the 60 % target plus a margin)
    while dev false hits and wrong answers stay at or below 1 %.
    """
    for t in sorted(thresholds, reverse=True):
        r = rates(queries, pairs, t, True, "dev")
        if r.hit_rate >= min_hit and r.false_rate <= 0.01 and r.wrong_rate <= 0.01:
            return t
    return min(thresholds)


def lowest_within_targets(
    queries: Sequence[Query], pairs: Sequence[Pair], thresholds: Sequence[float]
) -> float | None:
    """For comparison: the lowest threshold (most hits) meeting the 1 % limits on dev."""
    for t in sorted(thresholds):
        r = rates(queries, pairs, t, True, "dev")
        if r.false_rate <= 0.01 and r.wrong_rate <= 0.01:
            return t
    return None


def wilson(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval for a proportion `successes / n` (95 % with z = 1.96).

    A sampling interval over the items, not over repeated runs. Unlike the normal
    approximation it stays inside [0, 1] and is not empty at 0 or n successes; no items
    at all says nothing: (0, 1).

    >>> [round(x, 4) for x in wilson(0, 10)]
    [0.0, 0.2775]
    >>> [round(x, 4) for x in wilson(5, 10)]
    [0.2366, 0.7634]
    >>> [round(x, 4) for x in wilson(3, 320)]
    [0.0032, 0.0272]
    >>> wilson(0, 0)
    (0.0, 1.0)
    """
    if n <= 0:
        return 0.0, 1.0
    if not 0 <= successes <= n:
        raise ValueError(f"{successes} successes of {n}")
    p = successes / n
    denominator = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)
