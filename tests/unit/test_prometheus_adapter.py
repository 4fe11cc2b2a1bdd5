"""The Prometheus adapter against canned HTTP answers (a stub server on 127.0.0.1).

The real Prometheus is exercised by the analysis scenarios; these are the edge cases it
cannot produce on demand: NaN values, missing variants, query errors, a dead port.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from sits_operator.adapters.prometheus import PrometheusProvider, Target, render_query
from sits_operator.model.policy import ActionType, Comparison, Rule, RuleAction

TARGET = Target("prod", "chat", ("v1", "v2"))


def rule(query: str = 'sli{namespace="{{namespace}}"}[{{window}}]') -> Rule:
    return Rule(
        name="r",
        sli="success_rate_5m",
        query=query,
        window_seconds=300,
        comparison=Comparison.LT,
        action=RuleAction(ActionType.ROLLBACK),
        threshold=0.95,
    )


def vector(**values: str) -> dict[str, Any]:
    result = [{"metric": {"variant": k}, "value": [0, v]} for k, v in values.items()]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


class Canned:
    """Maps a substring of the query to (HTTP status, JSON body); records queries."""

    def __init__(self) -> None:
        self.answers: list[tuple[str, int, dict[str, Any]]] = []
        self.queries: list[str] = []

    def answer(self, query: str) -> tuple[int, dict[str, Any]]:
        self.queries.append(query)
        for needle, status, body in self.answers:
            if needle in query:
                return status, body
        return 200, vector()


@pytest.fixture
def prometheus() -> Iterator[tuple[str, Canned]]:
    canned = Canned()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            query = parse_qs(urlparse(self.path).query).get("query", [""])[0]
            status, body = canned.answer(query)
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", canned
    server.shutdown()
    server.server_close()


async def test_values_and_request_counts_per_variant(prometheus: tuple[str, Canned]) -> None:
    url, canned = prometheus
    canned.answers = [
        ("increase(sits_requests_total", 200, vector(v1="600", v2="40")),
        ("sli{", 200, vector(v1="0.99", v2="NaN")),
    ]
    samples = await PrometheusProvider(url).samples(rule(), TARGET)
    assert samples.error is None
    assert samples.by_variant["v1"].value == pytest.approx(0.99)
    assert samples.by_variant["v1"].requests == 600
    v2 = samples.by_variant["v2"]
    assert v2.value is not None
    assert math.isnan(v2.value)
    assert not v2.is_number
    assert canned.queries[0] == 'sli{namespace="prod"}[5m]'  # one query for all variants


async def test_missing_variant_has_no_sample(prometheus: tuple[str, Canned]) -> None:
    url, canned = prometheus
    canned.answers = [("sli{", 200, vector(v1="0.99"))]
    samples = await PrometheusProvider(url).samples(rule(), TARGET)
    assert "v2" not in samples.by_variant
    assert samples.by_variant["v1"].requests == 0.0


@pytest.mark.parametrize(
    ("status", "body"),
    [
        pytest.param(
            400,
            {"status": "error", "errorType": "bad_data", "error": "parse error"},
            id="bad-query",
        ),
        pytest.param(503, {"status": "error", "error": "unavailable"}, id="unavailable"),
    ],
)
async def test_query_failures_are_errors(
    prometheus: tuple[str, Canned], status: int, body: dict[str, Any]
) -> None:
    url, canned = prometheus
    canned.answers = [("sli{", status, body)]
    samples = await PrometheusProvider(url).samples(rule(), TARGET)
    assert samples.error is not None
    assert samples.by_variant == {}


async def test_unreachable_prometheus_is_an_error() -> None:
    samples = await PrometheusProvider("http://127.0.0.1:9", timeout=1).samples(rule(), TARGET)
    assert samples.error is not None
    assert "Connection" in samples.error


async def test_variant_templates_run_one_query_per_variant(prometheus: tuple[str, Canned]) -> None:
    url, canned = prometheus
    canned.answers = [
        ('variant="v2"', 200, vector(v2="0.5")),
        ('variant="v1"', 200, vector(v1="1")),
    ]
    samples = await PrometheusProvider(url).samples(rule('sli{variant="{{variant}}"}'), TARGET)
    assert {k: s.value for k, s in samples.by_variant.items()} == {"v1": 1.0, "v2": 0.5}


def test_render_query_escapes_quotes() -> None:
    target = Target('we"ird', "chat", ("v1",))
    assert render_query('x{ns="{{namespace}}"}[{{window}}]', target, 90) == 'x{ns="we\\"ird"}[90s]'
