"""The gateway's probes: the request-metric contract, its own series, spans, sliding windows.

The contract every proxied request feeds (``sits_requests_total``,
``sits_request_duration_seconds``, ``sits_time_to_first_token_seconds``...) is the shared
layer's ``RequestMetrics`` (``sits_inference.openai.metrics``: names, labels, units, cost);
it is what the operator's analysis queries. Beside it the gateway exports what only it has:
requests refused before a variant was chosen, retried sends, the weights and endpoints it
applies, and (``--genai-metrics``) the OpenTelemetry GenAI server histograms. Model names
appear only on those ``gen_ai_*`` metrics, and only names the routing table lists reach
them (unknown models are refused before routing). ``tests/integration/test_gateway_*``
assert the exported names and labels exactly.

Spans get the ``ab.*``, ``sits2026.*`` and ``gen_ai.*`` attributes; span attributes are
only computed for spans that record.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from opentelemetry import trace
from opentelemetry.metrics import CallbackOptions, Meter, Observation

from ..openai.metrics import (
    LATENCY_BUCKETS,
    PER_TOKEN_BUCKETS,
    Attributes,
    ObservedCounter,
    RequestMetrics,
    RequestRecord,
    Source,
    is_success,
    prometheus_meter_provider,
    time_per_output_token,
)
from .table import RoutingTable
from .window import VariantWindow

REJECT_LABELS = ("namespace", "sits_deployment", "code", "reason")
VARIANT_LABELS = ("namespace", "sits_deployment", "variant")
GENAI_LABELS = (
    "namespace",
    "sits_deployment",
    "variant",
    "gen_ai.operation.name",
    "gen_ai.request.model",
    "error.type",
)


class Probes:
    """Records every request once; Prometheus reads ``registry`` on /metrics."""

    def __init__(
        self,
        *,
        tracer: trace.Tracer | None = None,
        genai_metrics: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._provider, self.registry = prometheus_meter_provider("sits-gateway")
        self.tracer = tracer or trace.NoOpTracer()
        self._clock = clock
        self._windows: dict[str, VariantWindow] = {}
        self._table = RoutingTable(namespace="", deployment="")
        self._genai = genai_metrics
        self._genai_attrs = Attributes(GENAI_LABELS)
        self._variant_attrs = Attributes(VARIANT_LABELS)
        self._rejected = ObservedCounter(REJECT_LABELS)
        self._retries = ObservedCounter(VARIANT_LABELS)
        meter = self._provider.get_meter("sits.gateway")
        # source="gateway": the sidecars behind it export the same requests as "sidecar".
        self._requests = RequestMetrics(meter, source=Source.GATEWAY)
        self._create_instruments(meter)

    def _create_instruments(self, meter: Meter) -> None:
        meter.create_observable_counter(
            "sits_gateway_rejected_total",
            [self._rejected.observe],
            unit="{request}",
            description="Requests answered by the gateway before a variant was chosen.",
        )
        meter.create_observable_counter(
            "sits_gateway_upstream_retries_total",
            [self._retries.observe],
            unit="{request}",
            description="Requests resent once after a pooled connection closed under them.",
        )
        meter.create_observable_gauge(
            "sits_gateway_variant_weight_percent",
            [self._observe_weights],
            unit="%",
            description="Weight the gateway currently applies per variant.",
        )
        meter.create_observable_gauge(
            "sits_gateway_variant_endpoints",
            [self._observe_endpoints],
            unit="{endpoint}",
            description="Ready endpoints the gateway currently knows per variant.",
        )
        if self._genai:
            self._genai_instruments(meter)

    def _genai_instruments(self, meter: Meter) -> None:
        """The OpenTelemetry GenAI server metrics, so standard dashboards work too."""
        self._g_duration = meter.create_histogram(
            "gen_ai.server.request.duration",
            unit="s",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self._g_ttft = meter.create_histogram(
            "gen_ai.server.time_to_first_token",
            unit="s",
            explicit_bucket_boundaries_advisory=LATENCY_BUCKETS,
        )
        self._g_tpot = meter.create_histogram(
            "gen_ai.server.time_per_output_token",
            unit="s",
            explicit_bucket_boundaries_advisory=PER_TOKEN_BUCKETS,
        )

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
        ns, dep = self._table.namespace, self._table.deployment
        if not self._requests.record(rec, ns, dep):
            return  # the client left: counted only, not a latency sample
        window = self.window(rec.variant)
        window.record(is_success(rec.code), rec.duration_s)
        if self._genai:
            self._genai_metrics(rec, ns, dep)
        if span is not None and span.is_recording():
            annotate_span(span, rec, window)

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
