"""`sits-operator`: run the operator (Kopf) with the SITS handlers loaded."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import Any

import kopf
from kopf._core.actions.loggers import ObjectJsonFormatter  # Kopf exports only LogFormat
from prometheus_client import start_http_server


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="sits-operator", description=__doc__)
    parser.add_argument(
        "--namespace",
        "-n",
        action="append",
        default=[],
        help="watch only these namespaces (default: cluster-wide)",
    )
    parser.add_argument(
        "--metrics-address",
        default="127.0.0.1:9464",
        help="host:port of the operator's own /metrics (empty: off)",
    )
    parser.add_argument(
        "--liveness", default="", help="Kopf liveness URL, e.g. http://0.0.0.0:8081/healthz"
    )
    parser.add_argument(
        "--alert-webhook-address",
        default="127.0.0.1:9465",
        help="host:port of the Alertmanager webhook receiver (empty: off)",
    )
    parser.add_argument(
        "--leader-elect",
        action="store_true",
        help="act only while holding the Lease (several replicas, one acting; "
        "also SITS_LEADER_ELECTION=true)",
    )
    parser.add_argument("--verbose", "-v", action="store_true")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    configure_logging(verbose=args.verbose)
    if args.metrics_address:
        host, _, port = args.metrics_address.rpartition(":")
        start_http_server(int(port), addr=host or "127.0.0.1")
    os.environ["SITS_ALERT_WEBHOOK_ADDRESS"] = args.alert_webhook_address
    if args.leader_elect:
        os.environ["SITS_LEADER_ELECTION"] = "true"
    from sits_operator.handlers import operator as _handlers  # noqa: F401  (registers handlers)

    asyncio.run(kopf.operator(**kopf_options(args)))
    return 0


def configure_logging(*, verbose: bool) -> None:
    """One JSON object per line on stderr, as log pipelines (Loki, Elasticsearch, Cloud
    Logging) parse them: message, severity, timestamp, logger, every ``extra`` a handler
    passes (kind, child, hash...) and, on Kopf's per-object lines, the object's reference
    under "object". Kopf's own formatter (python-json-logger) escapes what a message holds;
    it lacks only the logger's name, which the format string adds."""
    kopf.configure(verbose=verbose, log_format=kopf.LogFormat.JSON)
    formatter = ObjectJsonFormatter("%(message)s %(name)s", rename_fields={"name": "logger"})
    for handler in logging.getLogger().handlers:
        handler.setFormatter(formatter)
    # Kopf reports every event handler's success at INFO: shown only when verbose.
    logging.getLogger("kopf.objects").setLevel(logging.NOTSET if verbose else logging.WARNING)


def kopf_options(args: argparse.Namespace) -> dict[str, Any]:
    """kopf.operator's arguments. With --namespace (the chart's namespaced install) Kopf
    serves exactly those namespaces and the CRDs it finds at start: no cluster-wide list
    and watch of namespaces and CRDs (settings.scanning.disabled), which a namespaced
    install's Roles do not allow. The watched namespaces also bound the alert webhook."""
    namespaces = list(dict.fromkeys(args.namespace))
    settings = kopf.OperatorSettings()
    settings.scanning.disabled = bool(namespaces)
    return {
        "standalone": True,
        "clusterwide": not namespaces,
        "namespaces": namespaces,
        "settings": settings,
        "memo": kopf.Memo(watch_namespaces=tuple(namespaces)),
        "liveness_endpoint": args.liveness or None,
    }


if __name__ == "__main__":
    raise SystemExit(main())
