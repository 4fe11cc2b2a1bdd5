"""A rollout's timeline: weights, SLIs and request rates per variant, and the operator's events.

The live scenarios and the demo record one while real traffic runs, write it as JSON (the
evidence a test asserts on and a reader can plot again), draw it as a PNG
(``sits_live.plot``) and show it in the terminal (``sits_live.view``).

What is recorded comes from where a user would look: the weights and the phase from the
SitsDeployment's status (for the built-in router, the weights the gateway pods report
applying), the SLIs from the same PromQL the policy runs, the request rate per variant
from Prometheus, and the operator's Kubernetes events (which say what it decided). ``Recorder``
takes those readers as functions, so it is tested without a cluster.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

#: SITS2026's thresholds (policies/sits2026.yaml), drawn unless a timeline says otherwise.
SUCCESS_THRESHOLD = 0.95
LATENCY_THRESHOLD_MS = 200.0


def default_thresholds() -> dict[str, float]:
    return {"success_rate": SUCCESS_THRESHOLD, "p95_ms": LATENCY_THRESHOLD_MS}


@dataclass
class VariantSample:
    """One variant at one instant; None where the source had no value yet."""

    weight: int | None = None
    success_rate: float | None = None
    p95_ms: float | None = None
    rps: float | None = None
    ready: int | None = None


@dataclass
class Sample:
    t: float  # seconds since the timeline started
    phase: str
    variants: dict[str, VariantSample]


@dataclass
class Event:
    """An operator's Kubernetes event on the timeline: when (``t``), its reason (what it
    decided, for a decision's event) and its message (why)."""

    t: float
    reason: str
    message: str
    type: str = "Normal"


@dataclass
class Timeline:
    name: str
    namespace: str
    scenario: str
    started: float  # epoch seconds
    samples: list[Sample] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    notes: dict[str, Any] = field(default_factory=dict)
    # The policy's thresholds the plot draws ({"success_rate": .., "p95_ms": ..}).
    thresholds: dict[str, float] = field(default_factory=default_thresholds)

    def variants(self) -> list[str]:
        """Every variant seen, in first-seen order (stable first when it was first)."""
        seen: dict[str, None] = {}
        for sample in self.samples:
            for name in sample.variants:
                seen.setdefault(name, None)
        return list(seen)

    def series(self, variant: str, what: str) -> tuple[list[float], list[float | None]]:
        """Times and values of one field of one variant (None where it had none)."""
        times, values = [], []
        for sample in self.samples:
            if variant in sample.variants:
                times.append(sample.t)
                values.append(getattr(sample.variants[variant], what))
        return times, values

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=1, allow_nan=False)

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json())
        return path

    @classmethod
    def from_json(cls, text: str) -> Timeline:
        raw = json.loads(text)
        samples = [
            Sample(
                t=s["t"],
                phase=s["phase"],
                variants={k: VariantSample(**v) for k, v in s["variants"].items()},
            )
            for s in raw.pop("samples")
        ]
        events = [Event(**e) for e in raw.pop("events")]
        return cls(**raw, samples=samples, events=events)


#: Reads the SitsDeployment as JSON (None while it does not exist).
StatusReader = Callable[[], Mapping[str, Any] | None]
#: Runs an instant PromQL query; returns {variant label: value}.
Query = Callable[[str], Mapping[str, float]]
#: Lists the SitsDeployment's events (Kubernetes Event objects as JSON).
EventsReader = Callable[[], Iterable[Mapping[str, Any]]]


def finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


@dataclass
class Queries:
    """PromQL per variant for what the status does not carry (request rate), and the SLIs
    (the policy's own queries, already rendered for this SitsDeployment)."""

    success_rate: str
    p95_ms: str
    rps: str


class Recorder:
    """Samples status, Prometheus and events into a Timeline; call ``sample`` each tick."""

    def __init__(
        self,
        timeline: Timeline,
        *,
        status: StatusReader,
        query: Query,
        events: EventsReader,
        queries: Queries,
        clock: Callable[[], float],
    ) -> None:
        self.timeline = timeline
        self._status, self._query, self._events = status, query, events
        self._queries, self._clock = queries, clock
        self._seen_events: set[str] = set()

    def sample(self) -> Sample:
        now = self._clock() - self.timeline.started
        obj = self._status() or {}
        status = obj.get("status") or {}
        variants: dict[str, VariantSample] = {}
        for row in status.get("variants") or []:
            variants[str(row["name"])] = VariantSample(
                weight=row.get("weight"), ready=row.get("readyReplicas")
            )
        for what, query in (
            ("success_rate", self._queries.success_rate),
            ("p95_ms", self._queries.p95_ms),
            ("rps", self._queries.rps),
        ):
            for variant, value in self._safe_query(query).items():
                setattr(variants.setdefault(variant, VariantSample()), what, finite(value))
        sample = Sample(t=round(now, 2), phase=str(status.get("phase", "-")), variants=variants)
        self.timeline.samples.append(sample)
        self._collect_events()
        return sample

    def _safe_query(self, query: str) -> Mapping[str, float]:
        """A failed query is a gap in the plot, not the end of the recording."""
        try:
            return self._query(query)
        except Exception:  # Prometheus restarting, a scrape gap: record nothing
            return {}

    def _collect_events(self) -> None:
        for event in sorted(self._events(), key=event_time):
            uid = str((event.get("metadata") or {}).get("uid", ""))
            if not uid or uid in self._seen_events:
                continue
            self._seen_events.add(uid)
            when = event_time(event) - self.timeline.started
            self.timeline.events.append(
                Event(
                    t=round(max(when, 0.0), 2),
                    reason=str(event.get("reason", "")),
                    message=str(event.get("message", "")),
                    type=str(event.get("type", "Normal")),
                )
            )


def event_time(event: Mapping[str, Any]) -> float:
    """Event times are RFC 3339 strings (eventTime has microseconds, the others seconds)."""
    for key in ("eventTime", "lastTimestamp", "firstTimestamp"):
        stamp = event.get(key)
        if stamp:
            return datetime.fromisoformat(str(stamp).replace("Z", "+00:00")).timestamp()
    created = (event.get("metadata") or {}).get("creationTimestamp")
    if created:
        return datetime.fromisoformat(str(created).replace("Z", "+00:00")).timestamp()
    return 0.0
