"""Benchmark: L3 adapter residency against vLLM's own filesystem resolver and LRU.

A Zipf(1.1) stream over 32 rank-8 LoRA adapters (made with peft, like the test
fixtures), 4 resident slots, the same request sequence (fixed seed) for both sides, taken
in order by 1 and by 4 concurrent clients, each run on a fresh real vLLM (CPU, tiny
model) with ``--max-loras 4 --max-cpu-loras 4``:

- ``sits residency``: the sidecar's ``LoraResidency`` (M=4) loads and unloads through
  vLLM's runtime API; each request holds a lease while it streams.
- ``vLLM resolver``: ``VLLM_PLUGINS=lora_filesystem_resolver`` and
  ``VLLM_LORA_RESOLVER_CACHE_DIR`` (the 32 adapters); vLLM registers an adapter on its
  first request and its worker keeps ``--max-cpu-loras`` of them by LRU.

Hit ratio, defined the same way for both: a request is a miss when vLLM loads its
adapter's weights from disk for it, which ``WeightReads`` (inotify on the 32 adapter
directories) observes from outside vLLM: hit ratio = 1 - weight loads / requests. For the
sidecar this also catches any reload vLLM does behind its back. TTFT is measured
client-side on streamed requests, from before the lease is taken (sidecar) or the request
is sent (resolver) to the first token.

    .venv/bin/python -m benchmarks.lora_residency [--quick] [--requests 600]

(``--quick``: a smoke run that prints its table without touching docs/benchmarks.md.)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import shutil
import statistics
import tempfile
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from benchmarks.results import write_section
from sits_inference.cache.lora import AdapterSpec, LoraConfig, LoraResidency
from sits_inference.cache.lora.policy import Candidate, DecayedFrequency
from sits_inference.cache.metrics import CacheMetrics
from sits_vllm import VllmServer, ensure_tiny_model, make_lora_adapter
from sits_vllm.weight_reads import WeightReads

ADAPTERS = 32
SLOTS = 4
EXPONENT = 1.1
SEED = 2026
CONCURRENCY_LEVELS = (1, 4)
MAX_TOKENS = 16
PROMPT = "Order status for customer 4711, last three shipments and their tracking"
SERVER_START_S = 400.0

Lease = Callable[[str], AbstractAsyncContextManager[str]]


@dataclass
class Measurement:
    """One adapter manager at one concurrency: requests, weight reads, TTFTs."""

    label: str
    concurrency: int
    requests: int
    weight_reads: int
    ttft: list[float]
    elapsed: float
    sidecar_hits: float | None = None
    refreshes: float | None = None

    @property
    def hit_ratio(self) -> float:
        return 1.0 - self.weight_reads / self.requests


def progress(line: str) -> None:
    print(f"[lora-bench] {line}", flush=True)


def zipf_sequence(count: int, seed: int = SEED) -> list[str]:
    weights = [1 / rank**EXPONENT for rank in range(1, ADAPTERS + 1)]
    ranks = random.Random(seed).choices(range(ADAPTERS), weights=weights, k=count)
    return [f"lora-{rank:02d}" for rank in ranks]


def build_adapters(model: Path, workdir: Path) -> dict[str, Path]:
    """The 32 adapters (cached builds), copied so that ``base_model_name_or_path`` names
    the served model path, as the filesystem resolver requires; both sides use the copies."""
    progress(f"building {ADAPTERS} adapters (cached after the first run; ~10 s each)")
    with ThreadPoolExecutor(max_workers=2) as pool:
        built = list(pool.map(lambda i: make_lora_adapter(model, seed=100 + i), range(ADAPTERS)))
    root = workdir / "loras"
    adapters: dict[str, Path] = {}
    for rank, source in enumerate(built):
        target = root / f"lora-{rank:02d}"
        shutil.copytree(source, target)
        config_path = target / "adapter_config.json"
        config = json.loads(config_path.read_text())
        config["base_model_name_or_path"] = str(model)
        config_path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        adapters[target.name] = target
    return adapters


def start_server(model: Path, env: dict[str, str] | None = None) -> VllmServer:
    server = VllmServer(
        model,
        served_model_name="base",
        enable_lora=True,
        max_loras=SLOTS,
        extra_args=["--max-cpu-loras", str(SLOTS)],
        env=env,
    )
    progress(f"starting vLLM on {server.url} (~1-2 min)")
    return server.start(SERVER_START_S)


async def first_token_time(session: aiohttp.ClientSession, url: str, model: str) -> float:
    """Stream one completion; seconds from the call to the first token (read to the end)."""
    body = {
        "model": model,
        "prompt": PROMPT,
        "max_tokens": MAX_TOKENS,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    started = time.perf_counter()
    first: float | None = None
    async with session.post(f"{url}/v1/completions", json=body) as response:
        if response.status != 200:
            raise RuntimeError(f"{model}: {response.status} {await response.text()}")
        async for line in response.content:
            if first is None and line.startswith(b"data: {"):
                first = time.perf_counter() - started
    if first is None:
        raise RuntimeError(f"{model}: no token streamed")
    return first


async def drive(
    url: str, sequence: list[str], lease: Lease, concurrency: int, limit_s: float
) -> list[float]:
    """``concurrency`` workers take the sequence in order; TTFT includes the lease."""
    queue = list(reversed(sequence))
    ttft: list[float] = []
    deadline = time.monotonic() + limit_s

    async def worker(session: aiohttp.ClientSession) -> None:
        while queue and time.monotonic() < deadline:
            name = queue.pop()
            started = time.perf_counter()
            async with lease(name) as served:
                waited = time.perf_counter() - started
                ttft.append(waited + await first_token_time(session, url, served))
            if len(ttft) % 100 == 0:
                progress(f"  {len(ttft)}/{len(sequence)} requests")

    timeout = aiohttp.ClientTimeout(total=120)
    async with aiohttp.ClientSession(timeout=timeout) as session:
        for _ in range(3):  # warm the base path before measuring
            await first_token_time(session, url, "base")
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
    if queue:
        progress(f"  time limit reached: {len(queue)} requests not sent")
    return ttft


@contextlib.asynccontextmanager
async def plain(name: str) -> AsyncIterator[str]:
    yield name


@contextlib.asynccontextmanager
async def _served(residency: LoraResidency, name: str) -> AsyncIterator[str]:
    async with residency.acquire(name) as lease:
        yield lease.served_name


async def run_residency(
    model: Path, adapters: dict[str, Path], sequence: list[str], concurrency: int, limit_s: float
) -> Measurement:
    server = await asyncio.to_thread(start_server, model)
    try:
        specs = tuple(AdapterSpec(name, str(path)) for name, path in adapters.items())
        metrics = CacheMetrics()
        residency = LoraResidency(
            LoraConfig(SLOTS, specs, reconcile_interval_s=0),
            upstream=server.url,
            metrics=metrics,
        )
        await residency.start()
        reads = WeightReads(adapters)  # after start(), which reads the files to digest them
        try:

            def lease(name: str) -> AbstractAsyncContextManager[str]:
                return _served(residency, name)

            started = time.monotonic()
            ttft = await drive(server.url, sequence, lease, concurrency, limit_s)
            elapsed = time.monotonic() - started
            await asyncio.sleep(0.5)  # let the inotify reader drain
            value = metrics.registry.get_sample_value
            return Measurement(
                "sits residency (decayed frequency)",
                concurrency,
                len(ttft),
                sum(reads.counts().values()),
                ttft,
                elapsed,
                sidecar_hits=(value("sits_cache_hits_total", {"tier": "lora"}) or 0) / len(ttft),
                refreshes=value("sits_cache_lora_refreshes_total", {}) or 0,
            )
        finally:
            reads.close()
            await residency.close()
    finally:
        await asyncio.to_thread(server.stop)


async def run_resolver(
    model: Path, adapters: dict[str, Path], sequence: list[str], concurrency: int, limit_s: float
) -> Measurement:
    root = next(iter(adapters.values())).parent
    env = {"VLLM_PLUGINS": "lora_filesystem_resolver", "VLLM_LORA_RESOLVER_CACHE_DIR": str(root)}
    server = await asyncio.to_thread(start_server, model, env)
    reads = WeightReads(adapters)
    try:
        started = time.monotonic()
        ttft = await drive(server.url, sequence, plain, concurrency, limit_s)
        elapsed = time.monotonic() - started
        await asyncio.sleep(0.5)
        reads_total = sum(reads.counts().values())
        label = "vLLM filesystem resolver (LRU)"
        return Measurement(label, concurrency, len(ttft), reads_total, ttft, elapsed)
    finally:
        reads.close()
        await asyncio.to_thread(server.stop)


def simulated(sequence: list[str]) -> tuple[float, float]:
    """Hit ratios of LRU and of the policy on the sequence, one request at a time: what
    the measured numbers at concurrency 1 should approach."""
    lru: OrderedDict[str, None] = OrderedDict()
    policy = DecayedFrequency(600.0)
    resident: dict[str, float] = {}
    lru_hits = ours = 0
    for step, name in enumerate(sequence):
        lru_hits += name in lru
        lru[name] = None
        lru.move_to_end(name)
        if len(lru) > SLOTS:
            lru.popitem(last=False)
        policy.record(name, step)
        if name in resident:
            ours += 1
        elif len(resident) >= SLOTS:
            candidates = (Candidate(n, 1.0, t) for n, t in resident.items())
            victim = policy.choose_victim(candidates, step)
            assert victim is not None
            del resident[victim.name]
        resident[name] = step
    return lru_hits / len(sequence), ours / len(sequence)


def row(measured: Measurement) -> str:
    ttft = sorted(measured.ttft)
    p95 = ttft[min(len(ttft) - 1, int(0.95 * len(ttft)))]
    sidecar = f"{measured.sidecar_hits:.1%}" if measured.sidecar_hits is not None else "-"
    refreshes = f"{measured.refreshes:.0f}" if measured.refreshes is not None else "-"
    return (
        f"| {measured.concurrency} | {measured.label} | {measured.requests} | "
        f"{measured.weight_reads} | **{measured.hit_ratio:.1%}** | {sidecar} | "
        f"{statistics.mean(ttft) * 1000:.0f} ms | {statistics.median(ttft) * 1000:.0f} ms | "
        f"{p95 * 1000:.0f} ms | {refreshes} | {measured.elapsed:.0f} s |"
    )


def gains(pairs: list[tuple[Measurement, Measurement]]) -> str:
    lines = []
    for ours, theirs in pairs:
        gain = (ours.hit_ratio - theirs.hit_ratio) * 100
        verdict = "met" if gain >= 10 else "not met"
        lines.append(
            f"- concurrency {ours.concurrency}: hit ratio {gain:+.1f} percentage points "
            f"(target >= +10: {verdict}); mean TTFT "
            f"{statistics.mean(ours.ttft) * 1000:.0f} ms vs "
            f"{statistics.mean(theirs.ttft) * 1000:.0f} ms."
        )
    return "\n".join(lines)


NOTES = (
    "Why the gain shrinks with 4 clients: an adapter with a request in flight is never "
    "unloaded, and with as many clients as slots the adapters in flight are mostly the "
    "rare ones just loaded, so the only idle candidates are often the popular ones. A load "
    "then waits up to `eviction_patience_s` (0.25 s) for the less valuable busy adapter "
    "rather than evict a popular one (without that wait the sidecar fell below LRU in "
    "development runs). Where the TTFT goes: a sidecar miss is a chain of calls to vLLM's "
    "API (unload, one-token refreshes, load) plus that wait, where the resolver loads "
    "inside vLLM; with one client the means are within a few ms, with four the sidecar's "
    'misses cost more. "sidecar hits" is below the hit ratio with 4 clients because '
    "requests arriving while their adapter loads count as sidecar misses but share its one "
    "load.\n"
)


def write_results(
    pairs: list[tuple[Measurement, Measurement]], sequence: list[str], command: str, write: bool
) -> None:
    lru, policy = simulated(sequence)
    section = (
        "## LoRA adapter residency (L3) vs vLLM's filesystem resolver\n\n"
        f"Command: `{command}`: Zipf({EXPONENT}) over {ADAPTERS} rank-8 peft adapters, "
        f"{len(sequence)} requests, seed {SEED}, the same sequence for both sides, streamed "
        f"completions of {MAX_TOKENS} tokens taken in order by 1 or 4 concurrent clients; "
        f"a fresh real vLLM 0.32 on the CPU (tiny model) per run, `--max-loras {SLOTS} "
        f"--max-cpu-loras {SLOTS}`: {SLOTS} slots on both sides, 2 cores shared with other "
        "work.\n\n"
        "Hit ratio = 1 - (loads of an adapter's weights by vLLM) / requests, for both sides: "
        "vLLM's worker reads `adapter_config.json` and opens `adapter_model.safetensors` on "
        "every load into its CPU cache and never otherwise, which inotify on the adapter "
        "directories sees from outside vLLM (it also catches reloads vLLM's worker LRU does "
        "behind the sidecar's back). \"sidecar hits\" is the sidecar's own metric (adapter "
        'resident when the lease was taken); "refreshes" are the one-token requests that '
        "keep vLLM's worker LRU in line with the sidecar's choices (see "
        "`inference_image/sits_inference/cache/lora/residency.py`). TTFT is client-side, "
        "from before the lease (sidecar) or the request (resolver) to the first token.\n\n"
        "| clients | mechanism | requests | weight loads | hit ratio | sidecar hits | "
        "mean TTFT | p50 TTFT | p95 TTFT | refreshes | duration |\n"
        "|---|---|---|---|---|---|---|---|---|---|---|\n"
        + "\n".join(row(o) for pair in pairs for o in pair)
        + "\n\n"
        + gains(pairs)
        + f"\n\nSimulated on the same sequence, one request at a time: LRU {lru:.1%}, "
        f"decayed frequency {policy:.1%}.\n\n" + NOTES
    )
    if write:
        write_section(section)
    else:
        print(section)


def summary(measured: Measurement) -> str:
    mean_ms = statistics.mean(measured.ttft) * 1000
    return f"  hit ratio {measured.hit_ratio:.1%}, mean TTFT {mean_ms:.0f} ms"


async def main_async(
    requests: int, levels: tuple[int, ...], limit_s: float, command: str, write: bool
) -> None:
    model = await asyncio.to_thread(ensure_tiny_model)
    workdir = Path(tempfile.mkdtemp(prefix="sits-lora-bench-"))
    try:
        adapters = await asyncio.to_thread(build_adapters, model, workdir)
        sequence = zipf_sequence(requests)
        progress(f"{requests} requests over {len(set(sequence))} distinct adapters")
        pairs = []
        for concurrency in levels:
            progress(f"{concurrency} client(s): sits residency")
            ours = await run_residency(model, adapters, sequence, concurrency, limit_s)
            progress(summary(ours))
            progress(f"{concurrency} client(s): vLLM filesystem resolver")
            theirs = await run_resolver(model, adapters, sequence, concurrency, limit_s)
            progress(summary(theirs))
            pairs.append((ours, theirs))
        write_results(pairs, sequence, command, write)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=600)
    parser.add_argument("--time-limit", type=float, default=240.0, help="seconds per run")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 150 requests, 4 clients, no docs update"
    )
    args = parser.parse_args()
    command = ".venv/bin/python -m benchmarks.lora_residency"
    if args.quick:
        asyncio.run(main_async(150, (4,), 60.0, command + " --quick", write=False))
    else:
        command += f" --requests {args.requests}" if args.requests != 600 else ""
        run = main_async(args.requests, CONCURRENCY_LEVELS, args.time_limit, command, write=True)
        asyncio.run(run)


if __name__ == "__main__":
    main()
