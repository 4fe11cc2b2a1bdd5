"""The probes: OpenTelemetry metrics exported for Prometheus, spans, sliding windows.

Naming. The contract names are the Prometheus names (DESIGN.md section 3). The
OpenTelemetry Prometheus exporter (0.5x+) hands each metric to prometheus_client with
its unit; prometheus_client appends ``_<unit>`` only when the name does not already end
with it, and a counter family strips then re-adds ``_total``. So instruments are created
under their final names with UCUM units whose mapping is already the suffix
(``sits_request_duration_seconds`` with unit ``s`` -> ``..._seconds``, not
``..._seconds_seconds``; ``..._weight_percent`` with unit ``%``); unit annotations like
``{request}`` map to no suffix. A name that does not end in its unit's suffix gets one
appended (a gauge named ``..._weight`` with unit ``%`` would come out ``..._weight_percent``). Scope
labels (``otel_scope_*``) and ``target_info`` are switched off: they would add labels
to every series that the contract does not have. ``tests/integration/test_gateway_*``
assert the exported names exactly.

Cardinality. Labels are the contract's (namespace, sits_deployment, variant; outcome and
code on the request counter) plus ``operation`` (3 values) and ``token_bucket`` (4
values). Model names appear only on the ``gen_ai_*`` metrics, and only names the
routing table lists reach them (unknown models are refused before routing).

Cost (it runs per request). Counters are plain dict increments read by OpenTelemetry
observable counters at scrape time (a synchronous SDK ``add`` costs ~7 us); only the
histograms are recorded synchronously (one or two per request). Exemplars are off (the
trace-based filter samples per measurement), attribute dicts are memoised per series,
and span attributes are only computed for spans that record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from opentelemetry import trace
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.metrics import CallbackOptions, Meter, Observation
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics._internal.exemplar import AlwaysOffExemplarFilter
from opentelemetry.sdk.resources import Resource
from opentelemetry.util.types import Attributes
from prometheus_client import CollectorRegistry

from .openai_api import token_bucket
from .table import RoutingTable
from .window import VariantWindow

# Fine between 10 ms and 2 s (SITS2026 thresholds: 45, 95, 120, 200, 350 ms), then coarse.
LATENCY_BUCKETS = (
    0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.035, 0.04, 0.045, 0.05, 0.06, 0.07, 0.08,
    0.09, 0.095, 0.1, 0.12, 0.14, 0.16, 0.18, 0.2, 0.225, 0.25, 0.3, 0.35, 0.4, 0.5, 0.6,
    0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0,
)  # fmt: skip
PER_TOKEN_BUCKETS = (
    0.001, 0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15,
    0.2, 0.3, 0.5, 1.0,
)  # fmt: skip
CLIENT_CLOSED = 499  # nginx's code for "the client went away before the answer"
# Request-counter series created at 0 beside the first request of a (variant, operation,
# token bucket): rate() ignores whatever a series already counted at its first scrape, so
# an error series born with its first errors would hide them from the success-rate SLI.
SEEDED_OUTCOMES = (("success", "200"), ("error", "500"), ("error", "502"), ("error", "503"),
                   ("error", "504"), ("error", "429"))  # fmt: skip


def is_success(code: int) -> bool:
    """The contract's outcome: an error is a 5xx, a 429, a timeout or a connection failure."""
    return code < 500 and code != 429


@dataclass(slots=True)
class RequestRecord:
    """What one proxied request contributes to metrics and its span."""

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


Key = tuple[str, ...]

REQUEST_LABELS = ("namespace", "sits_deployment", "variant", "operation", "token_bucket",
                  "outcome", "code")  # fmt: skip
SERIES_LABELS = ("namespace", "sits_deployment", "variant", "operation", "token_bucket")
TOKEN_LABELS = ("namespace", "sits_deployment", "variant", "operation", "token_type")
REJECT_LABELS = ("namespace", "sits_deployment", "code", "reason")
VARIANT_LABELS = ("namespace", "sits_deployment", "variant")
GENAI_LABELS = ("namespace", "sits_deployment", "variant", "gen_ai.operation.name",
                "gen_ai.request.model", "error.type")  # fmt: skip


class _Attributes:
    """Attribute dicts memoised per label-value tuple: built once per series, not per request."""

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


class _Counter:
    """A monotonic sum in a plain dict, read by an ObservableCounter when Prometheus scrapes.

    A synchronous SDK counter costs several microseconds per ``add`` (attribute cleaning,
    hashing, a Measurement object); a dict increment costs a fraction of one, and the
    exported series are identical (cumulative sums, ``_total``).
    """

    __slots__ = ("attributes", "values")

    def __init__(self, names: tuple[str, ...]) -> None:
        self.attributes = _Attributes(names)
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


class Probes:
    """Records every request once; Prometheus reads ``registry`` on /metrics."""

    def __init__(
        self,
        *,
        tracer: trace.Tracer | None = None,
        genai_metrics: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        reader = PrometheusMetricReader(
            disable_target_info=True, scope_info_enabled=False, registry=self.registry
        )
        self._provider = MeterProvider(
            metric_readers=[reader],
            resource=Resource.create({"service.name": "sits-gateway"}),
            exemplar_filter=AlwaysOffExemplarFilter(),
        )
        self.tracer = tracer or trace.NoOpTracer()
        self._clock = clock
        self._windows: dict[str, VariantWindow] = {}
        self._table = RoutingTable(namespace="", deployment="")
        self._genai = genai_metrics
        self._series = _Attributes(SERIES_LABELS)
        self._genai_attrs = _Attributes(GENAI_LABELS)
        self._variant_attrs = _Attributes(VARIANT_LABELS)
        self._requests = _Counter(REQUEST_LABELS)
        self._tokens = _Counter(TOKEN_LABELS)
        self._rejected = _Counter(REJECT_LABELS)
        self._retries = _Counter(VARIANT_LABELS)
        self._create_instruments(self._provider.get_meter("sits.gateway"))

    def _create_instruments(self, meter: Meter) -> None:
        meter.create_observable_counter(
            "sits_requests_total", [self._requests.observe], unit="{request}",
            description="Proxied requests by variant and outcome (the success-rate SLI).",
        )  # fmt: skip
        meter.create_observable_counter(
            "sits_tokens_total", [self._tokens.observe], unit="{token}",
            description="Tokens reported by the responses' usage, input and output.",
        )  # fmt: skip
        meter.create_observable_counter(
            "sits_gateway_rejected_total", [self._rejected.observe], unit="{request}",
            description="Requests answered by the gateway before a variant was chosen.",
        )  # fmt: skip
        meter.create_observable_counter(
            "sits_gateway_upstream_retries_total", [self._retries.observe], unit="{request}",
            description="Requests resent once after a pooled connection closed under them.",
        )  # fmt: skip
        self._duration = meter.create_histogram(
            "sits_request_duration_seconds", unit="s",
            description="Latency seen by the gateway, receipt to last byte (the p95 SLI).",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )  # fmt: skip
        self._ttft = meter.create_histogram(
            "sits_time_to_first_token_seconds", unit="s",
            description="Streams: receipt to the first chunk from the upstream.",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )  # fmt: skip
        self._tpot = meter.create_histogram(
            "sits_time_per_output_token_seconds", unit="s",
            description="Streams: (duration - TTFT) / (output tokens - 1).",
            explicit_bucket_boundaries_advisory=PER_TOKEN_BUCKETS,
        )  # fmt: skip
        self._gauges(meter)
        if self._genai:
            self._genai_instruments(meter)

    def _gauges(self, meter: Meter) -> None:
        meter.create_observable_gauge(
            "sits_gateway_variant_weight_percent", [self._observe_weights], unit="%",
            description="Weight the gateway currently applies per variant.",
        )  # fmt: skip
        meter.create_observable_gauge(
            "sits_gateway_variant_endpoints", [self._observe_endpoints], unit="{endpoint}",
            description="Ready endpoints the gateway currently knows per variant.",
        )  # fmt: skip

    def _genai_instruments(self, meter: Meter) -> None:
        """The OpenTelemetry GenAI server metrics, so standard dashboards work too."""
        self._g_duration = meter.create_histogram(
            "gen_ai.server.request.duration", unit="s",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )  # fmt: skip
        self._g_ttft = meter.create_histogram(
            "gen_ai.server.time_to_first_token", unit="s",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )  # fmt: skip
        self._g_tpot = meter.create_histogram(
            "gen_ai.server.time_per_output_token", unit="s",
            explicit_bucket_boundaries_advisory=PER_TOKEN_BUCKETS,
        )  # fmt: skip

    # -- table ---------------------------------------------------------------------------

    def use_table(self, table: RoutingTable) -> None:
        """Label values and gauges follow the table in force."""
        self._table = table

    def _observe_weights(self, _: CallbackOptions) -> Iterable[Observation]:
        table = self._table
        for v in table.variants:
            key = (table.namespace, table.deployment, v.name)
            yield Observation(v.weight, self._variant_attrs(key))

    def _observe_endpoints(self, _: CallbackOptions) -> Iterable[Observation]:
        table = self._table
        for v in table.variants:
            key = (table.namespace, table.deployment, v.name)
            yield Observation(len(v.endpoints), self._variant_attrs(key))

    def window(self, variant: str) -> VariantWindow:
        found = self._windows.get(variant)
        if found is None:
            found = self._windows[variant] = VariantWindow(LATENCY_BUCKETS, clock=self._clock)
        return found

    # -- recording -----------------------------------------------------------------------

    def rejected(self, code: int, reason: str) -> None:
        self._rejected.add((self._table.namespace, self._table.deployment, str(code), reason))

    def retried(self, variant: str) -> None:
        self._retries.add((self._table.namespace, self._table.deployment, variant))

    def record(self, rec: RequestRecord, span: trace.Span | None = None) -> None:
        """Metrics, the sliding window and (if it records) the span, for one request."""
        success = is_success(rec.code)
        bucket = token_bucket(rec.prompt_tokens)
        ns, dep = self._table.namespace, self._table.deployment
        outcome = "success" if success else "error"
        series_key = (ns, dep, rec.variant, rec.operation, bucket)
        key = (*series_key, outcome, str(rec.code))
        if key not in self._requests.values:
            self._requests.seed(series_key, SEEDED_OUTCOMES)
        self._requests.add(key)
        if rec.code == CLIENT_CLOSED:
            return  # not the variant's fault, and not a whole latency sample: counted only
        series = self._series(series_key)
        self._duration.record(rec.duration_s, series)
        window = self.window(rec.variant)
        window.record(success, rec.duration_s)
        self._stream_metrics(rec, series)
        if rec.usage_known:
            self._count_tokens(rec, ns, dep)
        if self._genai:
            self._genai_metrics(rec, ns, dep)
        if span is not None and span.is_recording():
            annotate_span(span, rec, window)

    def _stream_metrics(self, rec: RequestRecord, series: Attributes) -> None:
        if rec.ttft_s is None:
            return
        self._ttft.record(rec.ttft_s, series)
        per_token = time_per_output_token(rec)
        if per_token is not None:
            self._tpot.record(per_token, series)

    def _count_tokens(self, rec: RequestRecord, ns: str, dep: str) -> None:
        self._tokens.add((ns, dep, rec.variant, rec.operation, "input"), rec.prompt_tokens)
        if rec.completion_tokens:
            key = (ns, dep, rec.variant, rec.operation, "output")
            self._tokens.add(key, rec.completion_tokens)

    def _genai_metrics(self, rec: RequestRecord, ns: str, dep: str) -> None:
        key = (ns, dep, rec.variant, rec.operation, rec.model, rec.error_type or "")
        attrs = self._genai_attrs(key)
        self._g_duration.record(rec.duration_s, attrs)
        if rec.ttft_s is not None:
            self._g_ttft.record(rec.ttft_s, attrs)
            per_token = time_per_output_token(rec)
            if per_token is not None:
                self._g_tpot.record(per_token, attrs)

    def shutdown(self) -> None:
        self._provider.shutdown()


def time_per_output_token(rec: RequestRecord) -> float | None:
    """(duration - TTFT) / (output tokens - 1): the GenAI convention's inter-token time."""
    if rec.ttft_s is None or not rec.completion_tokens or rec.completion_tokens < 2:
        return None
    return max(rec.duration_s - rec.ttft_s, 0.0) / (rec.completion_tokens - 1)


def annotate_span(span: trace.Span, rec: RequestRecord, window: VariantWindow) -> None:
    """``ab.*``, ``sits2026.*`` and ``gen_ai.*`` attributes of the request's span."""
    span.set_attribute("ab.variant", rec.variant)
    span.set_attribute("gen_ai.operation.name", rec.operation)
    span.set_attribute("gen_ai.request.model", rec.model)
    span.set_attribute("http.response.status_code", rec.code)
    if rec.endpoint:
        span.set_attribute("server.address", rec.endpoint)
    if rec.response_model:
        span.set_attribute("gen_ai.response.model", rec.response_model)
    if rec.usage_known:
        span.set_attribute("gen_ai.usage.input_tokens", rec.prompt_tokens)
    if rec.completion_tokens is not None:
        span.set_attribute("gen_ai.usage.output_tokens", rec.completion_tokens)
    if rec.ttft_s is not None:
        span.set_attribute("gen_ai.server.time_to_first_token", rec.ttft_s)
    rate, p95 = window.success_rate(), window.latency_p95_ms()
    if rate is not None:
        span.set_attribute("sits2026.success_rate_5m", rate)
    if p95 is not None:
        span.set_attribute("sits2026.latency_p95_ms", p95)
    if rec.error_type:
        span.set_attribute("error.type", rec.error_type)
        span.set_status(trace.StatusCode.ERROR, rec.error_type)
