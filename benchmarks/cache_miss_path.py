"""Benchmark (issue 16): what a cache miss through the sidecar adds, against a stub upstream.

The project's stub OpenAI server (``sits_inference_testing.stub``, its own process) plays
vLLM; the ``sits-cache`` console script (its own process, real L1 with MiniLM, as in a
pod) sits in front of it. The same requests go to the stub directly and through the
sidecar, in rounds whose order rotates, so that the shared machine's noise falls on both
alike. Every question is new (a number in it differs from every other, which L1's
near-miss guard never lets pass), greedy (``temperature`` 0) so L1 admits it: each
request through the sidecar is a miss that pays for the whole lookup (exact match,
embedding, search) and, when storable, the store. ``--compare-with REF`` adds a third
path: a second sidecar running the ``sits_inference`` of a git commit (``git archive``,
first on its ``PYTHONPATH``), so that a change is measured against its predecessor in
the same rounds, under the same load.

The stub's shape, through its per-request headers (it has no other options for it):
``x-stub-delay-ms`` is the upstream's time to the first byte (vLLM's prefill; 0 is the
worst case for the sidecar, which cannot answer before it knows the request is no hit),
``x-stub-chunks`` / ``x-stub-chunk-delay-ms`` the streamed tokens and the fixed delay
between them. The stub's streams carry no ``finish_reason``, so the sidecar judges them
not storable: a streamed miss here pays the lookup, not the store (plain misses pay both).

Per round and cell (upstream TTFT, clients 1 or 8, plain or streamed), for each path:
TTFT (streams: the first content chunk; plain: the whole answer), time to the last byte,
inter-token latency (mean gap between content chunks). "Added" = sidecar minus direct in
the same round; over the rounds: the median and a 95 % bootstrap interval of the median.

    .venv/bin/python -m benchmarks.cache_miss_path [--rounds 7] [--compare-with REF]
        [--write] [--json out.json]

Target: TTFT added <= 3 ms at p50 and <= 10 ms at p99, streamed or not, at 1 and 8 clients;
inter-token latency unchanged. Only 127.0.0.1 is a target; every loop is bounded in
count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import aiohttp

from benchmarks.loadtools import Processes, free_port, percentile
from benchmarks.results import write_section
from sits_inference_testing.sidecar import SidecarProcess

HEADING = "## Cache sidecar: the miss path (issue 16)"
HOST = "127.0.0.1"
SIDECAR, BEFORE = "sidecar", "before"
MODEL = "stub"
CHUNKS = 16
CHUNK_DELAY_MS = 5.0
PREFILL_MS = (0.0, 50.0)
CLIENTS = (1, 8)
MODES = ("plain", "stream")
REQUESTS_PER_CLIENT = {1: 12, 8: 3}
TARGET_TTFT_P50_MS = 3.0
TARGET_TTFT_P99_MS = 10.0
TIME_LIMIT_S = 240.0
REQUEST_TIMEOUT_S = 30.0
BOOTSTRAP = 2000
SUBJECTS = (
    "photosynthesis",
    "the printing press",
    "plate tectonics",
    "the immune system",
    "compound interest",
    "jazz improvisation",
    "the water cycle",
    "bird migration",
    "public key cryptography",
    "coral reefs",
    "black holes",
    "sourdough bread",
)
TEMPLATES = (
    "How does {} work in case {}?",
    "Give me facts about {}, part {}.",
    "What changed about {} in the year {}?",
    "Explain {} to a child of age {}.",
)


def progress(line: str) -> None:
    print(f"[miss-bench] {line}", flush=True)


class Questions:
    """Never the same question twice: the number differs, which the guard always rejects."""

    def __init__(self) -> None:
        self._n = 1000

    def next(self) -> str:
        self._n += 1
        template = TEMPLATES[self._n % len(TEMPLATES)]
        return template.format(SUBJECTS[(self._n // len(TEMPLATES)) % len(SUBJECTS)], self._n)


@dataclass
class Sample:
    state: str
    ttft_s: float
    total_s: float
    itl_s: float | None = None


@dataclass
class Cell:
    """One round's samples of one (upstream TTFT, clients, mode), per path."""

    prefill_ms: float
    clients: int
    mode: str
    samples: dict[str, list[Sample]] = field(default_factory=dict)


def body(question: str, stream: bool) -> bytes:
    doc = {
        "model": MODEL,
        "messages": [{"role": "user", "content": question}],
        "temperature": 0,
        "max_tokens": CHUNKS,
        "stream": stream,
    }
    return json.dumps(doc).encode()


def stub_headers(prefill_ms: float) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "x-stub-delay-ms": f"{prefill_ms:g}",
        "x-stub-chunks": str(CHUNKS),
        "x-stub-chunk-delay-ms": f"{CHUNK_DELAY_MS:g}",
    }


async def one(
    session: aiohttp.ClientSession, url: str, question: str, stream: bool, prefill_ms: float
) -> Sample:
    """One request read to its end; times from the moment it was sent."""
    started = time.perf_counter()
    data, headers = body(question, stream), stub_headers(prefill_ms)
    async with session.post(f"{url}/v1/chat/completions", data=data, headers=headers) as resp:
        state = resp.headers.get("x-sits-cache", "direct")
        if resp.status != 200:
            raise RuntimeError(f"{url}: {resp.status}: {await resp.text()}")
        if not stream:
            await resp.read()
            total = time.perf_counter() - started
            return Sample(state, total, total)
        times: list[float] = []
        async for line in resp.content:
            if line.startswith(b"data: {") and b'"content":"t' in line:
                times.append(time.perf_counter() - started)
        total = time.perf_counter() - started
    if len(times) != CHUNKS:
        raise RuntimeError(f"{url}: {len(times)} content chunks, expected {CHUNKS}")
    itl = (times[-1] - times[0]) / (len(times) - 1)
    return Sample(state, times[0], total, itl)


async def run_cell(
    sessions: dict[str, aiohttp.ClientSession],
    urls: dict[str, str],
    cell: Cell,
    order: Sequence[str],
    questions: Questions,
    deadline: float,
) -> None:
    stream = cell.mode == "stream"
    per_client = REQUESTS_PER_CLIENT[cell.clients]
    for path in order:
        cell.samples[path] = []

        async def client(path: str = path) -> None:
            for _ in range(per_client):
                if time.monotonic() > deadline:
                    return
                sample = await one(
                    sessions[path], urls[path], questions.next(), stream, cell.prefill_ms
                )
                cell.samples[path].append(sample)

        await asyncio.gather(*(client() for _ in range(cell.clients)))


async def measure(
    urls: dict[str, str], rounds: int, prefills: Sequence[float], deadline: float
) -> list[Cell]:
    questions = Questions()
    cells: list[Cell] = []
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_S)
    sessions = {
        path: aiohttp.ClientSession(
            timeout=timeout, connector=aiohttp.TCPConnector(limit=max(CLIENTS))
        )
        for path in urls
    }
    try:
        for path in urls:  # connections open, first-request costs out of the numbers
            for stream in (False, True):
                await asyncio.gather(
                    *(
                        one(sessions[path], urls[path], questions.next(), stream, 0.0)
                        for _ in range(max(CLIENTS))
                    )
                )
        paths = list(urls)
        for index in range(rounds):
            order = paths[index % len(paths) :] + paths[: index % len(paths)]
            for prefill in prefills:
                for clients in CLIENTS:
                    for mode in MODES:
                        if time.monotonic() > deadline:
                            progress("time limit reached; reporting what was measured")
                            return cells
                        cell = Cell(prefill, clients, mode)
                        await run_cell(sessions, urls, cell, order, questions, deadline)
                        cells.append(cell)
            progress(f"round {index + 1}/{rounds} done (load {os.getloadavg()[0]:.2f})")
    finally:
        for session in sessions.values():
            await session.close()
    return cells


# -- statistics -----------------------------------------------------------------------------


def quantile(values: Sequence[float], p: float) -> float:
    return percentile(sorted(values), p)


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def bootstrap_interval(values: Sequence[float], seed: int = 16) -> tuple[float, float]:
    """95 % percentile-bootstrap interval of the median (NaNs for fewer than 2 values)."""
    if len(values) < 2:
        return math.nan, math.nan
    rng = random.Random(seed)
    medians = sorted(median([rng.choice(values) for _ in values]) for _ in range(BOOTSTRAP))
    return medians[int(0.025 * BOOTSTRAP)], medians[int(0.975 * BOOTSTRAP) - 1]


METRICS = ("ttft_p50", "ttft_p99", "total_p50", "itl_p50", "direct_ttft_p50", "sidecar_ttft_p50")


def round_figures(cell: Cell, path: str) -> dict[str, float]:
    """A sidecar's path minus direct, in ms, for one round's cell (absolute TTFTs beside)."""
    direct, sidecar = cell.samples.get("direct", []), cell.samples.get(path, [])
    if not direct or not sidecar:
        return {}

    def stat(samples: list[Sample], what: str, p: float) -> float:
        values = [getattr(s, what) for s in samples if getattr(s, what) is not None]
        return quantile(values, p) * 1000 if values else math.nan

    figures = {
        "ttft_p50": stat(sidecar, "ttft_s", 50) - stat(direct, "ttft_s", 50),
        "ttft_p99": stat(sidecar, "ttft_s", 99) - stat(direct, "ttft_s", 99),
        "total_p50": stat(sidecar, "total_s", 50) - stat(direct, "total_s", 50),
        "itl_p50": stat(sidecar, "itl_s", 50) - stat(direct, "itl_s", 50),
        "direct_ttft_p50": stat(direct, "ttft_s", 50),
        "sidecar_ttft_p50": stat(sidecar, "ttft_s", 50),
    }
    return figures


def summarise(cells: Sequence[Cell], path: str) -> list[dict[str, Any]]:
    """Per (upstream TTFT, clients, mode): each metric's median over rounds and interval."""
    keys = sorted({(c.prefill_ms, c.clients, c.mode) for c in cells})
    rows: list[dict[str, Any]] = []
    for key in keys:
        per_round = [
            round_figures(c, path) for c in cells if (c.prefill_ms, c.clients, c.mode) == key
        ]
        per_round = [f for f in per_round if f]
        row: dict[str, Any] = {
            "prefill_ms": key[0],
            "clients": key[1],
            "mode": key[2],
            "rounds": len(per_round),
        }
        for metric in METRICS:
            values = [f[metric] for f in per_round if not math.isnan(f[metric])]
            row[metric] = median(values)
            row[f"{metric}_ci"] = bootstrap_interval(values)
        rows.append(row)
    return rows


def states(cells: Sequence[Cell]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for cell in cells:
        for sample in cell.samples.get(SIDECAR, []) + cell.samples.get(BEFORE, []):
            counts[sample.state] = counts.get(sample.state, 0) + 1
    return counts


def met(rows: Sequence[dict[str, Any]], prefill_ms: float) -> bool:
    judged = [r for r in rows if r["prefill_ms"] == prefill_ms]
    return bool(judged) and all(
        r["ttft_p50"] <= TARGET_TTFT_P50_MS and r["ttft_p99"] <= TARGET_TTFT_P99_MS for r in judged
    )


# -- report ---------------------------------------------------------------------------------


def _fmt(row: dict[str, Any], metric: str) -> str:
    value, (lo, hi) = row[metric], row[f"{metric}_ci"]
    if math.isnan(value):
        return "n/a"
    if math.isnan(lo):
        return f"{value:+.1f}"
    return f"{value:+.1f} [{lo:+.1f}, {hi:+.1f}]"


def table(rows: Sequence[dict[str, Any]]) -> list[str]:
    lines = [
        "| upstream TTFT | clients | request | TTFT added, p50 | TTFT added, p99 |"
        " last byte added, p50 | inter-token added | TTFT direct / sidecar, p50 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        itl = _fmt(r, "itl_p50") if r["mode"] == "stream" else "-"
        lines.append(
            f"| {r['prefill_ms']:g} ms | {r['clients']} | {r['mode']} | {_fmt(r, 'ttft_p50')} |"
            f" {_fmt(r, 'ttft_p99')} | {_fmt(r, 'total_p50')} | {itl} |"
            f" {r['direct_ttft_p50']:.1f} / {r['sidecar_ttft_p50']:.1f} |"
        )
    return lines


EXPLANATION = (
    "Where the time goes (py-spy on the sidecar, before the change): a miss waited for"
    " MiniLM. Every lookup embedded its question alone in a worker thread"
    " before the request left for the upstream (about 20 ms on this machine when it is"
    " quiet, 40 to 60 ms under the load of the shared runs), and the embedder serialises"
    " its callers, so at 8 clients the last of 8 concurrent misses waited for 8"
    " embeddings. The store came before the answer's last byte (for a stream, before"
    " `[DONE]`), cheap here since it reuses the lookup's embedding (not so for the first"
    " answers of a partition, which the lookup does not embed); relaying and JSON were a"
    " few percent of the sidecar's time. After the"
    " change the exact match runs on the event loop without embedding; when only the"
    " semantic search can still find a hit, the request goes upstream at once while the"
    " question is embedded, concurrent questions in one pass (8 short questions cost"
    " about 3 alone), and a semantic hit drops the upstream request; answers are relayed"
    " as they arrive and stored in the background. What is left is the embedding"
    " whenever it takes longer than the upstream's time to first token: the sidecar"
    " cannot send a token before it knows the question is no semantic hit. With the"
    " stub at 0 ms all of it shows (and a stream's first events wait, then come at once:"
    " the negative inter-token figures); at 50 ms one client's embedding mostly hides"
    " behind the upstream, while at 8 clients a pass of 8 (60 to 120 ms on these 2 busy"
    " cores) does not. On a node whose sidecar has a core of its own the embedding takes"
    " a fraction of this; the target needs it below vLLM's time to first token."
)


def _change(before: dict[str, Any], after: dict[str, Any]) -> str:
    return (
        f"{after['clients']} client{'s' if after['clients'] > 1 else ''} {after['mode']}"
        f" {before['ttft_p50']:+.1f} ({before['ttft_p99']:+.1f}) ms ->"
        f" {after['ttft_p50']:+.1f} ({after['ttft_p99']:+.1f}) ms"
    )


def git_commit() -> str:
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", "inference_image/sits_inference"],
            capture_output=True,
            text=True,
            check=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + (" + uncommitted changes to sits_inference" if dirty else "")


def report(result: dict[str, Any]) -> str:
    rows, judged = result["rows"][SIDECAR], result["judged_prefill_ms"]
    counts = ", ".join(f"{k} {v}" for k, v in sorted(result["states"].items()))
    verdict = "met" if met(rows, judged) else "NOT met"
    lines = [
        HEADING,
        "",
        f"Command: `.venv/bin/python -m benchmarks.cache_miss_path --rounds {result['rounds']}"
        + (f" --compare-with {result['compare_with']}" if result["compare_with"] else "")
        + "`."
        f" Commit {result['commit']}; {result['machine']}; 1-min load average"
        f" {result['load_start']:.2f} at the start, {result['load_end']:.2f} at the end;"
        f" {result['seconds']:.0f} s.",
        "",
        "The stub OpenAI upstream (`sits_inference_testing.stub`, a process of its own) plays"
        " vLLM; the `sits-cache` console script (a process, real L1 with MiniLM, default"
        " settings) is in front of it. The paths take turns within each round, in an order"
        " that rotates from round to round. Every question is new and greedy, so every"
        " request through the sidecar is an L1 miss that pays for the whole lookup"
        f" (sidecar answers: {counts}). Upstream"
        " TTFT is the stub's delay before its first byte (`x-stub-delay-ms`, vLLM's prefill);"
        f" streams are {CHUNKS} chunks {CHUNK_DELAY_MS:g} ms apart (`x-stub-chunks`,"
        " `x-stub-chunk-delay-ms`). The stub's streams carry no `finish_reason`, so streamed"
        " misses are judged not storable: they pay the lookup, plain misses the lookup and"
        f" the store. Clients: closed loop, {REQUESTS_PER_CLIENT[1]} requests at 1 client,"
        f" {REQUESTS_PER_CLIENT[8]} per client at 8, per path and round. TTFT: the first"
        " content chunk (plain: the whole answer). Added = sidecar minus direct within a"
        " round, in ms; median over rounds and [95 % bootstrap interval of the median]; a"
        " round's p99 is its largest sample or close to it.",
        "",
        *table(rows),
        "",
        f"Target (TTFT added <= {TARGET_TTFT_P50_MS:g} ms p50, <= {TARGET_TTFT_P99_MS:g} ms p99,"
        f" both modes, 1 and 8 clients), judged at upstream TTFT {judged:g} ms: **{verdict}**.",
    ]
    if BEFORE in result["rows"]:
        lines += [
            "",
            f"In the same rounds, a second sidecar running `sits_inference` as of commit"
            f" {result['compare_with']} (before the change; same stub, same direct baseline):",
            "",
            *table(result["rows"][BEFORE]),
            "",
            f"Before -> after, TTFT added at p50 (p99) with upstream TTFT {judged:g} ms: "
            + "; ".join(
                _change(b, a)
                for b, a in zip(
                    [r for r in result["rows"][BEFORE] if r["prefill_ms"] == judged],
                    [r for r in rows if r["prefill_ms"] == judged],
                    strict=True,
                )
            )
            + ".",
        ]
    lines += ["", EXPLANATION]
    return "\n".join(lines) + "\n"


# -- processes ------------------------------------------------------------------------------


def wait_ready(url: str, limit_s: float) -> None:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (OSError, urllib.error.URLError):
            pass
        time.sleep(0.2)
    raise RuntimeError(f"{url} not ready after {limit_s:.0f} s")


def export_tree(ref: str, into: Path) -> Path:
    """``inference_image/sits_inference`` as of ``ref``: the directory for PYTHONPATH."""
    archive = subprocess.run(
        ["git", "archive", ref, "inference_image/sits_inference"],
        capture_output=True,
        check=True,
        timeout=60,
    )
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True, timeout=60)
    return into / "inference_image"


async def run(args: argparse.Namespace) -> dict[str, Any]:
    began = time.monotonic()
    deadline = began + TIME_LIMIT_S
    load_start = os.getloadavg()[0]
    logs = Path(tempfile.mkdtemp(prefix="sits-miss-bench-"))
    procs = Processes(logs)
    try:
        stub_port = free_port(HOST)
        argv = [
            sys.executable,
            "-m",
            "sits_inference_testing.stub",
            "--host",
            HOST,
            "--port",
            str(stub_port),
        ]
        procs.start("stub", argv, list(range(os.cpu_count() or 1)))
        stub_url = f"http://{HOST}:{stub_port}"
        wait_ready(f"{stub_url}/health", 30)
        env = {
            "SITS_CACHE_UPSTREAM": stub_url,
            "SITS_CACHE_MODEL": MODEL,
            "SITS_CACHE_REVISION": "bench",
            "SITS_CACHE_LOG_LEVEL": "WARNING",
        }
        progress("starting sits-cache (loads the embedding model)")
        sidecars = {SIDECAR: SidecarProcess(env, free_port(HOST), log_dir=logs)}
        if args.compare_with:
            source = export_tree(args.compare_with, logs)
            before_env = {**env, "PYTHONPATH": str(source)}
            sidecars[BEFORE] = SidecarProcess(before_env, free_port(HOST), log_dir=logs / "before")
        try:
            for sidecar in sidecars.values():
                sidecar.start()
                sidecar.wait_healthy(60)
            urls = {"direct": stub_url, **{path: s.url for path, s in sidecars.items()}}
            cells = await measure(urls, args.rounds, args.prefill_ms, deadline)
        finally:
            for sidecar in sidecars.values():
                sidecar.stop()
    finally:
        procs.stop_all()
        shutil.rmtree(logs, ignore_errors=True)
    return {
        "rounds": args.rounds,
        "commit": git_commit(),
        "compare_with": args.compare_with,
        "machine": f"{os.cpu_count()} cores, {platform.machine()}",
        "load_start": load_start,
        "load_end": os.getloadavg()[0],
        "seconds": time.monotonic() - began,
        "judged_prefill_ms": max(args.prefill_ms),
        "states": states(cells),
        "rows": {path: summarise(cells, path) for path in (SIDECAR, BEFORE) if path in urls},
        "cells": [asdict(c) for c in cells],
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=7, help="repetitions (at least 5)")
    parser.add_argument(
        "--prefill-ms",
        type=float,
        nargs="+",
        default=list(PREFILL_MS),
        help="upstream times to first byte to measure (the largest is judged)",
    )
    parser.add_argument("--write", action="store_true", help="update docs/benchmarks.md")
    parser.add_argument("--json", type=Path, help="also save the figures here")
    parser.add_argument("--compare-with", help="also run the sidecar of this git commit")
    parser.add_argument("--report", type=Path, help="no run: report a saved --json run")
    args = parser.parse_args(argv)
    if not 5 <= args.rounds <= 30:
        parser.error("--rounds must be between 5 and 30")
    result = json.loads(args.report.read_text()) if args.report else asyncio.run(run(args))
    if args.json and not args.report:
        args.json.write_text(json.dumps(result, indent=1))
    section = report(result)
    if args.write:
        write_section(section)
    else:
        print(section)
    sys.exit(0 if met(result["rows"][SIDECAR], result["judged_prefill_ms"]) else 1)


if __name__ == "__main__":
    main()
