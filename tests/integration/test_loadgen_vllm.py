"""sits-loadgen against a real vLLM on the CPU (the session's shared tiny-model server):
a bounded open-loop run of 40 requests at 8 req/s, directly and through the real A/B
gateway, and the console script end to end.

Context goes in a header (the default ``context_mode``): the tiny model's 256-token window
cannot hold the 28+ fields of a late turn in the system message. The model is random:
these tests check outcomes, timing, tokens and headers, never text.
"""

from __future__ import annotations

import itertools
import json
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from sits_inference.gateway.app import start_gateway
from sits_inference.gateway.config import GatewayConfig
from sits_inference.gateway.sources.static import StaticFileSource
from sits_loadgen import SUCCESS, LoadConfig, LoadResult, Progress, RequestRecord, run_load
from sits_vllm import VllmServer

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(90)]

MODEL = "tiny"
TOKENS = 16


def load_config(base_url: str, **overrides: Any) -> LoadConfig:
    values: dict[str, Any] = {
        "base_url": base_url,
        "model": MODEL,
        "rate": 8.0,
        "max_requests": 40,
        "duration_s": 30.0,
        "seed": 11,
        "max_tokens": TOKENS,
        "extra_body": {"ignore_eos": True},  # a fixed token count, whatever the weights say
        "request_timeout_s": 30.0,
        "drain_timeout_s": 30.0,
        "progress_interval_s": 1.0,
    }
    return LoadConfig(**(values | overrides))


def failures(result: LoadResult) -> list[RequestRecord]:
    return [r for r in result.records if r.outcome != SUCCESS]


async def test_a_bounded_run_at_8_rps_succeeds_with_a_record_per_request(
    vllm_server: VllmServer, tmp_path: Path
) -> None:
    out = tmp_path / "records.jsonl"
    live: list[RequestRecord] = []
    progress: list[Progress] = []
    before = time.time()
    result = await run_load(
        load_config(vllm_server.base_url, out=out),
        on_record=live.append,
        on_progress=progress.append,
    )
    after = time.time()
    records = result.records
    assert len(records) == 40
    assert failures(result) == []
    assert result.summary.overall.success_rate == 1.0
    assert sorted(live, key=lambda r: r.index) == list(records)
    assert progress, "a progress snapshot every second"
    assert all(before <= r.start <= after for r in records)
    assert all(r.completion_tokens == TOKENS and (r.prompt_tokens or 0) > 10 for r in records)
    streams = [r for r in records if r.stream]
    assert 5 < len(streams) < 35
    assert all(r.ttft_ms is not None and r.ttft_ms <= (r.latency_ms or 0) for r in streams)
    assert all(r.ttft_ms is None for r in records if not r.stream)
    assert result.summary.overall.latency_p95_ms is not None
    # Open loop: sends follow the Poisson schedule, not the answers. Loose bounds: vLLM's
    # CPU engine shares the cores and can starve this process for a moment (the exact
    # schedule is checked on simulated time in the unit tests).
    late = [r.start - result.started_at - r.scheduled_s for r in records]
    assert statistics.median(late) < 0.5
    assert max(late) < 5.0
    overlapped = [
        later.start < earlier.start + (earlier.latency_ms or 0) / 1000
        for earlier, later in itertools.pairwise(records)
    ]
    assert any(overlapped), "no request was sent while an earlier one was in flight"
    assert result.elapsed_s < records[-1].scheduled_s + 15
    written = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(w["index"] for w in written) == list(range(40))


async def test_records_name_the_variant_the_real_gateway_chose(
    vllm_server: VllmServer, tmp_path: Path
) -> None:
    routes = tmp_path / "routes.json"
    routes.write_text(
        json.dumps(
            {
                "namespace": "sits-test",
                "deployment": "chat",
                "model": MODEL,
                "variants": [
                    {"name": "v1", "weight": 50, "endpoints": [vllm_server.url]},
                    {"name": "v2", "weight": 50, "endpoints": [vllm_server.url]},
                ],
            }
        )
    )
    gateway = await start_gateway(GatewayConfig(port=0), StaticFileSource(routes))
    try:
        result = await run_load(load_config(gateway.url + "/v1", max_requests=32, sessions=8))
    finally:
        await gateway.stop()
    assert failures(result) == []
    assert set(result.summary.per_variant) == {"v1", "v2"}
    assert sum(s.requests for s in result.summary.per_variant.values()) == 32
    variants_of: dict[str, set[str | None]] = defaultdict(set)
    for record in result.records:
        variants_of[record.session].add(record.variant)
    assert all(len(v) == 1 for v in variants_of.values()), "x-session-id keeps sessions sticky"


def test_the_console_script_runs_bounded_and_summarises(
    vllm_server: VllmServer, tmp_path: Path
) -> None:
    out = tmp_path / "cli.jsonl"
    command = [
        str(Path(sys.executable).parent / "sits-loadgen"),
        "--base-url",
        vllm_server.base_url,
        "--model",
        MODEL,
        "--rate",
        "8",
        "--max-requests",
        "12",
        "--duration",
        "20",
        "--max-tokens",
        str(TOKENS),
        "--out",
        str(out),
        "--progress-every",
        "1",
        "--fail-under",
        "1.0",
        "--seed",
        "3",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "12 planned, 12 sent, 0 dropped, 0 cancelled" in done.stdout
    assert "[sits-loadgen]" in done.stderr
    assert len(out.read_text().splitlines()) == 12
