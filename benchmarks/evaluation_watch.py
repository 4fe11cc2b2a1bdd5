"""Evaluation lag seen from outside the operator: a watch on every SitsDeployment.

The operator's own histogram (sits_operator_evaluation_lag_seconds) starts at the time a
period is due and only gives bucket bounds. A skeptic asks how late the decision is *as a
client sees it*: this module runs `kubectl get sitsd -A --watch-only` and stamps each
event on arrival. An event whose `status.analysis.lastEvaluatedAt` is new for its object
is that object's evaluation of one period; its lag is the arrival time minus the start of
that period (each SitsDeployment's periods start at its own phase, core/analysis/
schedule.py; `lastEvaluatedAt` is taken just after the start, so the period it lies in is
the one evaluated). The watch's own delivery
time is included, so the figure is an upper bound of when the status was written.
"""

from __future__ import annotations

import math
import statistics
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from sits_operator.core.analysis.schedule import period_phase, period_start

# One line per watch event: namespace/name and the evaluation's start (epoch seconds).
JSONPATH = '{.metadata.namespace}/{.metadata.name} {.status.analysis.lastEvaluatedAt}{"\\n"}'


@dataclass(frozen=True)
class Arrival:
    """A watch event: when it arrived, for which object, and the evaluation it shows."""

    at: float
    key: str
    evaluated_at: float


def parse_line(line: str, at: float) -> Arrival | None:
    """An event line, or None for objects not (yet) analysed."""
    key, _, value = line.strip().partition(" ")
    try:
        evaluated_at = float(value)
    except ValueError:
        return None
    return Arrival(at, key, evaluated_at)


def deployment_phase(key: str, interval: float) -> float:
    """The operator's phase for `namespace/name` (core/analysis/schedule.py)."""
    namespace, _, name = key.partition("/")
    return period_phase(namespace, name, interval)


def evaluation_lags(
    arrivals: Iterable[Arrival],
    interval: float,
    start: float,
    end: float,
    phase_of: Callable[[str, float], float] = deployment_phase,
) -> list[float]:
    """Seconds from each period start in [start, end) to the first event showing an
    object's evaluation of that period (each object's periods start at its own phase).

    Later events with the same `lastEvaluatedAt` (another status change of the same pass,
    or a resync) are not new evaluations and are skipped. An evaluation outside the period
    grid (the first pass under a new policy, mid-period) counts for the boundary before
    it, so windows should start after such passes."""
    seen: set[tuple[str, float]] = set()
    lags = []
    for arrival in sorted(arrivals, key=lambda a: a.at):
        if (arrival.key, arrival.evaluated_at) in seen:
            continue
        seen.add((arrival.key, arrival.evaluated_at))
        boundary = period_start(arrival.evaluated_at, interval, phase_of(arrival.key, interval))
        if start <= boundary < end:
            lags.append(arrival.at - boundary)
    return lags


def quantile(values: list[float], q: float) -> float:
    """The q-quantile by the nearest-rank rule (an observed value; NaN with none)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def summary(lags: list[float]) -> dict[str, float]:
    return {
        "count": float(len(lags)),
        "p50": statistics.median(lags) if lags else math.nan,
        "p99": quantile(lags, 0.99),
        "max": max(lags) if lags else math.nan,
    }


@dataclass
class EvaluationWatch:
    """`kubectl get sitsd -A --watch-only` in the background; arrivals stamped as read.

    kubectl ends a watch when the apiserver closes it (exit 0, several times an hour): it
    is started again (counted in `restarts`, stderr kept in `log`) with a list first, so
    an evaluation written in the gap is still seen, stamped when listed: late, never
    lost (the lag is overstated, never understated)."""

    kubectl: str
    kubeconfig: Path
    log: Path
    arrivals: list[Arrival] = field(default_factory=list)
    restarts: int = 0
    _process: subprocess.Popen[str] | None = None
    _thread: threading.Thread | None = None
    _stopping: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> EvaluationWatch:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _command(self, *, relist: bool) -> list[str]:
        return [
            self.kubectl,
            f"--kubeconfig={self.kubeconfig}",
            "get",
            "sitsd",
            "-A",
            "--watch" if relist else "--watch-only",
            "-o",
            f"jsonpath={JSONPATH}",
        ]

    def _run(self) -> None:
        with self.log.open("a") as errors:
            while not self._stopping.is_set():
                process = subprocess.Popen(
                    self._command(relist=self.restarts > 0),
                    stdout=subprocess.PIPE,
                    stderr=errors,
                    text=True,
                    bufsize=1,
                )
                self._process = process
                if process.stdout is not None:
                    self._read(process.stdout)
                process.wait()
                if not self._stopping.is_set():
                    self.restarts += 1
                    errors.write(f"watch ended (rc {process.returncode}); starting it again\n")
                    errors.flush()
                    time.sleep(1)

    def _read(self, stdout: IO[str]) -> None:
        for line in stdout:
            arrival = parse_line(line, time.time())
            if arrival is not None:
                with self._lock:
                    self.arrivals.append(arrival)

    def lags(self, interval: float, start: float, end: float) -> list[float]:
        """Lags of the evaluations of the periods that start in [start, end)."""
        with self._lock:
            arrivals = list(self.arrivals)
        return evaluation_lags(arrivals, interval, start, end)

    def stop(self) -> None:
        self._stopping.set()
        if self._process is not None:
            self._process.terminate()
        if self._thread is not None:
            self._thread.join(timeout=10)
