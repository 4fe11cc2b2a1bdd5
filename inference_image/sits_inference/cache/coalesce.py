"""Identical concurrent misses: one goes to vLLM, the others wait for its stored answer.

Why: a popular question tends to arrive in bursts (a link shared, a retry storm, a
dashboard refreshing on many screens). Without coalescing, every copy that arrives before
the first answer is stored is a miss, and each one costs vLLM a full generation of the same
deterministic answer. With it, the first copy (the leader) goes upstream; the others
(followers) wait until the leader's response is finished and stored, then look up again
and find it on L1's exact-match path (no embedding).

Only identical requests coalesce: the key is L1's partition (model, revision, adapter
digest, the sampling parameters that matter, system prompt, tools) plus the normalised
question, so a follower is answered exactly as if it had come a moment later.
A paraphrase is not coalesced: it would need an embedding before the decision, and the
near-miss guard cannot be asked about an answer that does not exist yet.

Only non-streamed followers wait. A streamed client measures the time to the first token,
and the leader's answer arrives only complete: waiting would turn a first token after
tens of milliseconds into one after the whole generation. A non-streamed follower gets
its answer no later than its own request would have (the leader started first), so for
it waiting costs nothing and saves a generation.

When the leader fails, is cancelled or its answer is not storable, the followers wake,
miss again and go to vLLM themselves; a follower also stops waiting after `max_wait_s`.
Nothing here can turn a request into an error.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

Key = tuple[str, str]  # (L1 partition, normalised question)


class MissCoalescer:
    """In-flight misses by key; one event loop only (the sidecar's). `max_wait_s` 0 turns
    coalescing off: nobody leads, so nobody follows."""

    def __init__(self, max_wait_s: float) -> None:
        self.max_wait_s = max_wait_s
        self._inflight: dict[Key, asyncio.Event] = {}

    def __len__(self) -> int:
        return len(self._inflight)

    @contextlib.asynccontextmanager
    async def lead(self, key: Key | None) -> AsyncIterator[None]:
        """Hold the key while the leader's request runs (store included); wake the
        followers whatever happens to it. Nothing to hold for an uncacheable request
        (None), a key another request already leads, or when coalescing is off."""
        if key is None or self.max_wait_s <= 0 or key in self._inflight:
            yield
            return
        done = asyncio.Event()
        self._inflight[key] = done
        try:
            yield
        finally:
            if self._inflight.get(key) is done:
                del self._inflight[key]
            done.set()

    def leading(self, key: Key) -> bool:
        return key in self._inflight

    async def follow(self, key: Key) -> bool:
        """Wait for the key's leader to finish; False when `max_wait_s` ran out first."""
        done = self._inflight.get(key)
        if done is None:
            return True
        try:
            await asyncio.wait_for(done.wait(), self.max_wait_s)
        except TimeoutError:
            return False
        return True
