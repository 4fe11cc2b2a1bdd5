"""L1 with a full cache: 100,000 entries, lookup latency on one core, memory per entry.

Latency: the process is pinned to one CPU (os.sched_setaffinity) and torch to one thread,
then each query is looked up through `SemanticCache.lookup` with its real embedding
(MiniLM) and the real index search; the time is the whole call.
Memory: process RSS before and after filling the cache (filler vectors are loaded
before the first reading, so they are not counted), next to the cache's own byte
accounting (`stats().bytes`, which the `sits_cache_bytes` gauge exports).
Payloads are the sidecar's stored form of a chat answer of 60 to 220 words of English (questions of
the workload and filler strung together, so that the text compresses like prose, not like
a repeated word), about 1 KB each, so that the numbers include what a real entry holds
and the cache's payload compression gets no easier input than real answers.
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from benchmarks.workloads.semantic import Workload
from benchmarks.workloads.semantic.baselines import _quantile, _request, queries, stored_texts
from benchmarks.workloads.semantic.embeddings import MemoEmbedder
from sits_inference.cache.completions import CachedChoice, CachedCompletion
from sits_inference.cache.embedding import Embedder, Vectors, limit_threads
from sits_inference.cache.metrics import CacheMetrics
from sits_inference.cache.semantic import SemanticCache, SemanticConfig
from sits_inference.cache.semantic.store import pack


@dataclass(frozen=True, slots=True)
class ScaleResult:
    entries: int
    fill_seconds: float
    rss_delta_mib: float
    accounted_mib: float
    payload_mib: float
    stored_payload_mib: float
    lookups: int
    p50_ms: float
    p95_ms: float
    p99_ms: float
    embed_p50_ms: float
    embed_p99_ms: float
    paraphrase_hit: float
    paraphrase_wrong: float
    near_false: float
    clusters: int
    representative_keys: int
    recall_at_1: float


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def payload_for(text: str, rng: random.Random, corpus: Sequence[str]) -> bytes:
    """What the sidecar stores for a chat answer of 60 to 220 words of prose: its canonical
    form (`CachedCompletion.to_payload`), the bytes a real entry holds."""
    words = text.rstrip("?").split()
    wanted = rng.randint(60, 220)
    while len(words) < wanted:
        words += rng.choice(corpus).rstrip("?").split()
    answer = " ".join(words[:wanted]) + "."
    usage = {"prompt_tokens": 20, "completion_tokens": wanted * 4 // 3}
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    choice = CachedChoice(index=0, text=answer, finish_reason="stop")
    return CachedCompletion("chat", (choice,), usage).to_payload()


def pin_one_core() -> int:
    cpu = min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    limit_threads(1)
    return cpu


def run(
    workload: Workload,
    embedder: Embedder,
    filler: Sequence[str],
    filler_vectors: Vectors,
    workload_vectors: dict[str, Vectors],
    *,
    threshold: float,
    total: int,
    lookups: int,
) -> ScaleResult:
    stored = stored_texts(workload)
    fill = list(filler[: max(0, total - len(stored))])
    known = stored + fill
    vectors = np.concatenate(
        [np.stack([workload_vectors[t] for t in stored]), filler_vectors[: len(fill)]]
    )
    memo = MemoEmbedder(embedder, known, vectors)
    rng = random.Random(11)
    gc.collect()
    before = rss_mib()
    cache = SemanticCache(
        SemanticConfig(threshold=threshold, max_entries=total + 1),
        metrics=CacheMetrics(),
        embedder=memo,
    )
    started = time.monotonic()
    payload_bytes = stored_bytes = 0
    for n, text in enumerate(known):
        payload = payload_for(text, rng, known)
        payload_bytes += len(payload)
        stored_bytes += len(pack(payload)[0])
        cache.store(cache.admit(_request(text)), payload)
        if n % 10_000 == 0:
            print(
                f"  scale: stored {n}/{len(known)} ({time.monotonic() - started:.0f} s)", flush=True
            )
    fill_seconds = time.monotonic() - started
    gc.collect()
    after = rss_mib()
    stats = cache.stats()
    print(f"  scale: {stats.entries} entries, RSS +{after - before:.0f} MiB", flush=True)
    return _measure(
        workload,
        cache,
        embedder,
        vectors,
        known,
        threshold,
        lookups,
        entries=stats.entries,
        fill_seconds=fill_seconds,
        rss_delta=after - before,
        accounted=stats.bytes / 2**20,
        payload=payload_bytes / 2**20,
        stored_payload=stored_bytes / 2**20,
        clusters=stats.clusters,
        keys=stats.representative_keys,
    )


def _measure(
    workload: Workload,
    cache: SemanticCache,
    embedder: Embedder,
    vectors: Vectors,
    known: Sequence[str],
    threshold: float,
    lookups: int,
    **sizes: float,
) -> ScaleResult:
    cpu = pin_one_core()
    print(f"  scale: pinned to CPU {cpu}, torch threads 1", flush=True)
    para, near = queries(workload)
    rng = random.Random(5)
    sample = rng.sample(para, min(len(para), lookups * 3 // 4))
    sample += rng.sample(near, min(len(near), lookups - len(sample)))
    intent_of = workload.intent_of()
    for text in sample[:20]:  # warm-up: first calls allocate
        embedder.embed([text])
    embed_times: list[float] = []
    times: list[float] = []
    outcome: dict[str, list[bool | None]] = {"para": [], "near": []}
    recall_hits = recall_total = 0
    near_set = set(near)
    for n, text in enumerate(sample):
        t0 = time.perf_counter()
        query_vector = embedder.embed([text])[0]
        embed_times.append(time.perf_counter() - t0)
        t1 = time.perf_counter()
        hit = cache.lookup(cache.admit(_request(text)))
        times.append(time.perf_counter() - t1)
        answer = None if hit is None else hit.matched_text
        correct = None if answer is None else intent_of.get(answer) == intent_of[text]
        outcome["near" if text in near_set else "para"].append(correct)
        best = int(np.argmax(vectors @ query_vector))
        if float(vectors[best] @ query_vector) >= threshold:
            recall_total += 1
            recall_hits += _index_finds(cache, text, known[best])
        if n % 200 == 0:
            print(f"  scale: lookup {n}/{len(sample)}", flush=True)
    return ScaleResult(
        entries=int(sizes["entries"]),
        fill_seconds=sizes["fill_seconds"],
        rss_delta_mib=sizes["rss_delta"],
        accounted_mib=sizes["accounted"],
        payload_mib=sizes["payload"],
        stored_payload_mib=sizes["stored_payload"],
        lookups=len(sample),
        p50_ms=1000 * statistics.median(times),
        p95_ms=1000 * _quantile(times, 0.95),
        p99_ms=1000 * _quantile(times, 0.99),
        embed_p50_ms=1000 * statistics.median(embed_times),
        embed_p99_ms=1000 * _quantile(embed_times, 0.99),
        paraphrase_hit=sum(v is True for v in outcome["para"]) / max(1, len(outcome["para"])),
        paraphrase_wrong=sum(v is False for v in outcome["para"]) / max(1, len(outcome["para"])),
        near_false=sum(v is False for v in outcome["near"]) / max(1, len(outcome["near"])),
        clusters=int(sizes["clusters"]),
        representative_keys=int(sizes["keys"]),
        recall_at_1=recall_hits / max(1, recall_total),
    )


def _index_finds(cache: SemanticCache, query: str, expected: str) -> int:
    """1 when the IVF search (nprobe clusters) returns the exact nearest stored text."""
    return int(any(text == expected for text, _ in cache.candidates(cache.admit(_request(query)))))
