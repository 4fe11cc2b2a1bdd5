"""What a load run is: target, arrival rate, bounds, traffic mix. Validated on creation.

Why every bound is mandatory: a load generator that can run unbounded is one typo away
from hammering a shared machine all night. A run stops at ``max_requests`` arrivals or
``duration_s`` seconds, whichever comes first, and in-flight requests get at most
``drain_timeout_s`` more; hard ceilings below keep even a deliberate run finite.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .journey import SHOP_JOURNEY, Journey
from .safety import check_target

ContextMode = Literal["system", "header"]
TemperatureMix = tuple[tuple[float | None, float], ...]

# Most chat clients send temperature 0.7, or none at all (the server's default then
# applies); a few send 0 (greedy), the only requests an L1 cache stores by default.
DEFAULT_TEMPERATURES: TemperatureMix = ((0.7, 0.5), (None, 0.4), (0.0, 0.1))

MAX_RATE = 10_000.0
MAX_REQUESTS = 1_000_000
MAX_DURATION_S = 86_400.0
MAX_CONCURRENCY = 4096
MAX_RETRIES = 10


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


def _check_share(name: str, value: float) -> None:
    _require(0.0 <= value <= 1.0, f"{name} must be within [0, 1], got {value}")


def _check_temperatures(mix: TemperatureMix) -> None:
    _require(bool(mix), "temperatures: give at least one value")
    for value, weight in mix:
        _require(weight >= 0, f"temperature weight must be >= 0, got {weight}")
        _require(value is None or 0.0 <= value <= 2.0, f"temperature {value} outside [0, 2]")
    _require(sum(w for _, w in mix) > 0, "temperature weights must not all be 0")


@dataclass(frozen=True)
class LoadConfig:
    """One bounded, open-loop run against ``base_url`` (an OpenAI API root, ``.../v1``).

    Arrivals are Poisson at ``rate`` requests per second, spread over ``sessions``
    concurrently open user sessions; at most ``concurrency`` requests are in flight
    (an arrival beyond that is recorded as dropped: open loop, no queueing).

    ``context_mode``: ``header`` (default) sends the session context in a request header,
    ``system`` in the system message, where it inflates the prompt as the seed describes;
    late turns then need a context window of about 1k tokens, more than the project's
    tiny CPU model has (max-model-len 256: its requests would fail with 400).
    """

    base_url: str
    model: str
    rate: float
    max_requests: int
    duration_s: float
    concurrency: int = 64
    sessions: int = 16
    seed: int = 0
    stream_share: float = 0.5
    repeat_share: float = 0.4
    temperatures: TemperatureMix = DEFAULT_TEMPERATURES
    max_tokens: int = 32
    context_mode: ContextMode = "header"
    max_turns: int = 12
    request_timeout_s: float = 60.0
    drain_timeout_s: float = 30.0
    # The official client's retries of what never reached the server (connection refused
    # or reset before a response); 0 (the default) measures every failure, 2 is what an
    # application using the client's defaults gets (the gateway pod kill scenario).
    max_retries: int = 0
    progress_interval_s: float = 5.0
    api_key: str = "unused"
    extra_headers: Mapping[str, str] = field(default_factory=dict)
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    out: Path | None = None
    journey: Journey = SHOP_JOURNEY

    def __post_init__(self) -> None:
        check_target(self.base_url)
        _require(bool(self.model), "model must be given")
        _require(0 < self.rate <= MAX_RATE, f"rate must be in (0, {MAX_RATE:g}] req/s")
        _require(0 < self.max_requests <= MAX_REQUESTS, f"max_requests: 1..{MAX_REQUESTS}")
        _require(0 < self.duration_s <= MAX_DURATION_S, f"duration_s: (0, {MAX_DURATION_S:g}]")
        _require(0 < self.concurrency <= MAX_CONCURRENCY, f"concurrency: 1..{MAX_CONCURRENCY}")
        _require(self.sessions >= 1, "sessions must be >= 1")
        _require(self.max_turns >= 1, "max_turns must be >= 1")
        _require(self.max_tokens >= 1, "max_tokens must be >= 1")
        _check_share("stream_share", self.stream_share)
        _check_share("repeat_share", self.repeat_share)
        _check_temperatures(self.temperatures)
        _require(self.context_mode in ("system", "header"), "context_mode: system or header")
        for name in ("request_timeout_s", "drain_timeout_s"):
            _require(0 < getattr(self, name) <= MAX_DURATION_S, f"{name} must be > 0")
        _require(self.progress_interval_s >= 0, "progress_interval_s must be >= 0 (0: off)")
        _require(0 <= self.max_retries <= MAX_RETRIES, f"max_retries: 0..{MAX_RETRIES}")


def parse_temperatures(text: str) -> TemperatureMix:
    """``"0.7:0.5,none:0.4,0:0.1"`` (value:weight, ``none`` = not sent) -> a mix."""
    mix: list[tuple[float | None, float]] = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        value, _, weight = item.partition(":")
        temperature = None if value.strip().lower() == "none" else float(value)
        mix.append((temperature, float(weight) if weight else 1.0))
    _check_temperatures(tuple(mix))
    return tuple(mix)


def format_temperatures(mix: Sequence[tuple[float | None, float]]) -> str:
    """The inverse of ``parse_temperatures``, for help texts and logs."""
    return ",".join(f"{'none' if v is None else f'{v:g}'}:{w:g}" for v, w in mix)
