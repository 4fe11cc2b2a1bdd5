"""Benchmark: the L1 semantic cache's hit rate, false hits, latency and memory.

Run: `.venv/bin/python -m benchmarks.semantic_cache` (full: 100,000 entries) or with
`--quick` (2,000 entries, 100 timed lookups, side-by-side runs on small samples).

1. Workload (benchmarks/workloads/semantic/): intents with paraphrases, near-miss pairs
   in seven categories (aspect: same subject, another question), filler questions;
   dev / heldout split, plus `fresh.yaml`, written after the guard was frozen and never
   used to tune anything, and `heldout.yaml` (issue 16 item 4), a larger set by a writer
   who had not seen the guard's rules, frozen before its first evaluation: reported
   once, with 95 % Wilson intervals, nothing tuned on it.
2. Threshold sweep, with and without the near-miss guard: paraphrase hit rate (one
   phrasing per intent stored together with the filler, the others queried), wrong
   answers (a hit on another intent or a filler question), near-miss false hits (store
   one side, query the other). The default threshold is the strictest one whose dev
   hit rate is at least 65 % (the 60 % target plus a margin) with dev false hits and
   wrong answers at most 1 % (`evaluate.choose_threshold` says why).
3. The same workload end to end through SemanticCache (IVF index, k-means, guard) at
   the default, an exact-match cache, and GPTCache.
4. 100,000 entries: lookup latency on one core, memory (RSS and accounting), the index's
   recall, and hit / false-hit rates with a full cache; for `fresh.yaml` and
   `heldout.yaml` the full cache (their stored phrasings and stored near-miss sides plus
   the filler) answers every one of their queries, so their full-cache rates are over all
   items, by category too.
"""

from __future__ import annotations

import argparse
import datetime
import os
import subprocess
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import numpy as np

from benchmarks.results import write_section
from benchmarks.workloads.semantic import (
    CATEGORIES,
    Workload,
    describe,
    load_fresh,
    load_heldout,
    load_workload,
    scale,
)
from benchmarks.workloads.semantic import baselines as bl
from benchmarks.workloads.semantic import evaluate as ev
from benchmarks.workloads.semantic.embeddings import MemoEmbedder, embed_cached
from benchmarks.workloads.semantic.filler import filler
from sits_inference.cache.embedding import Embedder, MiniLMEmbedder, Vectors
from sits_inference.cache.metrics import CacheMetrics
from sits_inference.cache.semantic import DEFAULT_THRESHOLD, SemanticCache, SemanticConfig
from sits_inference.cache.semantic.normalise import normalise_text

THRESHOLDS: Final = tuple(round(t, 2) for t in np.arange(0.60, 0.985, 0.02))
TARGET_HIT: Final = 0.60
TARGET_FALSE: Final = 0.01
TARGET_P99_MS: Final = 20.0
TARGET_MIB_PER_100K: Final = 250.0
NEW: Final = "heldout.yaml"  # the split table's label for the set of issue 16 item 4
HELDOUT_FROZEN: Final = "d493253"  # the commit that froze heldout.yaml


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


def ci(k: int, n: int) -> str:
    """`k / n` as a percentage with its 95 % Wilson interval."""
    low, high = ev.wilson(k, n)
    rate = k / n if n else 0.0
    return f"{100 * rate:.1f} % ({100 * low:.1f}-{100 * high:.1f})"


def split_table(
    queries: list[ev.Query],
    pairs: list[ev.Pair],
    extra: Sequence[tuple[str, tuple[list[ev.Query], list[ev.Pair]]]],
    threshold: float,
) -> list[str]:
    lines = [
        "| split | paraphrase queries | hit (95 % interval) | wrong (95 % interval) "
        "| near-miss pairs | false hits (95 % interval) | false hits by category "
        "| hits lost to the guard, by reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    rows = [(s, queries, pairs, s) for s in ev.SPLITS]
    rows += [(label, q, p, "all") for label, (q, p) in extra]
    for label, q, p, split in rows:
        r = ev.rates(q, p, threshold, True, split)
        cats = ", ".join(f"{c} {r.false_by_category[c]}/{n}" for c, n in r.near_by_category.items())
        lost = ", ".join(f"{k} {v}" for k, v in r.lost_to_guard.most_common())
        lines.append(
            f"| {label} | {r.queries} | {ci(r.correct, r.queries)} | {ci(r.wrong, r.queries)} "
            f"| {r.near} | {ci(r.false_hits, r.near)} | {cats} | {lost} |"
        )
    return lines


@dataclass(slots=True)
class FullCache:
    """A workload's queries against a full cache: its stored texts plus the filler."""

    entries: int = 0
    queries: int = 0
    correct: int = 0
    wrong: int = 0
    near: int = 0
    false_hits: int = 0
    near_by_category: Counter[str] = field(default_factory=Counter)
    false_by_category: Counter[str] = field(default_factory=Counter)
    # (category, stored side, query, the stored text that answered)
    false_examples: list[tuple[str, str, str, str]] = field(default_factory=list)
    seconds: float = 0.0


def full_cache(
    workload: Workload,
    embedder: Embedder,
    fill: Sequence[str],
    fill_vectors: Vectors,
    vectors: dict[str, Vectors],
    *,
    threshold: float,
    total: int,
) -> FullCache:
    """Every paraphrase and near-miss query of `workload` looked up through SemanticCache
    (IVF index, k-means, guard) holding the workload's stored texts plus filler up to
    `total` entries: the scale run's "with the full cache" protocol, over all items.
    A hit on another intent or on filler is a wrong answer (paraphrase) or a false hit
    (near miss), as there. Embeddings are the precomputed ones (the same MiniLM rows)."""
    started = time.monotonic()
    config = SemanticConfig(threshold=threshold, max_entries=total + 1)
    stored = bl.stored_texts(workload)
    fill = list(fill[: max(0, total - len(stored))])
    para, near = bl.queries(workload)
    key = {t: cache_text(config, t) for t in [*stored, *para, *near]}
    rows: dict[str, int] = {}
    own = list(dict.fromkeys([*stored, *para, *near]))
    for n, t in enumerate(own):
        rows.setdefault(key[t], n)
    for n, t in enumerate(fill):
        rows.setdefault(cache_text(config, t), len(own) + n)
    matrix = np.concatenate([np.stack([vectors[t] for t in own]), fill_vectors[: len(fill)]])
    memo = MemoEmbedder.from_rows(embedder, rows, matrix)
    cache = SemanticCache(config, metrics=CacheMetrics(), embedder=memo)
    for n, text in enumerate([*stored, *fill]):
        cache.store(cache.admit(bl._request(text)), b"answer")
        if n % 20_000 == 0:
            print(f"  full cache: stored {n} ({time.monotonic() - started:.0f} s)", flush=True)
    intent_by_key = {key[t]: i for t, i in workload.intent_of().items() if t in key}
    out = FullCache(entries=cache.stats().entries)

    def answer(text: str) -> str | None:
        hit = cache.lookup(cache.admit(bl._request(text)))
        return None if hit is None else hit.matched_text

    for intent in workload.intents:
        for i, text in enumerate(intent.phrasings):
            if i == intent.stored:
                continue
            matched = answer(text)
            out.queries += 1
            if matched is not None:
                if intent_by_key.get(matched) == intent.id:
                    out.correct += 1
                else:
                    out.wrong += 1
    for pair in workload.near_misses:
        matched = answer(pair.query)
        out.near += 1
        out.near_by_category[pair.category] += 1
        # As in the scale run: the query's intent is the first its text belongs to.
        own_intent = intent_by_key[key[pair.query]]
        if matched is not None and intent_by_key.get(matched) != own_intent:
            out.false_hits += 1
            out.false_by_category[pair.category] += 1
            out.false_examples.append((pair.category, pair.stored, pair.query, matched))
    out.seconds = time.monotonic() - started
    print(
        f"  full cache: {out.entries} entries, hit {out.correct}/{out.queries}, wrong "
        f"{out.wrong}, near-miss false {out.false_hits}/{out.near}, {memo.misses} texts "
        f"embedded afresh, {out.seconds:.0f} s",
        flush=True,
    )
    return out


def cache_text(config: SemanticConfig, text: str) -> str:
    """The text SemanticCache embeds and reports as `matched_text` for a question."""
    from sits_inference.cache.semantic.request import admit

    return admit(config, bl._request(text)).text


def run_facts() -> dict[str, str]:
    """Commit, whether the measured code has uncommitted edits, date, machine load."""

    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", *args], capture_output=True, text=True, check=True)
        except (OSError, subprocess.CalledProcessError):
            return "unknown"
        return done.stdout.rstrip("\n")

    dirty = git("status", "--porcelain", "--", "benchmarks", "inference_image")
    # The guard, its word lists and the default threshold live here; the held-out set was
    # frozen in d493253: any change since then, committed or not, is listed.
    semantic = "inference_image/sits_inference/cache/semantic"
    since = git("diff", "--name-only", HELDOUT_FROZEN, "--", semantic)
    one, five, fifteen = os.getloadavg()
    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "dirty": ", ".join(sorted(line[3:] for line in dirty.splitlines())) or "none",
        "date": datetime.date.today().isoformat(),
        "load": f"{one:.1f} / {five:.1f} / {fifteen:.1f}",
        "cpus": str(os.cpu_count()),
        "guard_changed": ", ".join(since.splitlines()) or "none",
    }


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
    facts = run_facts()
    print(f"run: {facts}", flush=True)

    workload, fresh, heldout = load_workload(), load_fresh(), load_heldout()
    print(
        f"workload: {describe(workload)}; fresh: {describe(fresh)}; {NEW}: {describe(heldout)}",
        flush=True,
    )
    embedder = MiniLMEmbedder(threads=2)
    all_texts = sorted(set(texts_of(workload)) | set(texts_of(fresh)) | set(texts_of(heldout)))
    matrix = embed_cached(embedder, [normalise_text(t) for t in all_texts], "workload")
    vectors = {t: matrix[n] for n, t in enumerate(all_texts)}
    fill = filler(max(0, total - len(bl.stored_texts(workload))))
    # Embedded once for the full size and cached; a prefix of the same fixed order.
    fill_vectors = embed_cached(embedder, filler(total if args.quick else 100_000), "filler")
    fill_vectors = fill_vectors[: len(fill)]

    queries, pairs = sweep(workload, vectors, fill, fill_vectors)
    fresh_results = sweep(fresh, vectors, fill, fill_vectors)
    heldout_results = sweep(heldout, vectors, fill, fill_vectors)
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
    full = {
        name: full_cache(
            w, embedder, fill, fill_vectors, vectors, threshold=DEFAULT_THRESHOLD, total=total
        )
        for name, w in (("fresh", fresh), (NEW, heldout))
    }
    picks = (chosen, lowest)
    facts["end_load"] = "{:.1f} / {:.1f} / {:.1f}".format(*os.getloadavg())
    facts["seconds"] = f"{time.monotonic() - started:.0f}"
    sets = Sets(workload, fresh, heldout, fresh_results, heldout_results, full)
    report(args, facts, sets, queries, pairs, picks, side, gpt_note, result)
    print(f"done in {time.monotonic() - started:.0f} s")


@dataclass(frozen=True, slots=True)
class Sets:
    """The workload and the two sets reported beside it (never tuned on)."""

    workload: Workload
    fresh: Workload
    heldout: Workload
    fresh_results: tuple[list[ev.Query], list[ev.Pair]]
    heldout_results: tuple[list[ev.Query], list[ev.Pair]]
    full: dict[str, FullCache]


def report(
    args: argparse.Namespace,
    facts: dict[str, str],
    sets: Sets,
    queries: list[ev.Query],
    pairs: list[ev.Pair],
    picks: tuple[float, float | None],
    side: list[bl.Scores],
    gpt_note: str | None,
    s: scale.ScaleResult,
) -> None:
    workload, fresh = sets.workload, sets.fresh
    d, f = describe(workload), describe(fresh)
    per_100k = s.rss_delta_mib * 100_000 / max(1, s.entries)
    at_default = ev.rates(queries, pairs, DEFAULT_THRESHOLD, True, "all")
    command = "python -m benchmarks.semantic_cache" + (" --quick" if args.quick else "")
    if args.entries is not None:
        command += f" --entries {args.entries}"
    if args.lookups is not None:
        command += f" --lookups {args.lookups}"
    n_para = min(d["paraphrase_queries"], s.lookups * 3 // 4)
    n_near = min(d["near_misses"], s.lookups - n_para)
    lines = [
        "## L1 semantic cache: paraphrase hits, near-miss false hits, latency, memory",
        "",
        f"Command: `nice -n 19 .venv/bin/{command}`, all-MiniLM-L6-v2 on the CPU, "
        f"{facts['cpus']} cores shared with other work (latency pinned to one core, torch 1 "
        f"thread). Commit {facts['commit']} (uncommitted edits under benchmarks/ and "
        f"inference_image/: {facts['dirty']}), {facts['date']}; load average (1 / 5 / 15 min) "
        f"{facts['load']} at the start, {facts['end_load']} at the end; {facts['seconds']} s "
        "to this report. 1 run: every interval here is a 95 % Wilson score interval over "
        "the items (queries or pairs) of that one run, a sampling interval, not a spread "
        "over repeated runs (the rates themselves are deterministic for a given commit: "
        "no randomness beyond seeded draws).",
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
        *heldout_section(sets, facts),
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
        "Each pair alone in a cache (store one side, query the other); paraphrases against "
        "the stored phrasings plus the filler. `heldout` is the old workload's held-out "
        f"split (by a hash of the name); `{NEW}` is the new set of issue 16 item 4.",
        "",
        *split_table(
            queries,
            pairs,
            [("fresh", sets.fresh_results), (NEW, sets.heldout_results)],
            DEFAULT_THRESHOLD,
        ),
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
        f"| with the full cache: paraphrase hit / wrong / near-miss false (a sample of "
        f"{n_para} queries and {n_near} pairs, 95 % intervals) | "
        f"{ci(round(s.paraphrase_hit * n_para), n_para)} / "
        f"{ci(round(s.paraphrase_wrong * n_para), n_para)} / "
        f"{ci(round(s.near_false * n_near), n_near)} | near-miss false <= 1 % |",
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


def heldout_section(sets: Sets, facts: dict[str, str]) -> list[str]:
    """The verdict on the new held-out set first: its full-cache near-miss false-hit rate
    against the <= 1 % target, then its rates per protocol and per category."""
    h = describe(sets.heldout)
    alone = ev.rates(*sets.heldout_results, DEFAULT_THRESHOLD, True, "all")
    full = sets.full[NEW]
    k, n = full.false_hits, full.near
    low, high = ev.wilson(k, n)
    rate = k / max(1, n)
    allowed = int(TARGET_FALSE * n + 1e-9)
    if rate <= TARGET_FALSE:
        verdict = f"**met**: {ci(k, n)}, {k} false hits of {n} (the target allows {allowed})" + (
            f"; but the interval reaches {100 * high:.1f} %, so {n} pairs cannot show "
            "that the rate is below 1 %"
            if high > TARGET_FALSE
            else ""
        )
    else:
        verdict = (
            f"**not met**: {ci(k, n)}, {k} false hits of {n} where the target allows "
            f"{allowed}; missed by {100 * (rate - TARGET_FALSE):.1f} percentage points "
            f"({rate / TARGET_FALSE:.1f} times the target)"
            + (
                f", and the whole interval lies above 1 % (lower bound {100 * low:.1f} %)"
                if low > TARGET_FALSE
                else f"; the interval's lower bound, {100 * low:.1f} %, is under 1 %"
            )
        )
    cats = ", ".join(f"{c} {v}" for c, v in h["near_by_category"].items())
    lines = [
        f"### The new held-out set (`{NEW}`, issue 16 item 4): near-miss false hits <= 1 %?",
        "",
        f"`{NEW}`: {h['intents']} intents, {h['paraphrase_queries']} paraphrase queries, "
        f"{h['near_misses']} near-miss pairs ({cats}), written by a writer who had not seen "
        f"the guard's rules, its word lists or its threshold, and committed ({HELDOUT_FROZEN}) "
        "before "
        "any evaluation. This run is its only reported evaluation (before it, only "
        "`--quick --no-write` smoke runs of this harness, which wrote and changed nothing); "
        "nothing was tuned on it: "
        f"the guard, its word lists and the default threshold ({DEFAULT_THRESHOLD:.2f}) are "
        "those of the commit above, unchanged by this task (files under "
        f"`inference_image/sits_inference/cache/semantic/` changed since {HELDOUT_FROZEN}, "
        f"committed or not: {facts['guard_changed']}).",
        "",
        f"The figure judged against the <= 1 % target is the near-miss false-hit rate with "
        f"the full cache ({full.entries:,} entries: the set's stored phrasings and stored "
        "near-miss sides plus the filler; a hit on any other entry, filler included, "
        f"counts as false). On `{NEW}` the target is {verdict}. With each pair alone in a "
        f"cache the rate is {ci(alone.false_hits, alone.near)}. Paraphrase hit rate with "
        f"the full cache: {ci(full.correct, full.queries)}, so the >= "
        f"{100 * TARGET_HIT:.0f} % hit target is "
        f"{'met' if full.correct / max(1, full.queries) >= TARGET_HIT else 'not met'} on "
        f"this set; wrong answers {ci(full.wrong, full.queries)}.",
        "",
        "| set, with the full cache | entries | paraphrase hit (95 % interval) | wrong "
        "(95 % interval) | near-miss false hits (95 % interval) |",
        "|---|---|---|---|---|",
        *[
            f"| {name} | {r.entries:,} | {ci(r.correct, r.queries)} | {ci(r.wrong, r.queries)} "
            f"| {ci(r.false_hits, r.near)} ({r.false_hits}/{r.near}) |"
            for name, r in sets.full.items()
        ],
        "",
        f"By category (`{NEW}`, threshold {DEFAULT_THRESHOLD:.2f}, guard on):",
        "",
        "| category | pairs | false hits, pair alone (95 % interval) | false hits, full "
        "cache (95 % interval) |",
        "|---|---|---|---|",
        *[
            f"| {c} | {full.near_by_category[c]} | "
            f"{ci(alone.false_by_category[c], alone.near_by_category[c])} "
            f"({alone.false_by_category[c]}) | "
            f"{ci(full.false_by_category[c], full.near_by_category[c])} "
            f"({full.false_by_category[c]}) |"
            for c in CATEGORIES
            if full.near_by_category[c]
        ],
        "",
    ]
    if full.false_examples:
        lines += [
            f"The {k} false hits with the full cache (stored side → query: what answered):",
            "",
        ]
        for category, stored, query, matched in full.false_examples[:60]:
            by = "its stored side" if matched == normalise_text(stored) else f"'{matched}'"
            lines.append(f"- {category}: '{stored}' → '{query}': {by}")
        if len(full.false_examples) > 60:
            lines.append(f"- … and {len(full.false_examples) - 60} more")
        lines.append("")
    return lines[:-1]


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
