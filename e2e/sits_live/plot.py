"""The timeline as a PNG: weights, success rate and p95 per variant, decisions marked.

Three panels over one time axis, because that is how a rollout is argued about: what
share each variant had (top), whether it answered (middle, with SITS2026's 0.95 floor)
and how fast (bottom, with the 200 ms ceiling). Every operator event is a vertical line
across all three, labelled with its reason, so "rolled back after two failing periods"
can be checked by eye. Agg backend: no display needed.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt

from .timeline import Timeline

#: Events that are decisions (drawn as lines); others (pods scheduled...) are left out.
DECISION_COLOURS = {
    "Step": "tab:blue",
    "Promoting": "tab:green",
    "Promoted": "tab:green",
    "RolledBack": "tab:red",
    "WeightCut": "tab:orange",
    "Paused": "tab:purple",
    "Resumed": "tab:purple",
    "Retry": "tab:grey",
}


def _values(values: list[float | None]) -> list[float]:
    """None becomes NaN: matplotlib leaves a gap there instead of drawing to zero."""
    return [float("nan") if v is None else v for v in values]


def plot(timeline: Timeline, path: Path) -> Path:
    """Draw ``timeline`` into ``path`` (PNG) and return the path."""
    fig, (weights, success, latency) = plt.subplots(
        3, 1, sharex=True, figsize=(11, 8), height_ratios=(1.2, 1, 1)
    )
    for variant in timeline.variants():
        t, w = timeline.series(variant, "weight")
        weights.step(t, _values(w), where="post", label=variant, linewidth=2)
        t, s = timeline.series(variant, "success_rate")
        success.plot(t, _values(s), marker=".", label=variant)
        t, p = timeline.series(variant, "p95_ms")
        latency.plot(t, _values(p), marker=".", label=variant)
    weights.set_ylabel("weight (%)")
    weights.set_ylim(-5, 105)
    weights.legend(loc="center left", fontsize="small")
    success.axhline(timeline.thresholds["success_rate"], color="grey", linestyle="--", linewidth=1)
    success.set_ylabel("success rate")
    success.set_ylim(min(0.5, _lowest(timeline, "success_rate")), 1.02)
    latency.axhline(timeline.thresholds["p95_ms"], color="grey", linestyle="--", linewidth=1)
    latency.set_ylabel("p95 latency (ms)")
    latency.set_xlabel("seconds since the rollout started")
    for event in timeline.events:
        colour = DECISION_COLOURS.get(event.reason)
        if colour is None:
            continue
        for axis in (weights, success, latency):
            axis.axvline(event.t, color=colour, alpha=0.5, linewidth=1)
        weights.annotate(
            event.reason,
            (event.t, 100),
            rotation=90,
            fontsize="x-small",
            va="top",
            ha="right",
            color=colour,
        )
    fig.suptitle(f"{timeline.namespace}/{timeline.name}: {timeline.scenario}")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _lowest(timeline: Timeline, what: str) -> float:
    values = [
        v
        for variant in timeline.variants()
        for v in timeline.series(variant, what)[1]
        if v is not None
    ]
    return min(values, default=1.0) - 0.02
