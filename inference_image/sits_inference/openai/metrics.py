"""The request-metric contract: what every proxied OpenAI request adds to Prometheus.

These series are what the operator's analysis queries (``policies/sits2026.yaml``:
``sits_requests_total{outcome}`` for the success rate, ``sits_request_duration_seconds``
for the p95 latency), so their names and labels are a contract: the integration tests
assert the exposition exactly. One implementation, used by the gateway (``source="gateway"``)
and by the cache sidecar for the requests its pod serves (``source="sidecar"``): the same
request seen by both is two series that differ in ``source``, and the analysis queries
select one source (``spec.analysis.source``), so they are never summed.

Labels: ``namespace``, ``sits_deployment``, ``variant``, ``operation`` (chat,
text_completion, embeddings), ``token_bucket`` (le128, le512, le2k, gt2k: the prompt's
length) and ``source`` (gateway, sidecar) on every series; ``outcome`` (success, error) and
``code`` on the request counter; ``token_type`` (input, output) on the token counter.

Naming. Instruments are OpenTelemetry's, exported through its Prometheus reader into a
``prometheus_client`` registry. The exporter (0.5x+) appends ``_<unit>`` only when the name
does not already end with it, and a counter family strips then re-adds ``_total``; so
instruments are created under their final names with UCUM units whose mapping is already
the suffix (``sits_request_duration_seconds`` with unit ``s``; ``{request}`` maps to no
suffix). Scope labels (``otel_scope_*``) and ``target_info`` are switched off: they would
add labels to every series that the contract does not have.

Cost (it runs per request). Counters are plain dict increments read by observable
counters at scrape time (a synchronous SDK ``add`` costs ~7 us); only the histograms are
recorded synchronously. Exemplars are off, and attribute dicts are memoised per series.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics._internal.exemplar import AlwaysOffExemplarFilter
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry

from .usage import Usage

# Fine between 10 ms and 2 s (SITS2026 thresholds: 45, 95, 120, 200, 350 ms), then coarse.
LATENCY_BUCKETS = (
    0.005,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.035,
    0.04,
    0.045,
    0.05,
    0.06,
    0.07,
    0.08,
    0.09,
    0.095,
    0.1,
    0.12,
    0.14,
    0.16,
    0.18,
    0.2,
    0.225,
    0.25,
    0.3,
    0.35,
    0.4,
    0.5,
    0.6,
    0.75,
    1.0,
    1.25,
    1.5,
    2.0,
    3.0,
    5.0,
    10.0,
    30.0,
    60.0,
)
PER_TOKEN_BUCKETS = (
    0.001,
    0.002,
    0.005,
    0.01,
    0.015,
    0.02,
    0.025,
    0.03,
    0.04,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.5,
    1.0,
)
CLIENT_CLOSED = 499  # nginx's code for "the client went away before the answer"
# Rough bytes per token of a request body, for the token bucket of answers without usage.
BYTES_PER_TOKEN = 4

# Token-length buckets of the prompt: few and fixed, so the label stays low-cardinality.
TOKEN_BUCKETS = ((128, "le128"), (512, "le512"), (2048, "le2k"))
TOKEN_BUCKET_OVER = "gt2k"


class Outcome(enum.StrEnum):
    """The ``outcome`` label of ``sits_requests_total``."""

    SUCCESS = "success"
    ERROR = "error"


# Request-counter series created at 0 beside the first request of a (variant, operation,
# token bucket): rate() ignores whatever a series already counted at its first scrape, so
# an error series born with its first errors would hide them from the success-rate SLI.
SEEDED_OUTCOMES = (
    (Outcome.SUCCESS, "200"),
    (Outcome.ERROR, "500"),
    (Outcome.ERROR, "502"),
    (Outcome.ERROR, "503"),
    (Outcome.ERROR, "504"),
    (Outcome.ERROR, "429"),
)


class Source(enum.StrEnum):
    """The ``source`` label: which proxy recorded the series (``spec.analysis.source``)."""

    GATEWAY = "gateway"
    SIDECAR = "sidecar"


Key = tuple[str, ...]

# ``source`` is last and empty unless set: empty label values are left out of a series.
SERIES_LABELS = ("namespace", "sits_deployment", "variant", "operation", "token_bucket", "source")
REQUEST_LABELS = (*SERIES_LABELS[:-1], "outcome", "code", "source")
TOKEN_LABELS = ("namespace", "sits_deployment", "variant", "operation", "token_type", "source")


def is_success(code: int) -> bool:
    """The contract's outcome: an error is a 5xx, a 429, a timeout or a connection failure."""
    return code < 500 and code != 429


def token_bucket(prompt_tokens: int) -> str:
    for limit, label in TOKEN_BUCKETS:
        if prompt_tokens <= limit:
            return label
    return TOKEN_BUCKET_OVER


@dataclass(slots=True)
class RequestRecord:
    """What one proxied request contributes to the metrics (and to its span)."""

    variant: str
    operation: str
    model: str
    code: int
    duration_s: float
    prompt_tokens: int
    completion_tokens: int | None = None
    ttft_s: float | None = None
    response_model: str | None = None
    endpoint: str = ""
    error_type: str | None = None
    usage_known: bool = False


def estimated_prompt_tokens(body: bytes) -> int:
    """The prompt's length in tokens, roughly, until the answer's usage says it exactly."""
    return len(body) // BYTES_PER_TOKEN


def apply_usage(rec: RequestRecord, usage: Usage | None) -> None:
    """The answer's usage (exact token counts, served model) replaces the estimate."""
    if usage is None:
        return
    if usage.prompt_tokens is not None:
        rec.prompt_tokens, rec.usage_known = usage.prompt_tokens, True
    if usage.completion_tokens is not None:
        rec.completion_tokens = usage.completion_tokens
    if usage.model:
        rec.response_model = usage.model


def time_per_output_token(rec: RequestRecord) -> float | None:
    """(duration - TTFT) / (output tokens - 1): the GenAI convention's inter-token time."""
    if rec.ttft_s is None or not rec.completion_tokens or rec.completion_tokens < 2:
        return None
    return max(rec.duration_s - rec.ttft_s, 0.0) / (rec.completion_tokens - 1)


class Attributes:
    """Attribute dicts memoised per label-value tuple: built once per series, not per request.
    Empty values are left out, so an unset label is absent rather than ``""``."""

    __slots__ = ("_cache", "_names")

    def __init__(self, names: tuple[str, ...]) -> None:
        self._names = names
        self._cache: dict[Key, dict[str, str]] = {}

    def __call__(self, key: Key) -> dict[str, str]:
        found = self._cache.get(key)
        if found is None:
            found = {name: value for name, value in zip(self._names, key, strict=True) if value}
            if len(self._cache) < 4096:  # bounded even if something unexpected varies
                self._cache[key] = found
        return found


class ObservedCounter:
    """A monotonic sum in a plain dict, read by an ObservableCounter when Prometheus scrapes.

    A synchronous SDK counter costs several microseconds per ``add`` (attribute cleaning,
    hashing, a Measurement object); a dict increment costs a fraction of one, and the
    exported series are identical (cumulative sums, ``_total``).
    """

    __slots__ = ("attributes", "values")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.attributes = Attributes(names)
        self.values: dict[Key, float] = {}

    def add(self, key: Key, amount: float = 1) -> None:
        self.values[key] = self.values.get(key, 0) + amount

    def seed(self, prefix: Key, suffixes: Iterable[Key]) -> None:
        """Create series at 0 (without touching existing ones) so their first scrape is 0."""
        for suffix in suffixes:
            self.values.setdefault(prefix + suffix, 0)

    def observe(self, _: CallbackOptions) -> Iterable[Observation]:
        for key, value in list(self.values.items()):
            yield Observation(value, self.attributes(key))


def prometheus_meter_provider(
    service: str, registry: CollectorRegistry | None = None
) -> tuple[MeterProvider, CollectorRegistry]:
    """A meter provider whose metrics ``registry`` exposes (a new one by default: the
    sidecar would pass the one its ``sits_cache_*`` series live in), without scope labels,
    ``target_info`` or exemplars (see the module's docstring)."""
    registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
    reader = PrometheusMetricReader(
        disable_target_info=True, scope_info_enabled=False, registry=registry
    )
    provider = MeterProvider(
        metric_readers=[reader],
        resource=Resource.create({"service.name": service}),
        exemplar_filter=AlwaysOffExemplarFilter(),
    )
    return provider, registry


class RequestMetrics:
    """The contract's instruments on one meter, and the recording of one request.

    ``source``: every series carries a ``source`` label, so series of a gateway and of the
    sidecars behind it (the same requests, seen twice) are never summed: the SITS2026
    queries select one source. Unset only for tools that export a single source.
    """

    def __init__(self, meter: Meter, *, source: Source | None = None) -> None:
        self._source = source or ""
        self._series = Attributes(SERIES_LABELS)
        self._requests = ObservedCounter(REQUEST_LABELS)
        self._tokens = ObservedCounter(TOKEN_LABELS)
        meter.create_observable_counter(
            "sits_requests_total",
            [self._requests.observe],
            unit="{request}",
            description="Proxied requests by variant and outcome (the success-rate SLI).",
        )
        meter.create_observable_counter(
            "sits_tokens_total",
            [self._tokens.observe],
            unit="{token}",
            description="Tokens reported by the responses' usage, input and output.",
        )
        self._duration = meter.create_histogram(
            "sits_request_duration_seconds",
            unit="s",
            description="Latency seen by the proxy, receipt to last byte (the p95 SLI).",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self._ttft = meter.create_histogram(
            "sits_time_to_first_token_seconds",
            unit="s",
            description="Streams: receipt to the first chunk from the upstream.",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self._tpot = meter.create_histogram(
            "sits_time_per_output_token_seconds",
            unit="s",
            description="Streams: (duration - TTFT) / (output tokens - 1).",
            explicit_bucket_boundaries_advisory=PER_TOKEN_BUCKETS,
        )

    def record(self, rec: RequestRecord, namespace: str, deployment: str) -> bool:
        """Count the request; False when it is no latency sample (the client left first:
        counted with code 499, which is not the variant's error)."""
        bucket = token_bucket(rec.prompt_tokens)
        outcome = Outcome.SUCCESS if is_success(rec.code) else Outcome.ERROR
        prefix = (namespace, deployment, rec.variant, rec.operation, bucket)
        key = (*prefix, outcome, str(rec.code), self._source)
        if key not in self._requests.values:
            self._requests.seed(prefix, ((*pair, self._source) for pair in SEEDED_OUTCOMES))
        self._requests.add(key)
        if rec.code == CLIENT_CLOSED:
            return False
        series = self._series((*prefix, self._source))
        self._duration.record(rec.duration_s, series)
        if rec.ttft_s is not None:
            self._ttft.record(rec.ttft_s, series)
            per_token = time_per_output_token(rec)
            if per_token is not None:
                self._tpot.record(per_token, series)
        if rec.usage_known:
            self._count_tokens(rec, namespace, deployment)
        return True

    def _count_tokens(self, rec: RequestRecord, namespace: str, deployment: str) -> None:
        prefix = (namespace, deployment, rec.variant, rec.operation)
        self._tokens.add((*prefix, "input", self._source), rec.prompt_tokens)
        if rec.completion_tokens:
            self._tokens.add((*prefix, "output", self._source), rec.completion_tokens)
