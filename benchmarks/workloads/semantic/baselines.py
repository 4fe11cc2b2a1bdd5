"""The same workload through other caches: L1 itself end to end, exact match, GPTCache.

One protocol for all, so that the numbers sit side by side:
- store the stored phrasing of every intent and the stored side of every near-miss pair;
- query every other phrasing (paraphrase queries) and every near-miss query side;
- a hit whose stored text belongs to the query's own intent is correct, any other hit is
  wrong. For near-miss queries, "wrong" is the false-hit rate (their own intent is
  usually not stored, so almost any hit is false).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from benchmarks.workloads.semantic import Workload
from sits_inference.cache.embedding import Embedder, model_path
from sits_inference.cache.metrics import CacheMetrics
from sits_inference.cache.semantic import CacheRequest, SemanticCache, SemanticConfig
from sits_inference.cache.semantic.normalise import exact_key, normalise_text


@dataclass(frozen=True, slots=True)
class Scores:
    """One cache on the workload: paraphrase hits and wrong answers, near-miss false hits,
    lookup latency."""

    name: str
    paraphrase_hit: float
    paraphrase_wrong: float
    near_false: float
    p50_ms: float
    p99_ms: float
    note: str = ""


def _request(text: str) -> CacheRequest:
    body = {"messages": [{"role": "user", "content": text}], "temperature": 0}
    return CacheRequest(kind="chat", body=body, model="bench", revision="r1")


def stored_texts(workload: Workload) -> list[str]:
    out = [i.phrasings[i.stored] for i in workload.intents]
    out += [p.stored for p in workload.near_misses]
    return list(dict.fromkeys(out))


def queries(workload: Workload) -> tuple[list[str], list[str]]:
    para = [t for i in workload.intents for n, t in enumerate(i.phrasings) if n != i.stored]
    return para, [p.query for p in workload.near_misses]


def run_protocol(
    name: str,
    workload: Workload,
    store: Callable[[str], None],
    lookup: Callable[[str], str | None],
    limit: int | None = None,
    note: str = "",
) -> Scores:
    """`lookup` returns the stored text that answered, or None."""
    intent_of = workload.intent_of()
    for n, text in enumerate(stored_texts(workload)):
        store(text)
        if n % 200 == 0:
            print(f"  {name}: stored {n}", flush=True)
    para, near = queries(workload)
    if limit is not None:
        para, near = para[:: max(1, len(para) // limit)], near[:: max(1, len(near) // limit)]
    times: list[float] = []
    results: dict[str, list[bool | None]] = {"para": [], "near": []}
    for kind, texts in (("para", para), ("near", near)):
        for n, text in enumerate(texts):
            started = time.perf_counter()
            answer = lookup(text)
            times.append(time.perf_counter() - started)
            correct = None if answer is None else intent_of.get(answer) == intent_of[text]
            results[kind].append(correct)
            if n % 250 == 0:
                print(f"  {name}: {kind} query {n}/{len(texts)}", flush=True)
    return Scores(
        name=name,
        paraphrase_hit=_share(results["para"], True),
        paraphrase_wrong=_share(results["para"], False),
        near_false=_share(results["near"], False),
        p50_ms=1000 * statistics.median(times),
        p99_ms=1000 * _quantile(times, 0.99),
        note=note,
    )


def _share(values: Sequence[bool | None], wanted: bool) -> float:
    return sum(v is wanted for v in values) / max(1, len(values))


def _quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def l1(workload: Workload, embedder: Embedder, threshold: float, limit: int | None) -> Scores:
    config = SemanticConfig(threshold=threshold, max_entries=200_000)
    cache = SemanticCache(config, metrics=CacheMetrics(), embedder=embedder)

    def store(text: str) -> None:
        cache.store(cache.admit(_request(text)), text.encode())

    def lookup(text: str) -> str | None:
        hit = cache.lookup(cache.admit(_request(text)))
        return hit.payload.decode() if hit else None

    name = f"L1 semantic (threshold {threshold:.2f})"
    return run_protocol(name, workload, store, lookup, limit=limit)


def exact(workload: Workload, limit: int | None) -> Scores:
    table: dict[str, str] = {}

    def store(text: str) -> None:
        table[exact_key(normalise_text(text))] = text

    def lookup(text: str) -> str | None:
        return table.get(exact_key(normalise_text(text)))

    return run_protocol("exact match (normalised text)", workload, store, lookup, limit=limit)


def gptcache_available() -> str | None:
    """None when GPTCache can run here without installing anything at run time."""
    missing = [
        m for m in ("gptcache", "sqlalchemy", "faiss") if importlib.util.find_spec(m) is None
    ]
    # GPTCache pip-installs missing backends at import time; never let it.
    return f"missing {', '.join(missing)}" if missing else None


def gptcache(workload: Workload, *, similar: bool, limit: int | None) -> Scores:
    """GPTCache 0.1.44 as shipped: its literal default (`Cache.init()` with no arguments:
    exact string match, in-memory map), or its documented similar-search setup (sqlite +
    faiss data manager, `SearchDistanceEvaluation`, `Config()` threshold 0.8) with its
    `SBERT` embedding pointed at the same all-MiniLM-L6-v2 files, because its default
    `Onnx()` embedding downloads GPTCache/paraphrase-albert-onnx from a model hub (and
    pip-installs onnxruntime) at construction, which cannot work offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from gptcache import Cache, Config
    from gptcache.adapter.api import get, put
    from gptcache.processor.pre import get_prompt

    cache: Any = Cache()
    workdir = tempfile.mkdtemp(prefix="sits-bench-gptcache-")
    if similar:
        from gptcache.embedding import SBERT
        from gptcache.manager import CacheBase, VectorBase, get_data_manager
        from gptcache.similarity_evaluation.distance import SearchDistanceEvaluation

        encoder = SBERT(str(model_path()))
        manager = get_data_manager(
            CacheBase("sqlite", sql_url=f"sqlite:///{workdir}/cache.db"),
            VectorBase("faiss", dimension=encoder.dimension, index_path=f"{workdir}/f.index"),
            max_size=200_000,
        )
        cache.init(
            pre_embedding_func=get_prompt,
            embedding_func=encoder.to_embeddings,
            data_manager=manager,
            similarity_evaluation=SearchDistanceEvaluation(),
            config=Config(),
        )
        name = "GPTCache similar search (sqlite+faiss, MiniLM via SBERT, threshold 0.8)"
    else:
        cache.init(pre_embedding_func=get_prompt)
        name = "GPTCache literal default (Cache.init(): exact match)"

    def store(text: str) -> None:
        put(text, text, cache_obj=cache)

    def lookup(text: str) -> str | None:
        answer = get(text, cache_obj=cache)
        return str(answer) if answer is not None else None

    # Its default data manager flushes `data_map.txt` into the working directory.
    with contextlib.chdir(workdir):
        return run_protocol(name, workload, store, lookup, limit=limit)
