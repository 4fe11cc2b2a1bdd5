"""L1 lookups for the event loop: the exact match at once, one embedding pass for many.

Why (issue 16, ``benchmarks/cache_miss_path.py``): a miss through the sidecar spent its
time waiting for MiniLM. Each lookup embedded its question alone in a worker thread (about
20 ms on a busy 2-core node), the embedder serialises its callers, so at 8 concurrent
misses the last one waited for seven embeddings before its request even left for vLLM.

Here a lookup is split. `probe` runs L1's exact-match part on the event loop (dictionary
work; it never embeds and never waits for L1's lock): a hit, a certain miss, or "only the
semantic search can decide". Searches are queued, and one worker takes everything queued
when it starts: the texts go through the embedder in one forward pass (8 short questions
cost about as much as 3 one at a time), then each is searched with its vector. The first
search after a quiet spell starts at once, so a lone request waits for no batch.

Stores run in the background, after the answer went out (``app.py``). So that asking
again right after an answer still finds it, exactly as when the store came first, a
lookup waits for the stores it could find: the probe for a store of the same question,
a search for the stores of its partition (they run while it embeds; usually done by then).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Final

from .semantic import Admission, Hit, Probe, SemanticCache

log = logging.getLogger("sits_inference.cache.lookup")

Hits = list[Hit | None]
# Runs blocking work in a worker thread (the sidecar's ``in_thread``).
Run = Callable[[Callable[[list[Admission]], Hits], list[Admission]], Awaitable[Hits]]
# Most questions embedded in one pass: the pass's cost grows with the batch, and a batch
# this size already amortises the per-call overhead.
MAX_BATCH: Final = 16
_Queued = tuple[Admission, "asyncio.Future[Hit | None]"]
# The longest a lookup waits for a store in the background (one takes milliseconds).
STORE_WAIT_S: Final = 2.0


class Lookups:
    """L1's lookups as the sidecar makes them; ``run`` runs blocking work in a thread."""

    def __init__(self, semantic: SemanticCache, run: Run) -> None:
        self._semantic = semantic
        self._run = run
        self._queue: list[_Queued] = []
        self._worker: asyncio.Task[None] | None = None
        # Stores in the background, by partition, then question.
        self._stores: dict[str, dict[str, asyncio.Task[None]]] = {}

    def storing(self, admission: Admission, task: asyncio.Task[None]) -> None:
        """A store of ``admission``'s answer runs in ``task``: lookups wait for it."""
        partition, question = admission.partition, admission.exact
        self._stores.setdefault(partition, {})[question] = task

        def finished(_: asyncio.Task[None]) -> None:
            stores = self._stores.get(partition, {})
            if stores.get(question) is task:
                del stores[question]
                if not stores:
                    del self._stores[partition]

        task.add_done_callback(finished)

    async def settled(self) -> None:
        """Wait for every store in the background (before an invalidation, or stats)."""
        await _settle([t for stores in self._stores.values() for t in stores.values()])

    async def probe(self, admission: Admission) -> Probe | None:
        """Exact match, on the loop, once a store of the same question is done; None when
        L1 is busy (then `search` decides alone)."""
        store = self._stores.get(admission.partition, {}).get(admission.exact)
        if store is not None:
            await _settle([store])
        try:
            return self._semantic.probe(admission, storing=admission.partition in self._stores)
        except Exception:
            log.exception("L1 probe failed; treated as a miss")
            return Probe(None, search=False)

    async def search(self, admission: Admission) -> Hit | None:
        """The whole lookup with an embedding shared with concurrent searches."""
        done: asyncio.Future[Hit | None] = asyncio.get_running_loop().create_future()
        self._queue.append((admission, done))
        if self._worker is None:
            self._worker = asyncio.create_task(self._drain(), name="sits-cache-l1-search")
        return await done

    async def lookup(self, admission: Admission) -> Hit | None:
        probe = await self.probe(admission)
        if probe is not None and not probe.search:
            return probe.hit
        return await self.search(admission)

    async def close(self) -> None:
        worker, self._worker = self._worker, None
        if worker is not None:
            worker.cancel()
            await asyncio.gather(worker, return_exceptions=True)
        for _, done in self._queue:
            done.cancel()
        self._queue.clear()

    async def _drain(self) -> None:
        batch: list[_Queued] = []
        try:
            while self._queue:
                batch = [q for q in self._queue[:MAX_BATCH] if not q[1].cancelled()]
                del self._queue[:MAX_BATCH]
                if not batch:
                    continue
                admissions = [admission for admission, _ in batch]
                partitions = {a.partition for a in admissions}
                await _settle([t for p in partitions for t in self._stores.get(p, {}).values()])
                try:
                    hits = await self._run(self._search_all, admissions)
                except Exception:  # the embedder failed: each of them a miss
                    log.exception("L1 lookup failed; treated as a miss")
                    hits = [None] * len(admissions)
                for (_, done), hit in zip(batch, hits, strict=True):
                    if not done.done():
                        done.set_result(hit)
        finally:
            self._worker = None
            for _, done in batch:  # cancelled while searching (closing): nobody hangs
                if not done.done():
                    done.cancel()

    def _search_all(self, admissions: list[Admission]) -> Hits:
        """In a worker thread: one embedding pass, then each search (a failed one: a miss)."""
        started = time.perf_counter()
        semantic = [a for a in admissions if a.semantic]
        vectors = iter(self._semantic.embed([a.text for a in semantic]))
        hits: Hits = []
        for admission in admissions:
            vector = next(vectors) if admission.semantic else None
            try:
                hits.append(self._semantic.lookup(admission, vector, started=started))
            except Exception:
                log.exception("L1 lookup failed; treated as a miss")
                hits.append(None)
        return hits


async def _settle(stores: list[asyncio.Task[None]]) -> None:
    if stores:
        await asyncio.wait(stores, timeout=STORE_WAIT_S)
