"""Synthetic clustered embeddings for the vector tier (L2): tests and the benchmark (no text,
no model).

Why this shape: sentence embeddings are not uniform on the sphere. Documents cluster by
topic, and within a topic they vary along a few directions (low intrinsic dimension).
Uniform random vectors would make every neighbour almost equally far (no index can do
well, and IVF partitions mean nothing), and tight isotropic blobs would make search
trivially easy. Each topic here is a centre plus a random `local_dims`-dimensional
subspace along which its documents spread, plus a little isotropic noise. Topics come in
families (`topics_per_family` siblings around a family direction, cosine about 0.5 between
siblings), so a query's neighbours may sit in a sibling topic's inverted lists, as they
do with real embeddings.

Queries are drawn from the same model with a skewed (Zipf) choice of topic, as real
traffic is: a few topics get most queries, which is what makes some inverted lists hot.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer

from sits_inference.cache.vector import VectorService

Matrix = npt.NDArray[np.float32]
Topics = npt.NDArray[np.int64]


@dataclass(frozen=True)
class TopicModel:
    dimension: int = 384
    topics: int = 1000
    local_dims: int = 12
    spread: float = 0.35
    noise: float = 0.1
    topics_per_family: int = 20
    seed: int = 0

    def _parameters(self) -> tuple[Matrix, Matrix]:
        rng = np.random.default_rng(self.seed)
        families = -(-self.topics // self.topics_per_family)
        family = rng.normal(size=(families, self.dimension)).astype(np.float32)
        family /= np.linalg.norm(family, axis=1, keepdims=True)
        own = rng.normal(size=(self.topics, self.dimension)).astype(np.float32)
        own /= np.linalg.norm(own, axis=1, keepdims=True)
        centres = family[np.arange(self.topics) // self.topics_per_family] + own
        centres /= np.linalg.norm(centres, axis=1, keepdims=True)
        bases = rng.normal(size=(self.topics, self.local_dims, self.dimension)).astype(np.float32)
        bases /= np.linalg.norm(bases, axis=2, keepdims=True)
        return centres, bases

    def vectors(self, topics: Topics, rng: np.random.Generator, chunk: int = 50_000) -> Matrix:
        """One unit vector per entry of `topics`."""
        centres, bases = self._parameters()
        out = np.empty((len(topics), self.dimension), dtype=np.float32)
        for start in range(0, len(topics), chunk):
            t = topics[start : start + chunk]
            z = rng.normal(size=(len(t), self.local_dims)).astype(np.float32) * self.spread
            part = centres[t] + np.einsum("nl,nld->nd", z, bases[t])
            noise = rng.normal(size=part.shape).astype(np.float32)
            part += noise * (self.noise / np.sqrt(self.dimension))
            part /= np.linalg.norm(part, axis=1, keepdims=True)
            out[start : start + chunk] = part
        return out

    def corpus(self, count: int, seed: int = 1) -> tuple[Matrix, Topics]:
        """`count` documents spread evenly over the topics (vectors, topic of each)."""
        rng = np.random.default_rng(seed)
        topics = rng.integers(0, self.topics, size=count).astype(np.int64)
        return self.vectors(topics, rng), topics

    def zipf_topics(self, count: int, exponent: float, rng: np.random.Generator) -> Topics:
        """Topics of `count` queries: rank r has weight r**-exponent; which topic holds
        which rank is a fixed random permutation, so popularity is unrelated to topic id."""
        weights = np.arange(1, self.topics + 1, dtype=np.float64) ** -exponent
        ranks = rng.choice(self.topics, size=count, p=weights / weights.sum())
        order = np.random.default_rng(self.seed + 7).permutation(self.topics)
        return order[ranks].astype(np.int64)

    def queries(self, count: int, exponent: float, seed: int = 2) -> Matrix:
        rng = np.random.default_rng(seed)
        return self.vectors(self.zipf_topics(count, exponent, rng), rng)


@asynccontextmanager
async def serving(service: VectorService) -> AsyncIterator[TestClient[Any, Any]]:
    """``service`` started, its routes served on 127.0.0.1; closed on the way out."""
    await service.start()
    app = web.Application()
    app.router.add_routes(service.routes())
    client: TestClient[Any, Any] = TestClient(TestServer(app, host="127.0.0.1"))
    await client.start_server()
    try:
        yield client
    finally:
        await client.close()
        await service.close()
