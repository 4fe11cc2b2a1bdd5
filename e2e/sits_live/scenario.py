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
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sits_loadgen import LoadConfig, LoadResult, run_load
from sits_localcluster.cluster import KUBECTL, LocalCluster

from .plot import plot
from .timeline import Queries, Query, Recorder, Sample, Timeline, event_time
from .view import LiveView


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
    #: The client's retries of requests that never reached a server (see LoadConfig).
    max_retries: int = 0
    #: How long a client waits for one answer: a story that queues requests on purpose
    #: (the slow candidate) waits longer than the default, as a patient client would.
    request_timeout_s: float = 30.0
    #: Extra request body fields, e.g. vLLM's ``ignore_eos`` for answers of a fixed length.
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    configs: list[LoadConfig] = field(init=False, default_factory=list)

    def __post_init__(self) -> None:
        for i, (model, rate) in enumerate(sorted(self.rates.items())):
            self.configs.append(
                LoadConfig(
                    base_url=self.base_url,
                    model=model,
                    rate=rate,
                    max_requests=max(1, int(rate * self.duration_s * 1.5)),
                    duration_s=self.duration_s,
                    max_tokens=self.max_tokens,
                    seed=self.seed + i,
                    sessions=8,
                    concurrency=32,
                    request_timeout_s=self.request_timeout_s,
                    drain_timeout_s=30.0,
                    progress_interval_s=0,
                    max_retries=self.max_retries,
                    extra_body=dict(self.extra_body),
                )
            )


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

    def stop(self, timeout: float = 90.0) -> list[LoadResult]:
        self._stop.set()
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise RuntimeError(f"the load did not drain within {timeout:.0f} s")
        if self.error is not None:
            raise RuntimeError(f"the load failed: {self.error!r}") from self.error
        return self.results


@dataclass
class Story:
    """One SitsDeployment under load: its recorder, its live view, the phases that end it,
    and the traffic sent to it."""

    name: str
    recorder: Recorder
    ends: frozenset[str]
    traffic: Traffic
    view: LiveView | None = None
    finished_at: float | None = None  # epoch seconds the end phase was first seen


@dataclass
class StoryResult:
    timeline: Timeline
    load: list[LoadResult]
    finished: bool


def run_stories(
    stories: list[Story],
    *,
    timeout_s: float,
    after_end_s: float = 3.0,
    step_s: float = 1.0,
    on_sample: Callable[[Story, Sample], None] | None = None,
) -> list[StoryResult]:
    """Load every story at once, sample each every ``step_s`` until each has reached one of
    its end phases (plus ``after_end_s``, so the end shows in the plot) or ``timeout_s``
    passes; then stop the load (it drains) and return what was recorded. ``on_sample``
    sees each sample as it is taken (a scenario injects its fault from there)."""
    loads = [LoadThread(story.traffic).start() for story in stories]
    deadline = time.monotonic() + timeout_s
    try:
        while time.monotonic() < deadline and not all(_over(s, after_end_s) for s in stories):
            for story in stories:
                sample = story.recorder.sample()
                if story.view is not None:
                    story.view.show(sample, story.recorder.timeline.events)
                if on_sample is not None:
                    on_sample(story, sample)
                if story.finished_at is None and sample.phase in story.ends:
                    story.finished_at = time.time()
            time.sleep(step_s)
    finally:
        results = [load.stop() for load in loads]
    return [
        StoryResult(s.recorder.timeline, r, s.finished_at is not None)
        for s, r in zip(stories, results, strict=True)
    ]


def _over(story: Story, after_end_s: float) -> bool:
    return story.finished_at is not None and time.time() - story.finished_at >= after_end_s


def cluster_story(
    cluster: LocalCluster,
    query: Query,
    namespace: str,
    name: str,
    *,
    ends: frozenset[str],
    traffic: Traffic,
    source: str = "gateway",
    window: str = "15s",
    thresholds: dict[str, float] | None = None,
    out: Callable[[str], None] | None = None,
) -> Story:
    """A story whose recorder reads the SitsDeployment and its events with kubectl and its
    SLIs from Prometheus (``query``); ``out`` prints its live view, prefixed by its name."""
    timeline = Timeline(name=name, namespace=namespace, scenario=name, started=time.time())
    if thresholds is not None:
        timeline.thresholds = dict(thresholds)
    selector = f"involvedObject.kind=SitsDeployment,involvedObject.name={name}"

    def status() -> dict[str, Any] | None:
        got = cluster.kubectl("get", "sitsd", name, "-n", namespace, "-o", "json", check=False)
        found: dict[str, Any] | None = json.loads(got.stdout) if got.returncode == 0 else None
        return found

    def events() -> list[dict[str, Any]]:
        got = cluster.kubectl(
            "get",
            "events",
            "-n",
            namespace,
            "--field-selector",
            selector,
            "-o",
            "json",
            check=False,
        )
        items: list[dict[str, Any]] = json.loads(got.stdout)["items"] if got.stdout else []
        return [e for e in items if event_time(e) >= timeline.started - 1]

    recorder = Recorder(
        timeline,
        status=status,
        query=query,
        events=events,
        queries=live_queries(namespace, name, source, window),
        clock=time.time,
    )
    view = None
    if out is not None:
        printer = out
        view = LiveView(out=lambda line: printer(f"{name:>8}{line}"))
    return Story(name, recorder, ends, traffic, view)


def save(timeline: Timeline, results: list[LoadResult], directory: Path) -> tuple[Path, Path]:
    """Write ``<scenario>.json`` (timeline + load summary) and ``<scenario>.png``."""
    for result in results:
        s = result.summary.overall
        timeline.notes.setdefault("load", []).append(
            {
                "model": result.config.model,
                "sent": s.requests,
                "ok": s.success,
                "errors": s.errors,
                "p95_ms": s.latency_p95_ms,
            }
        )
    slug = timeline.scenario.replace(" ", "-")
    return timeline.write(directory / f"{slug}.json"), plot(timeline, directory / f"{slug}.png")


class PhaseWatch:
    """When a SitsDeployment's phase changed, to the millisecond of its arrival here:
    ``kubectl get --watch`` streams one line per change, stamped as it is read (status
    timestamps have one-second resolution, too coarse for a 1 s routing budget)."""

    def __init__(self, cluster: LocalCluster, namespace: str, name: str) -> None:
        self.changes: list[tuple[float, str]] = []
        self._proc = subprocess.Popen(
            [
                KUBECTL,
                f"--kubeconfig={cluster.kubeconfig}",
                "get",
                "sitsd",
                name,
                "-n",
                namespace,
                "--watch",
                "-o",
                'jsonpath={.status.phase}{"\\n"}',
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            phase = line.strip()
            if phase and (not self.changes or self.changes[-1][1] != phase):
                self.changes.append((time.time(), phase))

    def first(self, phase: str) -> float | None:
        return next((t for t, p in self.changes if p == phase), None)

    def stop(self) -> None:
        self._proc.terminate()
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait(timeout=5)
        self._thread.join(timeout=5)
        if self._proc.stdout is not None:
            self._proc.stdout.close()
