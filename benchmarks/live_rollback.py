"""The live system, measured: rollback reaction and what the data plane adds to streaming.

1. **Rollback reaction.** The ``broken`` story of ``sits_live.stories`` (v2 ships a
   truncated LoRA adapter; v2's sidecar answers 502 to requests for it) under
   session-flow load through the gateway, ``--runs`` times (``sits.dev/retry`` starts
   the analysis over; the pods stay). Per run: the time from the first bad response the
   load generator received to (a) the status saying RolledBack (``kubectl --watch``, ms
   resolution) and (b) the last request the gateway sent to v2. The floor: SITS2026's
   rule needs two failing periods, so at least one analysis interval after the first
   failing one, plus the scrape interval and the rate window's first sample.
2. **Data-plane overhead.** Streamed chat completions (``max_tokens`` tokens, ``ignore_eos``,
   the sidecar's cache bypassed) sent in turn to vLLM directly (pod IP), to the sidecar
   (variant Service) and through the gateway (root Service): time to first token and
   streamed tokens per second, median and p95.

    .venv/bin/python -m benchmarks.live_rollback [--runs 5] [--streams 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import dataclass

import httpx2
from openai import OpenAI

from benchmarks.results import commit, write_section
from sits_live import stack, stories
from sits_live.environment import LiveNamespace
from sits_live.scenario import LoadThread, PhaseWatch, Traffic
from sits_loadgen import LoadResult
from sits_localcluster.cluster import LocalCluster

NAME = "broken"
INTERVAL_S, SCRAPE_S = 5.0, 1.0


@dataclass
class Reaction:
    to_status_s: float
    to_last_v2_s: float


def _wait_phase(cluster: LocalCluster, namespace: str, phases: set[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = stack.get(cluster, "sitsd", NAME, "-n", namespace).get("status") or {}
        if status.get("phase") in phases:
            return str(status["phase"])
        time.sleep(0.5)
    raise RuntimeError(f"{NAME} not in {phases} within {timeout:.0f} s")


def _root_url(cluster: LocalCluster, namespace: str, service: str) -> str:
    svc = stack.get(cluster, "service", service, "-n", namespace)
    return f"http://{svc['spec']['clusterIP']}:{svc['spec']['ports'][0]['port']}/v1"


def one_rollback(cluster: LocalCluster, namespace: str, run: int) -> Reaction:
    if run:
        cluster.kubectl(
            "annotate", "sitsd", NAME, "-n", namespace, "--overwrite", f"sits.dev/retry=bench-{run}"
        )
        _wait_phase(cluster, namespace, {"Progressing"}, 60)
    watch = PhaseWatch(cluster, namespace, NAME)
    load = LoadThread(Traffic(_root_url(cluster, namespace, NAME), stories.RATES, 120, seed=run))
    load.start()
    try:
        _wait_phase(cluster, namespace, {"RolledBack"}, 120)
        time.sleep(3)  # traffic after the rollback: shows where it went
    finally:
        results = load.stop()
        watch.stop()
    rolled_back = watch.first("RolledBack")
    assert rolled_back is not None, "the watch missed the RolledBack phase"
    return _reaction(results, rolled_back)


def _reaction(results: list[LoadResult], rolled_back: float) -> Reaction:
    records = [r for result in results for r in result.records]
    bad = [
        r.start + (r.latency_ms or 0) / 1000
        for r in records
        if r.variant == "v2" and r.status is not None and r.status >= 500
    ]
    if not bad:
        raise RuntimeError("no bad response from v2 in this run")
    first_bad = min(bad)
    last_v2 = max(r.start for r in records if r.variant == "v2")
    return Reaction(rolled_back - first_bad, last_v2 - first_bad)


@dataclass
class Streams:
    ttft_ms: list[float]
    tokens_per_s: list[float]


def _stream_once(client: OpenAI, max_tokens: int) -> tuple[float, float]:
    start = time.perf_counter()
    first: float | None = None
    chunks = 0
    stream = client.chat.completions.create(
        model=stack.SERVED,
        messages=[{"role": "user", "content": "Describe a bicycle."}],
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        extra_body={"ignore_eos": True},
        extra_headers={"x-sits-cache": "bypass"},
    )
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            chunks += 1
            if first is None:
                first = time.perf_counter()
    end = time.perf_counter()
    assert first is not None, "no token streamed"
    return (first - start) * 1000, max(chunks - 1, 1) / max(end - first, 1e-6)


def overhead(targets: dict[str, str], streams: int, max_tokens: int) -> dict[str, Streams]:
    """Round-robin over the targets so drift of the machine's load hits each alike."""
    clients = {
        name: OpenAI(
            base_url=url,
            api_key="unused",
            max_retries=0,
            http_client=httpx2.Client(trust_env=False, timeout=60),
        )
        for name, url in targets.items()
    }
    out = {name: Streams([], []) for name in targets}
    for _ in range(2):  # warm-up: connections, vLLM's first request
        for client in clients.values():
            _stream_once(client, max_tokens)
    for _ in range(streams):
        for name, client in clients.items():
            ttft, rate = _stream_once(client, max_tokens)
            out[name].ttft_ms.append(ttft)
            out[name].tokens_per_s.append(rate)
    for client in clients.values():
        client.close()
    return out


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20)[-1] if len(values) >= 2 else values[0]


def report(reactions: list[Reaction], streams: dict[str, Streams], load: float) -> str:
    to_status = [r.to_status_s for r in reactions]
    to_off = [r.to_last_v2_s for r in reactions]
    floor = INTERVAL_S + SCRAPE_S
    rows = [
        "## Live: rollback reaction and data-plane overhead (real node)",
        "",
        f"Commit `{commit()}`, 2 cores, load average {load:.1f} at the start. "
        "`python -m benchmarks.live_rollback`. The `broken` story (truncated LoRA adapter "
        "on v2: 502 for adapter requests) through two gateway pods, the operator from its "
        f"chart, Prometheus scraping every {SCRAPE_S:g} s, SITS2026 on {INTERVAL_S:g} s "
        f"periods and 15 s windows. Floor: two failing periods are one interval apart, plus "
        f"a scrape: about {floor:g} s.",
        "",
        "| from the first bad response to | runs | median s | worst s | all runs |",
        "|---|---|---|---|---|",
        f"| status RolledBack | {len(to_status)} | {statistics.median(to_status):.1f} "
        f"| {max(to_status):.1f} | {', '.join(f'{v:.1f}' for v in to_status)} |",
        f"| last request sent to v2 | {len(to_off)} | {statistics.median(to_off):.1f} "
        f"| {max(to_off):.1f} | {', '.join(f'{v:.1f}' for v in to_off)} |",
        "",
        "Streamed chat completions, the sidecar's cache bypassed, in turn to each path "
        f"({len(next(iter(streams.values())).ttft_ms)} streams each):",
        "",
        "| path | TTFT median ms | TTFT p95 ms | tokens/s median | tokens/s p5 |",
        "|---|---|---|---|---|",
    ]
    for name, s in streams.items():
        low = statistics.quantiles(s.tokens_per_s, n=20)[0]
        rows.append(
            f"| {name} | {statistics.median(s.ttft_ms):.1f} | {_p95(s.ttft_ms):.1f} "
            f"| {statistics.median(s.tokens_per_s):.1f} | {low:.1f} |"
        )
    return "\n".join([*rows, ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--streams", type=int, default=30)
    parser.add_argument("--max-tokens", type=int, default=32)
    args = parser.parse_args()
    cluster = LocalCluster(progress=print, node=True)
    cluster.up(persist=True)
    env = LiveNamespace(cluster, "bench-live")
    namespace = env.namespace
    load = os.getloadavg()[0]
    try:
        env.up()
        stack.apply(cluster, namespace, stories.broken(NAME))
        deadline = time.monotonic() + 900
        while not stack.all_ready(cluster, namespace, NAME, 4):  # 2 variants, 2 gateways
            if time.monotonic() > deadline:
                raise RuntimeError("the broken story's pods not Ready within 900 s")
            time.sleep(2)
        reactions = [one_rollback(cluster, namespace, run) for run in range(args.runs)]
        pods = stack.variant_pods(cluster, namespace, NAME)
        v1 = next(p for p in pods if p["metadata"]["labels"].get("sits.dev/variant") == "v1")
        targets = {
            "vLLM direct (pod IP)": f"http://{v1['status']['podIP']}:8000/v1",
            "sidecar (variant Service)": _root_url(cluster, namespace, f"{NAME}-v1"),
            "gateway + sidecar (root Service)": _root_url(cluster, namespace, NAME),
        }
        streams = overhead(targets, args.streams, args.max_tokens)
        write_section(report(reactions, streams, load))
    finally:
        env.down()


if __name__ == "__main__":
    main()
