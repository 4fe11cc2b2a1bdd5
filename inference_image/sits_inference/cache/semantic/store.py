"""Entries, their age and their worth: TTL order, the eviction queue, exact accounting.

Eviction policy: GDSF (Greedy-Dual-Size-Frequency; Cherkasova 1998), not LRU.
- Why frequency: answer caches see a few popular questions and a long tail asked once.
  Under LRU a burst of one-off questions flushes the popular answers; GDSF ranks an entry
  by how often it answered (1 + hits), so one-offs leave first.
- Why aging: pure LFU keeps yesterday's favourites forever. GDSF adds the priority of the
  last evicted entry (the "inflation" L) to every new or refreshed priority, so an entry
  that stops being asked sinks below newcomers after a while.
- Why cost and size: an entry's priority is (1 + hits) * cost / size. The cost of a miss
  is the GPU time to regenerate the answer, which grows with its length (decode) plus a
  fixed prefill share; the size is what it holds in memory. A long answer is not
  thrown out merely for being large, and a bloated entry must earn its space.
TTL expiry is separate from eviction: it is about freshness, not capacity, and is not
counted in `sits_cache_evictions`.

Payloads are kept zlib-compressed (`pack`/`unpack`) when that saves at least a tenth:
answers are text in a JSON envelope, and at about a kilobyte each they are the largest
part of an entry. A preset dictionary holds the answer's JSON envelope and common English
words, because a one-kilobyte text alone gives zlib little history to refer to.
Decompressing a hit takes microseconds; compressing runs after a miss that took the
GPU hundreds of milliseconds.
"""

from __future__ import annotations

import hashlib
import heapq
import zlib
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

# What one entry costs beyond its payload and text: the 8-bit index row (384 bytes) with
# its id and direct-map slot, the Entry object, its slots in the maps and queues, and
# allocator slack. Set from the benchmark, which compares this accounting with the
# growth of the process RSS for 100,000 entries (docs/benchmarks.md).
ENTRY_OVERHEAD: Final = 1100
# Below this size compression saves too little to pay for the zlib stream's header.
COMPRESS_FROM: Final = 200
_ENVELOPE: Final = (
    # The sidecar's canonical answer (cache/completions.py), then OpenAI's own envelope
    # for callers that store responses as they came.
    b'{"v":1,"kind":"completion","choices":[[0,"","length",null]]}'
    b'{"v":1,"kind":"chat","choices":[[0,"","stop",null]],"usage":{"prompt_tokens":,'
    b'"total_tokens":,"completion_tokens":,"prompt_tokens_details":null},'
    b'"system_fingerprint":null}'
    b'{"id":"chatcmpl-","object":"chat.completion","created":,"model":"","choices":[{"index":0,'
    b'"message":{"role":"assistant","content":"","refusal":null,"tool_calls":[]},"logprobs":null,'
    b'"finish_reason":"stop","stop_reason":null}],"usage":{"prompt_tokens":,"total_tokens":,'
    b'"completion_tokens":,"prompt_tokens_details":null},"prompt_logprobs":null}'
)
_WORDS: Final = (
    b" the of and to a in is that for it as with was on be by this are or from at an which"
    b" can you your if not have has will more when use one all also their there other these"
    b" they than into its some such may about how what time only most first would should"
    b" example because between each used using make does different important however"
)
# zlib uses the end of the dictionary best: the envelope, the most common, goes last.
ZDICT: Final = _WORDS + _ENVELOPE
# A miss costs a prefill before the first byte of the answer: counted as this many bytes
# of answer, so that short answers are not treated as free to regenerate.
PREFILL_COST: Final = 512


@dataclass(slots=True, eq=False)
class Entry:
    id: int
    partition: int
    text: str
    payload: bytes  # as stored: see `compressed`
    compressed: bool
    model: str
    revision: str
    adapter_digest: str | None
    created: float
    nbytes: int
    cost: float
    cluster: int = -1
    hits: int = 0
    priority: float = 0.0


def exact_hash(partition: int, exact: str) -> int:
    digest = hashlib.blake2b(exact.encode(), digest_size=8, key=partition.to_bytes(8, "big"))
    return int.from_bytes(digest.digest(), "big")


def entry_size(text: str, stored_payload: bytes) -> int:
    return ENTRY_OVERHEAD + len(stored_payload) + 2 * len(text.encode())


def pack(payload: bytes) -> tuple[bytes, bool]:
    """The payload as it is kept: compressed when that saves a tenth or more."""
    if len(payload) < COMPRESS_FROM:
        return payload, False
    packer = zlib.compressobj(6, zlib.DEFLATED, -15, zdict=ZDICT)
    packed = packer.compress(payload) + packer.flush()
    if len(packed) * 10 > len(payload) * 9:
        return payload, False
    return packed, True


def unpack(entry: Entry) -> bytes:
    """The payload as it was stored."""
    if not entry.compressed:
        return entry.payload
    unpacker = zlib.decompressobj(-15, zdict=ZDICT)
    return unpacker.decompress(entry.payload) + unpacker.flush()


class EntryStore:
    """All entries of one cache; not thread-safe (the cache holds its lock)."""

    def __init__(self) -> None:
        self.entries: dict[int, Entry] = {}
        self.exact: dict[int, int] = {}  # exact_hash -> entry id
        self.nbytes = 0
        self.inflation = 0.0  # GDSF's L: the priority of the last evicted entry
        # Ids in creation order (ids only grow); removed ids are skipped when met.
        self._by_age: deque[int] = deque()
        self._queue: list[tuple[float, int]] = []

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Entry]:
        return iter(list(self.entries.values()))

    def add(self, entry: Entry, exact: int) -> None:
        entry.priority = self.inflation + entry.cost / entry.nbytes
        self.entries[entry.id] = entry
        self.exact[exact] = entry.id
        self.nbytes += entry.nbytes
        self._by_age.append(entry.id)
        heapq.heappush(self._queue, (entry.priority, entry.id))

    def remove(self, entry: Entry, exact: int) -> None:
        del self.entries[entry.id]
        if self.exact.get(exact) == entry.id:
            del self.exact[exact]
        self.nbytes -= entry.nbytes
        if len(self._queue) > 2 * len(self.entries) + 64:
            self._compact()

    def hit(self, entry: Entry) -> None:
        entry.hits += 1
        entry.priority = self.inflation + (1 + entry.hits) * entry.cost / entry.nbytes
        heapq.heappush(self._queue, (entry.priority, entry.id))
        if len(self._queue) > 2 * len(self.entries) + 64:
            self._compact()

    def oldest(self) -> Entry | None:
        while self._by_age:
            entry = self.entries.get(self._by_age[0])
            if entry is not None:
                return entry
            self._by_age.popleft()
        return None

    def least_valuable(self) -> Entry | None:
        """The next entry GDSF evicts (its priority becomes the new inflation)."""
        while self._queue:
            priority, entry_id = heapq.heappop(self._queue)
            entry = self.entries.get(entry_id)
            if entry is not None and entry.priority == priority:
                self.inflation = priority
                return entry
        return None

    def _compact(self) -> None:
        self._queue = [(e.priority, e.id) for e in self.entries.values()]
        heapq.heapify(self._queue)
        self._by_age = deque(e for e in self._by_age if e in self.entries)
