"""Gateway settings: one frozen value, from flags with ``SITS_GATEWAY_*`` environment
fallbacks (the Helm chart sets environment variables, a person types flags)."""

from __future__ import annotations

import argparse
import os
from collections.abc import Sequence
from dataclasses import dataclass

from .table import DEFAULT_SESSION_HEADER

ENV_PREFIX = "SITS_GATEWAY_"


@dataclass(frozen=True, slots=True)
class GatewayConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    # Where routing comes from: "static" (routes_file) or "kubernetes" (namespace + deployment).
    source: str = "static"
    routes_file: str | None = None
    namespace: str | None = None
    deployment: str | None = None
    kubeconfig: str | None = None
    max_body_bytes: int = 8 << 20
    connect_timeout_s: float = 5.0
    # Longest silence from an upstream (before its headers, or between stream chunks).
    upstream_timeout_s: float = 300.0
    # Idle pooled upstream connections close after this; below the upstream's keep-alive.
    upstream_keepalive_s: float = 4.0
    pool_limit: int = 1024
    session_header: str = DEFAULT_SESSION_HEADER
    use_openai_user: bool = True
    # Ask upstream for usage on streams that did not (and hide that event again).
    stream_usage: bool = True
    # Also record the OpenTelemetry GenAI server histograms (gen_ai_server_*): off by
    # default, as each is one more SDK measurement per request (~5 % of a core at full load).
    genai_metrics: bool = False
    # OTLP/HTTP traces endpoint (e.g. http://collector:4318/v1/traces); None: no export.
    otlp_endpoint: str | None = None
    # After SIGTERM, keep listening this long, answering with "Connection: close", so that
    # clients' pooled connections end after a response and never under a request in flight.
    drain_s: float = 5.0
    log_level: str = "INFO"


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(ENV_PREFIX + name.upper(), default)


def _flag(value: str) -> bool:
    if value.lower() in ("1", "true", "yes", "on"):
        return True
    if value.lower() in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"not a boolean: {value!r}")


def build_parser() -> argparse.ArgumentParser:
    d = GatewayConfig()
    p = argparse.ArgumentParser(
        prog="sits-gateway",
        description="OpenAI-compatible A/B gateway: splits traffic between the variants of "
        "a SitsDeployment and exports per-variant SLIs for Prometheus.",
        epilog=f"Every option also reads {ENV_PREFIX}<OPTION> (e.g. {ENV_PREFIX}PORT).",
    )
    add = p.add_argument
    add("--host", default=_env("host", d.host), help="listen address (default %(default)s)")
    add("--port", type=int, default=int(_env("port", str(d.port)) or d.port))
    add("--source", choices=("static", "kubernetes"), default=_env("source", d.source))
    add("--routes-file", default=_env("routes_file"), help="static source: YAML/JSON file")
    add("--namespace", default=_env("namespace"), help="kubernetes source: namespace")
    add("--deployment", default=_env("deployment"), help="kubernetes source: SitsDeployment")
    add("--kubeconfig", default=_env("kubeconfig"), help="default: in-cluster, else ~/.kube")
    add("--max-body-bytes", type=int, default=int(_env("max_body_bytes") or d.max_body_bytes))
    add(
        "--connect-timeout",
        type=float,
        dest="connect_timeout_s",
        default=float(_env("connect_timeout") or d.connect_timeout_s),
    )
    add(
        "--upstream-timeout",
        type=float,
        dest="upstream_timeout_s",
        default=float(_env("upstream_timeout") or d.upstream_timeout_s),
    )
    add(
        "--upstream-keepalive",
        type=float,
        dest="upstream_keepalive_s",
        default=float(_env("upstream_keepalive") or d.upstream_keepalive_s),
        help="seconds an idle upstream connection is kept (below the upstream's own)",
    )
    add("--pool-limit", type=int, default=int(_env("pool_limit") or d.pool_limit))
    add("--session-header", default=_env("session_header", d.session_header))
    add("--use-openai-user", type=_flag, default=_flag(_env("use_openai_user") or "true"))
    add("--stream-usage", type=_flag, default=_flag(_env("stream_usage") or "true"))
    add(
        "--genai-metrics",
        type=_flag,
        default=_flag(_env("genai_metrics") or "false"),
        help="also export the OpenTelemetry GenAI server histograms",
    )
    add(
        "--drain",
        type=float,
        dest="drain_s",
        default=float(_env("drain") or d.drain_s),
        help="seconds to keep serving after SIGTERM, closing each connection after its "
        "response (default %(default)s)",
    )
    add("--otlp-endpoint", default=_env("otlp_endpoint"), help="OTLP/HTTP traces URL")
    add("--log-level", default=_env("log_level", d.log_level))
    return p


def parse_config(argv: Sequence[str] | None = None) -> GatewayConfig:
    parser = build_parser()
    args = vars(parser.parse_args(argv))
    config = GatewayConfig(**args)
    if config.source == "static" and not config.routes_file:
        parser.error("--source static needs --routes-file")
    if config.source == "kubernetes" and not (config.namespace and config.deployment):
        parser.error("--source kubernetes needs --namespace and --deployment")
    return config
