"""The pure parts of the gateway benchmark: what it tells nginx and the gateway, and the
arithmetic behind the numbers it publishes (no process started, nothing timed)."""

from __future__ import annotations

import math
import re
from collections import Counter
from pathlib import Path

import pytest
from benchmarks.gateway_proxy import (
    HOST,
    added_ms,
    parse_wrk,
    render_nginx_config,
    routes_document,
    shares,
    variant_of,
    wrk_script,
)
from benchmarks.loadtools import LoadResult, StallProbe, percentile, post_request


def test_nginx_config_carries_the_weights_and_only_loopback(tmp_path: Path) -> None:
    conf = render_nginx_config(tmp_path, 18080, [(19001, 90), (19002, 10)])
    assert "server 127.0.0.1:19001 weight=90" in conf
    assert "server 127.0.0.1:19002 weight=10" in conf
    assert "listen 127.0.0.1:18080" in conf
    addresses = set(re.findall(r"\b\d{1,3}(?:\.\d{1,3}){3}\b", conf))
    assert addresses == {HOST}
    assert "worker_processes 1;" in conf
    assert "access_log off;" in conf
    assert "keepalive 128;" in conf  # pooled upstream connections, as the gateway has
    assert 'proxy_set_header Connection "";' in conf  # needed for upstream keep-alive
    # Every path nginx writes is in the temporary directory: nothing under /var or /run.
    for path in re.findall(r"(?:pid|error_log|_temp_path) (\S+?);?\s", conf):
        assert path.startswith(str(tmp_path)), path
    assert conf.count("{") == conf.count("}")


def test_routes_document_gives_the_gateway_the_same_split() -> None:
    doc = routes_document([("v1", 19001, 90), ("v2", 19002, 10)])
    assert doc["variants"] == [
        {"name": "v1", "weight": 90, "endpoints": ["127.0.0.1:19001"]},
        {"name": "v2", "weight": 10, "endpoints": ["127.0.0.1:19002"]},
    ]


@pytest.mark.parametrize(
    ("values", "p", "expected"),
    [
        ([1.0], 50, 1.0),
        ([1.0], 99, 1.0),
        ([1.0, 2.0], 50, 1.0),  # nearest rank: ceil(0.5 * 2) = 1st
        ([1.0, 2.0, 3.0, 4.0], 50, 2.0),
        ([1.0, 2.0, 3.0, 4.0], 75, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 100, 4.0),
        ([float(i) for i in range(1, 101)], 99, 99.0),
        ([float(i) for i in range(1, 101)], 50, 50.0),
        ([float(i) for i in range(1, 1001)], 99, 990.0),
        ([float(i) for i in range(1, 10_001)], 99.9, 9990.0),
    ],
)
def test_percentile_is_the_nearest_rank(values: list[float], p: float, expected: float) -> None:
    assert percentile(values, p) == expected


def test_percentile_of_nothing_is_nan_and_p_must_be_a_percentage() -> None:
    assert math.isnan(percentile([], 50))
    for bad in (0, -1, 101):
        with pytest.raises(ValueError, match="percentile"):
            percentile([1.0], bad)


@pytest.mark.parametrize(
    ("proxy", "direct", "expected"),
    [
        (1.5, 0.5, 1.0),
        (0.5, 0.5, 0.0),
        (0.4, 0.5, 0.0),  # a proxy cannot speed up the same upstream: noise, floored
        (3.25, 0.25, 3.0),
    ],
)
def test_added_latency_is_the_difference_of_percentiles(
    proxy: float, direct: float, expected: float
) -> None:
    assert added_ms(proxy, direct) == pytest.approx(expected)


def test_pooled_rounds_give_percentiles_over_all_samples() -> None:
    pooled = LoadResult([3.0, 4.0], errors=1, labels=Counter(v1=2))
    pooled.merge(LoadResult([1.0, 2.0], late=2, labels=Counter(v1=1, v2=1), send_lag_p99_ms=0.7))
    assert pooled.latencies_ms == [1.0, 2.0, 3.0, 4.0]
    assert (pooled.errors, pooled.late, pooled.send_lag_p99_ms) == (1, 2, 0.7)
    assert percentile(pooled.latencies_ms, 50) == 2.0
    assert pooled.labels == Counter(v1=3, v2=1)


def test_split_shares_and_the_stub_that_answered() -> None:
    assert shares(Counter(v1=900, v2=100)) == {"v1": 90.0, "v2": 10.0}
    assert shares({}) == {}
    assert variant_of(b'{"id":"x","served_by":"v2"}') == "v2"
    assert variant_of(b'{"id":"x"}') == "?"


def test_requests_are_well_formed() -> None:
    raw = post_request("127.0.0.1", 8080, "/v1/chat/completions", b'{"model":"m"}')
    head, _, body = raw.partition(b"\r\n\r\n")
    assert head.startswith(b"POST /v1/chat/completions HTTP/1.1\r\n")
    assert b"Content-Length: 13" in head
    assert body == b'{"model":"m"}'
    script = wrk_script(b'{"model":"stub"}')
    assert "wrk.method = 'POST'" in script
    assert '{"model":"stub"}' in script


WRK_OUTPUT = """Running 5s test @ http://127.0.0.1:19100/v1/chat/completions
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    21.56ms   19.87ms 204.55ms   93.26%
    Req/Sec     1.71k   659.99     3.18k    74.00%
  8554 requests in 5.02s, 3.91MB read
  Socket errors: connect 0, read 2, write 0, timeout 1
  Non-2xx or 3xx responses: 4
Requests/sec:   1703.63
Transfer/sec:    797.68KB
"""


def test_wrk_output_is_parsed_with_its_failures() -> None:
    result = parse_wrk(WRK_OUTPUT)
    assert (result.rps, result.requests, result.bad) == (1703.63, 8554, 7)
    clean = parse_wrk("  10 requests in 1.00s, 1KB read\nRequests/sec:     10.00\n")
    assert clean.bad == 0
    with pytest.raises(RuntimeError, match="unexpected wrk output"):
        parse_wrk("wrk: connection refused")


def test_stall_probe_reports_the_stalls_within_a_round(tmp_path: Path) -> None:
    probe = StallProbe([0, 1], tmp_path)  # not started: only its log files are read
    (tmp_path / "stall-probe-0.log").write_text("100.000000 3.500\n105.000000 26.100\n")
    (tmp_path / "stall-probe-1.log").write_text("101.500000 12.000\ngarbage\n")
    assert sorted(probe.stalls(100.0, 102.0)) == [3.5, 12.0]
    assert probe.stalls(105.0, 110.0) == [26.1]
    assert probe.stalls(200.0, 210.0) == []
