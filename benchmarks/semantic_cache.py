"""Benchmark: the L1 semantic cache's hit rate, false hits, latency and memory.

Run: `.venv/bin/python -m benchmarks.semantic_cache` (full: 100,000 entries) or with
`--quick` (2,000 entries, 100 timed lookups, side-by-side runs on small samples).

1. Workload (benchmarks/workloads/semantic/): intents with paraphrases, near-miss pairs
   in seven categories (aspect: same subject, another question), filler questions;
   dev / heldout split, plus `fresh.yaml`, written after the guard was frozen and never
   used to tune anything.
2. Threshold sweep, with and without the near-miss guard: paraphrase hit rate (one
   phrasing per intent stored together with the filler, the others queried), wrong
   answers (a hit on another intent or a filler question), near-miss false hits (store
   one side, query the other). The default threshold is the strictest one whose dev
   hit rate is at least 65 % (the 60 % target plus a margin) with dev false hits and
   wrong answers at most 1 % (`evaluate.choose_threshold` says why).
3. The same workload end to end through SemanticCache (IVF index, k-means, guard) at
   the default, an exact-match cache, and GPTCache.
4. 100,000 entries: lookup latency on one core, memory (RSS and accounting), the index's
   recall, and hit / false-hit rates with a full cache.
"""

from __future__ import annotations

import argparse
import time
from typing import Final

import numpy as np

from benchmarks.results import write_section
from benchmarks.workloads.semantic import Workload, describe, load_fresh, load_workload, scale
from benchmarks.workloads.semantic import baselines as bl
from benchmarks.workloads.semantic import evaluate as ev
from benchmarks.workloads.semantic.embeddings import embed_cached
from benchmarks.workloads.semantic.filler import filler
from sits_inference.cache.embedding import MiniLMEmbedder, Vectors
from sits_inference.cache.semantic import DEFAULT_THRESHOLD
from sits_inference.cache.semantic.normalise import normalise_text

THRESHOLDS: Final = tuple(round(t, 2) for t in np.arange(0.60, 0.985, 0.02))
TARGET_HIT: Final = 0.60
TARGET_FALSE: Final = 0.01
TARGET_P99_MS: Final = 20.0
TARGET_MIB_PER_100K: Final = 250.0


def texts_of(workload: Workload) -> list[str]:
    out = {t for i in workload.intents for t in i.phrasings}
    out |= {t for p in workload.near_misses for t in (p.stored, p.query)}
    return sorted(out)


def sweep(
    workload: Workload, vectors: dict[str, Vectors], fill: list[str], fill_vectors: Vectors
) -> tuple[list[ev.Query], list[ev.Pair]]:
    print(f"sweep: {len(workload.intents)} intents stored with {len(fill)} filler", flush=True)
    stored = [(i.phrasings[i.stored], i.id) for i in workload.intents]
    stored += [(t, f"filler:{n}") for n, t in enumerate(fill)]
    table = dict(vectors)
    table.update({t: fill_vectors[n] for n, t in enumerate(fill)})
    return ev.paraphrase_queries(workload, table, stored), ev.near_pairs(workload, table)


def subset(workload: Workload, every: int) -> Workload:
    """Every n-th intent and pair: the quick run's side-by-side sample."""
    return Workload(workload.intents[::every], workload.near_misses[::every])


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def sweep_table(queries: list[ev.Query], pairs: list[ev.Pair]) -> list[str]:
    lines = [
        "| threshold | hit (no guard) | wrong (no guard) | near-miss false hits (no guard) "
        "| hit (guard) | wrong (guard) | near-miss false hits (guard) | dev false (guard) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for t in THRESHOLDS:
        a = ev.rates(queries, pairs, t, False, "all")
        b = ev.rates(queries, pairs, t, True, "all")
        d = ev.rates(queries, pairs, t, True, "dev")
        lines.append(
            f"| {t:.2f} | {pct(a.hit_rate)} | {pct(a.wrong_rate)} | {pct(a.false_rate)} "
            f"| {pct(b.hit_rate)} | {pct(b.wrong_rate)} | {pct(b.false_rate)} "
            f"| {pct(d.false_rate)} |"
        )
    return lines


def split_table(
    queries: list[ev.Query],
    pairs: list[ev.Pair],
    fresh: tuple[list[ev.Query], list[ev.Pair]],
    threshold: float,
) -> list[str]:
    lines = [
        "| split | paraphrase queries | hit | wrong | near-miss pairs | false hits "
        "| false hits by category | hits lost to the guard, by reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = [(s, queries, pairs, s) for s in ev.SPLITS] + [("fresh", *fresh, "all")]
    for label, q, p, split in rows:
        r = ev.rates(q, p, threshold, True, split)
        cats = ", ".join(f"{c} {r.false_by_category[c]}/{n}" for c, n in r.near_by_category.items())
        lost = ", ".join(f"{k} {v}" for k, v in r.lost_to_guard.most_common())
        lines.append(
            f"| {label} | {r.queries} | {pct(r.hit_rate)} | {pct(r.wrong_rate)} | {r.near} "
            f"| {pct(r.false_rate)} | {cats} | {lost} |"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="2,000 entries, short runs")
    parser.add_argument("--entries", type=int, default=None)
    parser.add_argument("--lookups", type=int, default=None)
    parser.add_argument("--no-write", action="store_true", help="print, do not touch docs/")
    args = parser.parse_args()
    total = args.entries or (2_000 if args.quick else 100_000)
    lookups = args.lookups or (100 if args.quick else 2000)
    started = time.monotonic()

    workload, fresh = load_workload(), load_fresh()
    print(f"workload: {describe(workload)}; fresh: {describe(fresh)}", flush=True)
    embedder = MiniLMEmbedder(threads=2)
    all_texts = sorted(set(texts_of(workload)) | set(texts_of(fresh)))
    matrix = embed_cached(embedder, [normalise_text(t) for t in all_texts], "workload")
    vectors = {t: matrix[n] for n, t in enumerate(all_texts)}
    fill = filler(max(0, total - len(bl.stored_texts(workload))))
    # Embedded once for the full size and cached; a prefix of the same fixed order.
    fill_vectors = embed_cached(embedder, filler(total if args.quick else 100_000), "filler")
    fill_vectors = fill_vectors[: len(fill)]

    queries, pairs = sweep(workload, vectors, fill, fill_vectors)
    fresh_results = sweep(fresh, vectors, fill, fill_vectors)
    chosen = ev.choose_threshold(queries, pairs, THRESHOLDS)
    lowest = ev.lowest_within_targets(queries, pairs, THRESHOLDS)
    print(f"chosen threshold {chosen:.2f} (SemanticConfig default {DEFAULT_THRESHOLD:.2f})")

    small = subset(workload, 8) if args.quick else workload
    side = [bl.l1(small, embedder, DEFAULT_THRESHOLD, None), bl.exact(small, None)]
    gpt_note = bl.gptcache_available()
    if gpt_note is None:
        side.append(bl.gptcache(small, similar=False, limit=None))
        side.append(bl.gptcache(small, similar=True, limit=None if args.quick else 600))

    result = scale.run(
        workload,
        embedder,
        fill,
        fill_vectors,
        vectors,
        threshold=DEFAULT_THRESHOLD,
        total=total,
        lookups=lookups,
    )
    picks = (chosen, lowest)
    report(args, workload, fresh, queries, pairs, fresh_results, picks, side, gpt_note, result)
    print(f"done in {time.monotonic() - started:.0f} s")


def report(
    args: argparse.Namespace,
    workload: Workload,
    fresh: Workload,
    queries: list[ev.Query],
    pairs: list[ev.Pair],
    fresh_results: tuple[list[ev.Query], list[ev.Pair]],
    picks: tuple[float, float | None],
    side: list[bl.Outcome],
    gpt_note: str | None,
    s: scale.ScaleResult,
) -> None:
    d, f = describe(workload), describe(fresh)
    per_100k = s.rss_delta_mib * 100_000 / max(1, s.entries)
    at_default = ev.rates(queries, pairs, DEFAULT_THRESHOLD, True, "all")
    command = "python -m benchmarks.semantic_cache" + (" --quick" if args.quick else "")
    lines = [
        "## L1 semantic cache: paraphrase hits, near-miss false hits, latency, memory",
        "",
        f"Command: `.venv/bin/{command}`, all-MiniLM-L6-v2 on the CPU, 2 cores shared "
        "with other work (latency pinned to one core, torch 1 thread).",
        "",
        f"Workload (`benchmarks/workloads/semantic/`): {d['intents']} intents, "
        f"{d['paraphrase_queries']} paraphrase queries, {d['near_misses']} near-miss pairs "
        f"({', '.join(f'{k} {v}' for k, v in d['near_by_category'].items())}); "
        f"dev split {d['dev_intents']} intents / {d['dev_near']} pairs. `fresh.yaml` "
        f"({f['intents']} intents, {f['near_misses']} pairs) was written after the guard "
        f"was frozen and tuned nothing. The sweep's cache holds the stored phrasings and "
        f"{s.entries - len(bl.stored_texts(workload)):,} filler questions (wrong answers "
        "count hits on filler too).",
        "",
        "### Threshold sweep (all splits)",
        "",
        *sweep_table(queries, pairs),
        "",
        f"Default threshold: **{DEFAULT_THRESHOLD:.2f}** (`SemanticConfig`). Rule: the "
        "strictest threshold whose dev hit rate is >= 65 % (target 60 % plus a margin) with "
        "dev false hits and wrong answers <= 1 %, because a wrong answer costs more than a "
        "miss and the guard only judges near misses it has words for; below it, only the "
        "threshold stands between a query and a merely topical neighbour (see `fresh` "
        f"below). This run's rule gives {picks[0]:.2f}; the most permissive threshold "
        f"within the 1 % limits on dev would be {picks[1]}.",
        "",
        f"### At the default ({DEFAULT_THRESHOLD:.2f}), by split",
        "",
        *split_table(queries, pairs, fresh_results, DEFAULT_THRESHOLD),
        "",
        "### Side by side (same workload, no filler)",
        "",
        "| cache | paraphrase hit | wrong answer | near-miss false hit | lookup p50 | lookup p99 |",
        "|---|---|---|---|---|---|",
        *[
            f"| {o.name} | {pct(o.paraphrase_hit)} | {pct(o.paraphrase_wrong)} "
            f"| {pct(o.near_false)} | {o.p50_ms:.2f} ms | {o.p99_ms:.2f} ms |"
            for o in side
        ],
        "",
        gpt_side_note(gpt_note),
        "",
        f"### {s.entries:,} entries",
        "",
        "| measure | value | target |",
        "|---|---|---|",
        f"| paraphrase hit rate (sweep, default) | {pct(at_default.hit_rate)} | >= 60 % |",
        f"| near-miss false hits (sweep, default) | {pct(at_default.false_rate)} | <= 1 % |",
        f"| lookup p50 / p95 / p99, one core ({s.lookups} lookups) | {s.p50_ms:.1f} / "
        f"{s.p95_ms:.1f} / {s.p99_ms:.1f} ms | p99 <= {TARGET_P99_MS:.0f} ms |",
        f"| of which embedding alone, p50 / p99 | {s.embed_p50_ms:.1f} / "
        f"{s.embed_p99_ms:.1f} ms | |",
        f"| RSS growth for the filled cache | {s.rss_delta_mib:.0f} MiB "
        f"({per_100k:.0f} MiB per 100,000) | <= {TARGET_MIB_PER_100K:.0f} MiB per 100,000 |",
        f"| cache's own accounting (`sits_cache_bytes`) | {s.accounted_mib:.0f} MiB | |",
        f"| of which payloads: the sidecar's stored form of ~1 KB prose answers, "
        f"{s.payload_mib:.0f} MiB, kept zlib-compressed | {s.stored_payload_mib:.0f} MiB | |",
        f"| fill time ({s.entries:,} stores, embeddings precomputed) | {s.fill_seconds:.0f} s | |",
        f"| exact nearest neighbour among the index's 8 candidates | {pct(s.recall_at_1)} | |",
        f"| with the full cache: paraphrase hit / wrong / near-miss false | "
        f"{pct(s.paraphrase_hit)} / {pct(s.paraphrase_wrong)} / {pct(s.near_false)} | |",
        f"| clusters / representative keys (top 3 per cluster) | {s.clusters} / "
        f"{s.representative_keys} | |",
        "",
        "With the full cache, a near-miss query that hits any of the 100,000 filler questions "
        "counts as false, even where the filler happens to hold the same question (the filler "
        "is unlabelled: e.g. 'cost of solar panels' / 'How much does solar panels cost?' "
        "counted false in the 2026-12-02 run, as did 'Where did origami originate?' / 'What "
        "is the history of origami?'). Of the 16 of 742 counted false in that run, 5 were "
        "such matches and 11 real: 4 aspect pairs (why/how cats purr, Berlin Wall built/torn "
        "down, relativity important/what, Hubble discovered/what), 4 against filler (cost to "
        "paint a room / watercolor painting cost, cost to charge / cost of electric cars, "
        "finance a small business / personal finance, disadvantages / risks of remote work), "
        "butter / buttermilk, greyhound vs bear / vs horse, dog food / cat food (no marker).",
        "",
    ]
    section = "\n".join(lines)
    if args.no_write:
        print(section)
    else:
        write_section(section)


def gpt_side_note(missing: str | None) -> str:
    if missing is not None:
        return f"GPTCache did not run: {missing}."
    return (
        "GPTCache 0.1.44 (PyPI). Its literal default (`Cache.init()`) is an exact string "
        "match. Its documented similar-search default embeds with `Onnx()`, which downloads "
        "GPTCache/paraphrase-albert-onnx from a model hub at construction (and pip-installs "
        "onnxruntime 1.14.1 when missing): impossible offline, so the similar-search row "
        "uses its own `SBERT` embedding class on the same all-MiniLM-L6-v2 files, with its "
        "default data manager choice for similarity (sqlite + faiss), "
        "`SearchDistanceEvaluation()` and `Config()` (similarity_threshold 0.8, which on "
        "unit vectors means squared L2 <= 0.8, i.e. cosine >= 0.6). The similar-search row "
        "queries a sample (every n-th query) because each GPTCache lookup is slow here."
    )


if __name__ == "__main__":
    main()
