"""Run real traffic against a SitsDeployment while recording what the rollout does.

The load (``sits_loadgen``, one run per model name, e.g. the base model and a LoRA
adapter) runs in a thread with its own event loop; the main thread samples the timeline
every ``step_s`` and shows it live, until the rollout reaches an end the caller names
(Succeeded, RolledBack...) or the time bound passes. Then the load stops sending,
drains, and the timeline is written as JSON and drawn as a PNG next to it.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from sits_loadgen import LoadConfig, LoadResult, run_load

from .plot import plot
from .timeline import Queries, Recorder, Sample, Timeline
from .view import LiveView

Done = Callable[[Sample], bool]


def prometheus_query(url: str) -> Callable[[str], Mapping[str, float]]:
    """An instant query against ``url``; returns {variant: value} (loopback only)."""

    def query(promql: str) -> Mapping[str, float]:
        params = urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(f"{url}/api/v1/query?{params}", timeout=5) as response:
            body = json.loads(response.read())
        return {
            str(r["metric"].get("variant", "")): float(r["value"][1])
            for r in body["data"]["result"]
        }

    return query


def live_queries(namespace: str, deployment: str, source: str, window: str) -> Queries:
    """The timeline's PromQL: SITS2026's SLIs on ``window``, and requests per second, for
    the series of one ``source`` (gateway or sidecar), as the operator's analysis reads."""
    sel = f'namespace="{namespace}", sits_deployment="{deployment}", source="{source}"'
    return Queries(
        success_rate=(
            f'sum by (variant) (rate(sits_requests_total{{{sel}, outcome="success"}}[{window}]))'
            f" / sum by (variant) (rate(sits_requests_total{{{sel}}}[{window}]))"
        ),
        p95_ms=(
            "1000 * histogram_quantile(0.95, sum by (variant, le) "
            f"(rate(sits_request_duration_seconds_bucket{{{sel}}}[{window}])))"
        ),
        rps=f"sum by (variant) (rate(sits_requests_total{{{sel}}}[{window}]))",
    )


@dataclass
class Traffic:
    """Open-loop load against ``base_url``: ``rates`` maps a model name to requests/s."""

    base_url: str
    rates: Mapping[str, float]
    duration_s: float
    max_tokens: int = 8
    seed: int = 0
    configs: list[LoadConfig] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        for i, (model, rate) in enumerate(sorted(self.rates.items())):
            self.configs.append(
                LoadConfig(
                    base_url=self.base_url, model=model, rate=rate,
                    max_requests=max(1, int(rate * self.duration_s * 1.5)),
                    duration_s=self.duration_s, max_tokens=self.max_tokens,
                    seed=self.seed + i, sessions=8, concurrency=32,
                    request_timeout_s=30.0, drain_timeout_s=30.0, progress_interval_s=0,
                )
            )  # fmt: skip


class LoadThread:
    """The load runs on its own event loop in a thread; ``stop()`` ends its arrivals."""

    def __init__(self, traffic: Traffic) -> None:
        self._traffic = traffic
        self._stop = threading.Event()
        self.results: list[LoadResult] = []
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="sits-live-load", daemon=True)

    def start(self) -> LoadThread:
        self._thread.start()
        return self

    def _run(self) -> None:
        async def all_runs() -> list[LoadResult]:
            return list(
                await asyncio.gather(
                    *(run_load(c, stop=self._stop.is_set) for c in self._traffic.configs)
                )
            )

        try:
            self.results = asyncio.run(all_runs())
        except BaseException as err:  # reported by join(): the main thread decides
            self.error = err

    def stop(self, timeout: float = 60.0) -> list[LoadResult]:
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"the load did not drain within {timeout:.0f} s")
        if self.error is not None:
            raise RuntimeError(f"the load failed: {self.error!r}") from self.error
        return self.results


def record_rollout(
    recorder: Recorder,
    done: Done,
    *,
    timeout_s: float,
    step_s: float = 1.0,
    view: LiveView | None = None,
    after_done_s: float = 3.0,
) -> bool:
    """Sample until ``done`` (then ``after_done_s`` more, so the end shows in the plot) or
    until ``timeout_s``; returns whether ``done`` was reached."""
    deadline = time.monotonic() + timeout_s
    finished_at: float | None = None
    while time.monotonic() < deadline:
        sample = recorder.sample()
        if view is not None:
            view.show(sample, recorder.timeline.decisions)
        if finished_at is None and done(sample):
            finished_at = time.monotonic()
        if finished_at is not None and time.monotonic() - finished_at >= after_done_s:
            return True
        time.sleep(step_s)
    return finished_at is not None


def save(timeline: Timeline, results: list[LoadResult], directory: Path) -> tuple[Path, Path]:
    """Write ``<scenario>.json`` (timeline + load summary) and ``<scenario>.png``."""
    for result in results:
        s = result.summary.overall
        timeline.notes.setdefault("load", []).append(
            {"model": result.config.model, "sent": s.requests, "ok": s.success,
             "errors": s.errors, "p95_ms": s.latency_p95_ms}
        )  # fmt: skip
    slug = timeline.scenario.replace(" ", "-")
    return timeline.write(directory / f"{slug}.json"), plot(timeline, directory / f"{slug}.png")
