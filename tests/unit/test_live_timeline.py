"""The live timeline: what the recorder takes from status, Prometheus and events, its JSON,
its plot and its terminal lines (the readers are plain functions here)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from sits_live.plot import plot
from sits_live.timeline import Event, Queries, Recorder, Sample, Timeline, VariantSample
from sits_live.view import LiveView, sample_line

STARTED = 1_800_000_000.0
QUERIES = Queries(success_rate="SR", p95_ms="P95", rps="RPS")


class Fakes:
    """Mutable readers: the test changes what the 'cluster' and 'Prometheus' return."""

    def __init__(self) -> None:
        self.now = STARTED
        self.status: dict[str, Any] | None = None
        self.results: dict[str, dict[str, float]] = {}
        self.events: list[dict[str, Any]] = []
        self.failing: set[str] = set()

    def query(self, promql: str) -> Mapping[str, float]:
        if promql in self.failing:
            raise ConnectionError("prometheus down")
        return self.results.get(promql, {})

    def recorder(self) -> Recorder:
        timeline = Timeline(name="chat", namespace="ns", scenario="test", started=STARTED)
        return Recorder(
            timeline,
            status=lambda: self.status,
            query=self.query,
            events=lambda: self.events,
            queries=QUERIES,
            clock=lambda: self.now,
        )


def _status(phase: str, weights: dict[str, int]) -> dict[str, Any]:
    rows = [{"name": n, "weight": w, "readyReplicas": 1} for n, w in weights.items()]
    return {"status": {"phase": phase, "variants": rows}}


def _event(uid: str, reason: str, stamp: str, type_: str = "Normal") -> dict[str, Any]:
    return {
        "metadata": {"uid": uid},
        "reason": reason,
        "message": f"{reason}!",
        "type": type_,
        "lastTimestamp": stamp,
    }


def test_a_sample_joins_status_and_queries_per_variant() -> None:
    fakes = Fakes()
    fakes.status = _status("Progressing", {"v1": 80, "v2": 20})
    fakes.results = {"SR": {"v1": 1.0, "v2": 0.9}, "P95": {"v2": 120.0}, "RPS": {"v1": 4.0}}
    fakes.now = STARTED + 3.5
    sample = fakes.recorder().sample()
    assert sample.t == 3.5
    assert sample.phase == "Progressing"
    assert sample.variants["v1"] == VariantSample(weight=80, success_rate=1.0, rps=4.0, ready=1)
    assert sample.variants["v2"] == VariantSample(
        weight=20, success_rate=0.9, p95_ms=120.0, ready=1
    )


def test_nan_and_a_failing_query_become_gaps_not_errors() -> None:
    fakes = Fakes()
    fakes.status = _status("Progressing", {"v1": 100})
    fakes.results = {"SR": {"v1": float("nan")}}
    fakes.failing = {"P95"}
    sample = fakes.recorder().sample()
    assert sample.variants["v1"].success_rate is None
    assert sample.variants["v1"].p95_ms is None


def test_no_object_yet_is_a_sample_without_variants() -> None:
    sample = Fakes().recorder().sample()
    assert sample.phase == "-"
    assert sample.variants == {}


def test_each_event_is_recorded_once_at_its_own_time() -> None:
    fakes = Fakes()
    recorder = fakes.recorder()
    fakes.events = [
        _event("b", "RolledBack", "2027-01-15T08:00:10Z", "Warning"),
        _event("a", "WeightChanged", "2027-01-15T08:00:05Z"),
    ]
    recorder.sample()
    recorder.sample()  # the same events again: not recorded twice
    reasons = [(e.reason, e.t) for e in recorder.timeline.events]
    # STARTED is 2027-01-15T08:00:00Z: the events are 5 s and 10 s after it.
    assert reasons == [("WeightChanged", 5.0), ("RolledBack", 10.0)]


def test_json_round_trip_keeps_everything() -> None:
    timeline = Timeline(name="chat", namespace="ns", scenario="s", started=STARTED)
    variants = {"v1": VariantSample(weight=90, p95_ms=10.0)}
    timeline.samples.append(Sample(t=1.0, phase="Progressing", variants=variants))
    timeline.events.append(Event(t=1.0, reason="WeightChanged", message="m"))
    timeline.notes["requests"] = 10
    again = Timeline.from_json(timeline.to_json())
    assert again == timeline


def test_nan_cannot_reach_the_json() -> None:
    timeline = Timeline(name="c", namespace="n", scenario="s", started=0.0)
    timeline.samples.append(
        Sample(t=0, phase="x", variants={"v": VariantSample(p95_ms=float("nan"))})
    )
    with pytest.raises(ValueError, match="JSON compliant"):
        timeline.to_json()


def test_plot_writes_a_png_with_every_variant(tmp_path: Path) -> None:
    timeline = Timeline(name="chat", namespace="ns", scenario="rollback", started=STARTED)
    for i, weight in enumerate((20, 20, 0)):
        timeline.samples.append(
            Sample(
                t=float(i),
                phase="Progressing",
                variants={
                    "v1": VariantSample(weight=100 - weight, success_rate=1.0, p95_ms=50.0),
                    "v2": VariantSample(weight=weight, success_rate=0.8, p95_ms=None),
                },
            )
        )
    timeline.events.append(Event(t=2.0, reason="RolledBack", message="m"))
    path = plot(timeline, tmp_path / "out" / "t.png")
    data = path.read_bytes()
    assert data.startswith(b"\x89PNG")
    assert len(data) > 10_000


def test_live_view_prints_events_once_and_skips_repeated_samples() -> None:
    lines: list[str] = []
    view = LiveView(out=lines.append, every=100)
    same = {"v1": VariantSample(weight=100)}
    events = [Event(t=1.0, reason="RolledBack", message="two failing periods", type="Warning")]
    view.show(Sample(t=1.0, phase="Progressing", variants=same), events)
    view.show(Sample(t=2.0, phase="Progressing", variants=same), events)
    view.show(Sample(t=3.0, phase="RolledBack", variants=same), events)
    assert lines[0].endswith("!! RolledBack: two failing periods")
    assert len(lines) == 3  # the event, the first sample, the phase change
    assert "RolledBack" in lines[2]


def test_sample_line_shows_missing_values_as_dashes() -> None:
    line = sample_line(Sample(t=0.0, phase="Pending", variants={"v2": VariantSample()}))
    assert "v2 - ok - p95 -ms -/s" in line
