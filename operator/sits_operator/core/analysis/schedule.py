"""When each SitsDeployment's analysis periods start: its own phase within the interval.

Periods used to start on the same wall-clock boundaries for every SitsDeployment, so a
thousand rollouts under one policy were all due in the same half second: the operator
evaluated them one after another and wrote a thousand statuses in a burst: half were
decided more than 8 s after their boundary, the slowest 33 s (measured at 1,000 on 2
cores before this module; docs/benchmarks.md, analysis scale). Argo Rollouts and
Flagger start each analysis on a clock of its own; here each SitsDeployment's periods are
shifted by a phase taken from its namespace and name, so the work spreads over the interval.

Phases are whole slots of `shared_max_age` seconds: deployments of a namespace in the same
slot are due together and share one batched Prometheus answer (adapters/prometheus_batch),
so queries per period are bounded by the slot count (at most 15 per rule and namespace at
30 s), never by the number of SitsDeployments. The phase depends only on the object's
namespace and name: every replica, and every leader after a failover, computes the same
period numbers.
"""

from __future__ import annotations

import hashlib
import math

# A batched answer shared by the rollouts of a namespace is never older than this, nor
# than a tenth of the policy's interval, when a decision is taken on it.
MAX_SHARED_AGE_SECONDS = 2.0
# Seconds after a period's start when it is evaluated: late enough that a timer firing a
# moment early (or a clock a little behind) still lands in the new period.
DUE_AFTER_START_SECONDS = 0.5


def shared_max_age(interval_seconds: float) -> float:
    """How old a batched answer may be: small against the period it decides."""
    return min(MAX_SHARED_AGE_SECONDS, interval_seconds / 10)


def period_phase(namespace: str, name: str, interval_seconds: float) -> float:
    """Seconds by which this SitsDeployment's periods start after the wall-clock grid."""
    width = shared_max_age(interval_seconds)
    if width <= 0:
        return 0.0
    slots = max(int(interval_seconds / width + 1e-9), 1)  # not //: 8.0 // 0.8 == 9.0
    digest = hashlib.blake2b(f"{namespace}/{name}".encode(), digest_size=8).digest()
    return (int.from_bytes(digest, "big") % slots) * width


def period_index(now: float, interval_seconds: float, phase: float) -> int:
    """The number of the period `now` lies in (two evaluations in one count it once)."""
    return math.floor((now - phase) / max(interval_seconds, 1e-9))


def period_start(now: float, interval_seconds: float, phase: float) -> float:
    """When the period `now` lies in started (wall clock)."""
    return period_index(now, interval_seconds, phase) * interval_seconds + phase


def seconds_to_next_period(now: float, interval_seconds: float, phase: float) -> float:
    """Evaluate just after each period's start, so each period is evaluated once."""
    return interval_seconds - (now - phase) % interval_seconds + DUE_AFTER_START_SECONDS
