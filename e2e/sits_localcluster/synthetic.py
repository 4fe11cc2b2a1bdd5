"""A synthetic SLI source: publishes the gateway's metric contract at chosen rates.

Until the A/B gateway exists (and afterwards, for tests that need a breach on demand),
this exporter stands in for real traffic: per (namespace, deployment, variant) it
advances `sits_requests_total` and `sits_request_duration_seconds` as if `rps` requests
per second arrived with `error_ratio` failures and `latency_ms` latency. Counters grow
with wall time between scrapes, so Prometheus' rate() and histogram_quantile() give
exactly the configured values. Serves only on loopback.

Each series is published once per ``source`` (gateway and sidecar by default), as a
builtin-routed deployment's real proxies both export the same requests: the analysis
selects one source (``spec.analysis.source``), so any router's default finds its series,
and a query that forgot the source would count every request twice.
"""

from __future__ import annotations

import argparse
import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3, 0.4, 0.5, 0.75, 1.0, 1.5, 2.0)
Key = tuple[str, str, str]  # namespace, deployment, variant
SOURCES = ("gateway", "sidecar")  # the contract's source label (openai.metrics.Source)


@dataclass
class Profile:
    rps: float = 0.0
    error_ratio: float = 0.0
    latency_ms: float = 50.0


@dataclass
class Series:
    profile: Profile
    success: float = 0.0
    errors: float = 0.0
    bucket_counts: list[float] = field(default_factory=lambda: [0.0] * (len(BUCKETS) + 1))
    duration_sum: float = 0.0
    updated: float = field(default_factory=time.monotonic)

    def advance(self, now: float) -> None:
        elapsed, self.updated = now - self.updated, now
        total = self.profile.rps * elapsed
        self.errors += total * self.profile.error_ratio
        self.success += total * (1 - self.profile.error_ratio)
        seconds = self.profile.latency_ms / 1000
        index = next((i for i, le in enumerate(BUCKETS) if seconds <= le), len(BUCKETS))
        self.bucket_counts[index] += total
        self.duration_sum += total * seconds


class SyntheticTraffic:
    """Thread-safe registry of series; `render()` is the /metrics body."""

    def __init__(self, sources: tuple[str, ...] = SOURCES) -> None:
        self._lock = threading.Lock()
        self._series: dict[Key, Series] = {}
        self._sources = sources

    def set(self, namespace: str, deployment: str, variant: str, profile: Profile) -> None:
        with self._lock:
            key = (namespace, deployment, variant)
            series = self._series.get(key)
            if series is None:
                self._series[key] = Series(profile)
            else:
                series.advance(time.monotonic())  # bank what the old profile produced
                series.profile = profile

    def render(self) -> str:
        with self._lock:
            now = time.monotonic()
            lines = [
                "# TYPE sits_requests_total counter",
                "# TYPE sits_request_duration_seconds histogram",
            ]
            for (ns, dep, var), series in sorted(self._series.items()):
                series.advance(now)
                for source in self._sources:
                    labels = f'namespace="{ns}",sits_deployment="{dep}",variant="{var}"'
                    lines += _series_lines(f'{labels},source="{source}"', series)
            return "\n".join(lines) + "\n"


def _series_lines(labels: str, series: Series) -> list[str]:
    lines = [
        f'sits_requests_total{{{labels},outcome="success",code="200"}} {series.success}',
        f'sits_requests_total{{{labels},outcome="error",code="500"}} {series.errors}',
    ]
    cumulative = 0.0
    for le, count in zip((*BUCKETS, float("inf")), series.bucket_counts, strict=True):
        cumulative += count
        bound = "+Inf" if le == float("inf") else repr(le)
        lines.append(f'sits_request_duration_seconds_bucket{{{labels},le="{bound}"}} {cumulative}')
    lines.append(f"sits_request_duration_seconds_count{{{labels}}} {cumulative}")
    lines.append(f"sits_request_duration_seconds_sum{{{labels}}} {series.duration_sum}")
    return lines


class _Handler(BaseHTTPRequestHandler):
    traffic: SyntheticTraffic

    def do_GET(self) -> None:
        if self.path != "/metrics":
            self.send_error(404)
            return
        body = self.traffic.render().encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        """POST /profile {namespace, deployment, variant, rps, error_ratio, latency_ms}."""
        try:
            raw = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))))
            self.traffic.set(
                raw["namespace"],
                raw["deployment"],
                raw["variant"],
                Profile(
                    float(raw.get("rps", 0)),
                    float(raw.get("error_ratio", 0)),
                    float(raw.get("latency_ms", 50)),
                ),
            )
        except (ValueError, KeyError, TypeError) as exc:
            self.send_error(400, str(exc))
            return
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        """Quiet: Prometheus scrapes every second."""


class SyntheticServer:
    """The exporter on 127.0.0.1 in a background thread."""

    def __init__(self, traffic: SyntheticTraffic | None = None, port: int = 0) -> None:
        self.traffic = traffic or SyntheticTraffic()
        handler = type("Handler", (_Handler,), {"traffic": self.traffic})
        self._server = ThreadingHTTPServer(("127.0.0.1", port), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def address(self) -> str:
        host, port = self._server.server_address[:2]
        return f"{host!s}:{port}"

    def start(self) -> SyntheticServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=19100)
    args = parser.parse_args()
    server = SyntheticServer(port=args.port).start()
    print(f"synthetic SLI exporter on http://{server.address}/metrics", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
