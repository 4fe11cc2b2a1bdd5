"""Benchmark: L2 retrieval latency with a cold page cache vs. after hot-list preloading.

    .venv/bin/python -m benchmarks.vector_index [--quick] [--count 1000000] [--no-write]

A synthetic corpus of `--count` clustered 384-dimensional vectors (TopicModel: topics
with a few local directions each, like sentence embeddings) is built once into an IVF-PQ
index and cached under ~/.cache/sits/bench/ keyed by its parameters. Then:

1. History: an hour of traffic (`--history` queries, Zipf(`--zipf`) over topics) goes
   through the coarse quantizer, which is what decides the lists each query scans, and
   the list accesses are saved as the statistics file the sidecar writes when it stops.
   (Only the quantizer runs, to save serving a few hundred thousand queries; the counts
   are the same ones the service would have recorded.)
2. Cold: every index file is evicted from the page cache (posix_fadvise DONTNEED per
   file, checked with mincore; `--drop-caches` writes /proc/sys/vm/drop_caches instead),
   the service is started without statistics, and `--queries` queries from the same
   distribution are answered one at a time at k=10 by the opened index (search and
   document fetch, what a sidecar worker thread does per request).
3. Warm: the files are evicted again, the service is started with the statistics
   (preloading the lists hit at least `--min-hits` times), and the same queries run.

Each of `--rounds` rounds evicts and starts afresh; latencies are pooled over rounds.
Recall@10 is measured against exact (brute-force) search on `--recall-queries` queries.
Targets (issue 6): warm p99 at most a third of cold p99, recall@10 at least 0.9.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import faiss
import numpy as np
import numpy.typing as npt

from benchmarks.results import write_section
from sits_inference.cache.metrics import CacheMetrics
from sits_inference.cache.vector import (
    BuildOptions,
    Document,
    VectorConfig,
    build_index,
    read_manifest,
)
from sits_inference.cache.vector.base import exact_neighbours, one_faiss_thread
from sits_inference.cache.vector.loaded import LoadedIndex
from sits_inference.cache.vector.manifest import INDEX_FILE, Manifest
from sits_inference.cache.vector.pages import MappedFile, evict
from sits_inference.cache.vector.telemetry import VectorMetrics
from sits_inference.cache.vector.window import AccessWindow
from sits_inference_testing.vectors import TopicModel

CACHE = Path.home() / ".cache" / "sits" / "bench"
FORMAT = 1  # bump when the corpus or build recipe changes


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


@dataclass(frozen=True)
class Params:
    count: int
    dimension: int
    topics: int
    zipf: float
    queries: int
    history: int
    min_hits: tuple[int, ...]  # the first is the sidecar's default; the others a sweep
    recall_queries: int
    seed: int
    drop_caches: bool
    rounds: int

    def model(self) -> TopicModel:
        return TopicModel(dimension=self.dimension, topics=self.topics, seed=self.seed)

    def index_dir(self) -> Path:
        key = f"ivfpq-n{self.count}-d{self.dimension}-t{self.topics}-s{self.seed}-v{FORMAT}"
        return CACHE / key


@dataclass
class Run:
    latencies_ms: npt.NDArray[np.float64]
    hit: npt.NDArray[np.bool_]
    resident_before: float  # fraction of the index files in the page cache at start
    start_seconds: float
    resident_lists: float
    resident_bytes: float

    @property
    def hits(self) -> int:
        return int(self.hit.sum())

    def pct(self, q: float, hit: bool | None = None) -> float:
        """Percentile of all queries, or of hits / misses only (NaN when there are none)."""
        values = self.latencies_ms if hit is None else self.latencies_ms[self.hit == hit]
        return float(np.percentile(values, q)) if values.size else float("nan")

    @staticmethod
    def pooled(runs: list[Run]) -> Run:
        """One run of all rounds' queries (percentiles over all of them: steadier on a
        shared machine than any single round)."""
        return Run(
            np.concatenate([r.latencies_ms for r in runs]),
            np.concatenate([r.hit for r in runs]),
            max(r.resident_before for r in runs),
            float(np.mean([r.start_seconds for r in runs])),
            runs[-1].resident_lists,
            runs[-1].resident_bytes,
        )


def ensure_index(params: Params) -> tuple[Path, Manifest]:
    out = params.index_dir()
    if (out / "manifest.json").exists():
        say(f"reusing cached index {out}")
        return out, read_manifest(out)
    say(f"generating {params.count} vectors ({params.topics} topics, d={params.dimension})")
    vectors, topics = params.model().corpus(params.count, seed=params.seed + 1)
    docs = [
        Document(f"d{i}", f"synthetic document {i}", {"topic": int(t)})
        for i, t in enumerate(topics)
    ]
    say("building IVF-PQ (progress below; minutes for 1M vectors on 2 cores)")
    manifest = build_index(out, vectors, docs, BuildOptions(kind="ivfpq", overwrite=True), say)
    return out, manifest


def write_history(params: Params, directory: Path, manifest: Manifest, stats: Path) -> None:
    """The list accesses of an hour of traffic, as the service would have saved them."""
    index: Any = faiss.read_index(str(directory / INDEX_FILE), faiss.IO_FLAG_MMAP)
    ivf: Any = faiss.extract_index_ivf(index)
    window = AccessWindow(ivf.nlist, 3600.0)
    rng = np.random.default_rng(params.seed + 100)
    model = params.model()
    chunk = 20_000
    for start in range(0, params.history, chunk):
        size = min(chunk, params.history - start)
        queries = model.vectors(model.zipf_topics(size, params.zipf, rng), rng)
        _, lists = ivf.quantizer.search(queries, int(manifest.params["nprobe"]))
        window.record(lists)
    for threshold in params.min_hits:
        hot = window.hot(threshold).size
        say(f"history: {params.history} queries probed; {hot} lists hit >= {threshold} times")
    window.save(stats, manifest.digest)
    del ivf, index


def evict_all(directory: Path, manifest: Manifest, drop_caches: bool) -> float:
    """Evict the index's files; returns the fraction still resident (mincore)."""
    if drop_caches:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("1\n")
    else:
        for name in manifest.files:
            evict(directory / name)
    resident = total = 0
    for name in manifest.files:
        mapped = MappedFile(directory / name)
        resident += mapped.resident_bytes()
        total += mapped.size
        mapped.close()
    return resident / max(1, total)


def measured_queries(params: Params, count: int, seed: int) -> npt.NDArray[np.float32]:
    return params.model().queries(count, params.zipf, seed=params.seed + seed)


def open_index(
    directory: Path, stats: Path | None, min_hits: int
) -> tuple[LoadedIndex, CacheMetrics]:
    """What VectorService.start() does in its worker thread: open, then warm up."""
    config = VectorConfig(directory, hot_min_hits=min_hits, stats_path=stats)
    metrics = CacheMetrics()
    loaded = LoadedIndex(directory, config.options(), VectorMetrics(metrics))
    loaded.warm_up(stats)
    return loaded, metrics


def serve(
    params: Params,
    directory: Path,
    manifest: Manifest,
    stats: Path | None,
    label: str,
    min_hits: int,
) -> Run:
    one_faiss_thread()  # as the sidecar's search workers do (after the build and history)
    resident_before = evict_all(directory, manifest, params.drop_caches)
    say(f"{label}: {resident_before:.1%} of the index files resident after eviction")
    started = time.perf_counter()
    loaded, metrics = open_index(directory, stats, min_hits)
    start_seconds = time.perf_counter() - started
    resident_lists = metrics.registry.get_sample_value("sits_cache_vector_resident_lists") or 0.0
    resident_bytes = metrics.registry.get_sample_value("sits_cache_vector_resident_bytes") or 0.0
    say(f"{label}: started in {start_seconds:.1f} s, {resident_lists:.0f} lists resident")
    queries = measured_queries(params, params.queries, seed=200)
    latencies = np.zeros(len(queries))
    hits = np.zeros(len(queries), dtype=bool)
    try:
        for i, query in enumerate(queries):
            begin = time.perf_counter()
            result = loaded.query(query, 10, {})
            latencies[i] = (time.perf_counter() - begin) * 1000
            hits[i] = result.hit
            if (i + 1) % max(1, len(queries) // 4) == 0:
                so_far = latencies[: i + 1]
                say(f"{label}: {i + 1}/{len(queries)} p50 {np.percentile(so_far, 50):.2f} ms")
    finally:
        loaded.close()
    return Run(latencies, hits, resident_before, start_seconds, resident_lists, resident_bytes)


def measure_recall(params: Params, directory: Path) -> float:
    say(f"recall: exact search for {params.recall_queries} queries over {params.count} vectors")
    vectors, _ = params.model().corpus(params.count, seed=params.seed + 1)
    queries = measured_queries(params, params.recall_queries, seed=300)
    truth = exact_neighbours(vectors, queries, 10)
    del vectors
    loaded, _ = open_index(directory, None, 50)
    try:
        total = 0.0
        for query, expected in zip(queries, truth, strict=True):
            found = {int(doc.id[1:]) for doc in loaded.query(query, 10, {}).documents}
            total += len(found & set(expected.tolist())) / 10
    finally:
        loaded.close()
    return total / len(queries)


def ms(value: float) -> str:
    return "-" if np.isnan(value) else f"{value:.2f} ms"


def report(
    params: Params, manifest: Manifest, cold: Run, warm: list[Run], recall: float, quick: bool
) -> str:
    nlist = int(manifest.params["nlist"])
    size = sum((params.index_dir() / name).stat().st_size for name in manifest.files)
    ratio = warm[0].pct(99) / cold.pct(99)
    command = "--quick" if quick else f"--count {params.count}"
    rows = [("cold: no statistics", cold)] + [
        (f"warm: min-hits {threshold}" + (" (default)" if i == 0 else ""), run)
        for i, (threshold, run) in enumerate(zip(params.min_hits, warm, strict=True))
    ]
    lines = [
        "## L2 vector index: cold vs warm retrieval (IVF-PQ, hot-list preloading)",
        "",
        f"Command: `.venv/bin/python -m benchmarks.vector_index {command}` on "
        f"{os.cpu_count()} cores ({platform.machine()}), faiss {faiss.__version__}. "
        f"{params.count:,} synthetic clustered vectors, d={params.dimension}, "
        f"{params.topics} topics; IVF{nlist},PQ{manifest.params['m']} with float16 re-ranking "
        f"(x{manifest.params['refine_factor']}), nprobe {manifest.params['nprobe']} (tuned at "
        f"build), {size / 2**20:.0f} MiB on disk. Queries: Zipf({params.zipf}) over topics; "
        f"{params.queries} measured one at a time at k=10 (search and document fetch, in the "
        "calling thread: what a sidecar worker does per request, without the HTTP and "
        "thread hand-off, which are the same cold or warm), in each "
        f"of {params.rounds} rounds of cold and warm starts (percentiles over all rounds). "
        "Saved "
        f"statistics: the list accesses of {params.history:,} earlier queries (an hour); "
        "hot = at least min-hits accesses in it.",
        "",
        "Cold: every index file evicted with "
        + ("/proc/sys/vm/drop_caches" if params.drop_caches else "posix_fadvise(DONTNEED)")
        + " before the service starts; mincore shows "
        f"{max(r.resident_before for r in [cold, *warm]):.1%} of the files resident at that "
        "point (at most, over the runs). The virtual disk may still be cached by the host. "
        f"Load average when the runs ended: {os.getloadavg()[0]:.1f} (other jobs shared the "
        f"cores; the benchmark ran at nice {os.getpriority(os.PRIO_PROCESS, 0)}).",
        "",
        "| start | lists resident | resident MiB | start time | hit rate | p50 | p95 | p99 |"
        " p99 / cold | p99 of hits | p99 of misses |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for label, run in rows:
        lines.append(
            f"| {label} | {run.resident_lists:.0f}/{nlist} | {run.resident_bytes / 2**20:.0f} | "
            f"{run.start_seconds:.1f} s | {run.hits / len(run.latencies_ms):.1%} | "
            f"{run.pct(50):.2f} ms | {run.pct(95):.2f} ms | {run.pct(99):.2f} ms | "
            f"{run.pct(99) / cold.pct(99):.2f} | {ms(run.pct(99, True))} | "
            f"{ms(run.pct(99, False))} |"
        )
    verdict_p99 = "met" if ratio <= 1 / 3 else "NOT met"
    verdict_recall = "met" if recall >= 0.9 else "NOT met"
    lines += [
        "",
        f"Warm p99 / cold p99 at the default min-hits = {ratio:.2f} (target <= 0.33: "
        f"{verdict_p99}). "
        f"Recall@10 vs exact search on {params.recall_queries} queries: {recall:.3f} "
        f"(target >= 0.9: {verdict_recall}). Hit = every list the query scanned was resident.",
        "",
        f"Reading: at the default threshold {1 - warm[0].hits / len(warm[0].latencies_ms):.1%} "
        "of the warm queries probe a list outside the hot set and pay what a cold query pays "
        f"(p99 of misses {ms(warm[0].pct(99, False))}); with more than 1 % misses the p99 "
        "lies among them, so the p99 ratio is bounded by the hot set's coverage of the "
        "query stream, not by how fast resident lists are (p50 of all runs is the same). "
        "A lower threshold (more lists, more memory) moves the p99 onto hits, whose tail on "
        "this shared 2-core machine is set by other processes' time slices, not by the index.",
        "",
    ]
    return "\n".join(lines)


def run(params: Params, quick: bool, write: bool) -> None:
    directory, manifest = ensure_index(params)
    say(f"index: {manifest.params}, measured at build {manifest.measured}")
    stats = directory.parent / (directory.name + "-stats.json")
    write_history(params, directory, manifest, stats)
    colds: list[Run] = []
    warms: list[list[Run]] = [[] for _ in params.min_hits]
    for round_no in range(1, params.rounds + 1):
        say(f"round {round_no}/{params.rounds}")
        colds.append(serve(params, directory, manifest, None, "cold", params.min_hits[0]))
        for runs, threshold in zip(warms, params.min_hits, strict=True):
            runs.append(serve(params, directory, manifest, stats, f"warm@{threshold}", threshold))
    cold = Run.pooled(colds)
    warm = [Run.pooled(runs) for runs in warms]
    recall = measure_recall(params, directory)
    section = report(params, manifest, cold, warm, recall, quick)
    if write:
        write_section(section)
    else:
        print(section)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add = parser.add_argument
    add("--quick", action="store_true", help="100k vectors, fewer queries (implies --no-write)")
    add("--count", type=int, default=1_000_000)
    add("--dimension", type=int, default=384)
    add("--topics", type=int, help="default: one per 500 documents")
    add("--zipf", type=float, default=1.1)
    add("--queries", type=int, default=2000, help="measured queries per run")
    add("--history", type=int, default=360_000, help="queries behind the saved statistics")
    add("--min-hits", default="50,10", help="thresholds to run warm with (first: default)")
    add("--recall-queries", type=int, default=500)
    add("--seed", type=int, default=0)
    add("--nice", type=int, default=-10, help="scheduling priority while measuring (root)")
    add("--rounds", type=int, default=3, help="cold/warm start pairs, pooled")
    add("--drop-caches", action="store_true", help="use /proc/sys/vm/drop_caches (root)")
    add("--no-write", action="store_true", help="print the results, leave docs/ alone")
    args = parser.parse_args()
    try:
        # Other jobs on a shared machine would otherwise own the latency tail (equally for
        # cold and warm runs); a higher priority lets the measurement see the index.
        os.setpriority(os.PRIO_PROCESS, 0, args.nice)
    except PermissionError:
        say(f"could not set nice {args.nice}; running at the inherited priority")
    count = 100_000 if args.quick else args.count
    params = Params(
        count=count,
        dimension=args.dimension,
        topics=args.topics or max(10, count // 500),
        zipf=args.zipf,
        queries=300 if args.quick else args.queries,
        history=36_000 if args.quick else args.history,
        min_hits=tuple(int(v) for v in args.min_hits.split(",")),
        recall_queries=100 if args.quick else args.recall_queries,
        seed=args.seed,
        drop_caches=args.drop_caches,
        rounds=1 if args.quick else args.rounds,
    )
    run(params, args.quick, write=not (args.quick or args.no_write))


if __name__ == "__main__":
    main()
