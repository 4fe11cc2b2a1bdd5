"""``sits-loadgen``: session-flow chat load against a gateway, sidecar or vLLM on loopback.

Progress lines go to stderr, the summary to stdout, records to ``--out`` (JSON lines).
Exit codes: 0 done; 1 the success rate was below ``--fail-under``; 2 bad arguments or a
refused target address.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from .config import DEFAULT_TEMPERATURES, LoadConfig, format_temperatures, parse_temperatures
from .runner import LoadResult, Progress, run_load_sync
from .safety import UnsafeTargetError
from .summary import format_summary

EPILOG = """\
example (gateway on 127.0.0.1:8080, 8 req/s for at most 60 s or 400 requests):
  sits-loadgen --base-url http://127.0.0.1:8080/v1 --model chat \\
      --rate 8 --max-requests 400 --duration 60 --seed 7 --out records.jsonl

Targets are limited to 127.0.0.0/8, ::1, localhost and 10.244.0.0/16 (the local
cluster's pods). --context-mode system puts the growing session context (28+ fields at
the end) into the prompt: not with the tiny test model (max-model-len 256), whose later
turns would then fail with 400.
"""


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"expected NAME:VALUE, got {text!r}")
    return name.strip(), value.strip()


def _json_object(text: str) -> dict[str, object]:
    value = json.loads(text)
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError("expected a JSON object")
    return value


def _add_target(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("target")
    group.add_argument(
        "--base-url", required=True, help="OpenAI API root, e.g. http://127.0.0.1:8080/v1"
    )
    group.add_argument("--model", required=True, help="model name sent in each request")
    group.add_argument("--api-key", default="unused")
    group.add_argument(
        "--header",
        type=_header,
        action="append",
        default=[],
        metavar="NAME:VALUE",
        help="extra request header (repeatable), e.g. x-sits-cache:bypass",
    )
    group.add_argument(
        "--extra-body",
        type=_json_object,
        default={},
        metavar="JSON",
        help="extra body fields, e.g. '{\"ignore_eos\": true}'",
    )


def _add_bounds(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("rate and bounds (all required: a run is never unbounded)")
    group.add_argument("--rate", type=float, required=True, help="Poisson arrivals, requests/s")
    group.add_argument("--max-requests", type=int, required=True)
    group.add_argument("--duration", type=float, required=True, help="seconds of arrivals")
    group.add_argument(
        "--concurrency",
        type=int,
        default=64,
        help="most requests in flight; arrivals beyond are dropped (64)",
    )
    group.add_argument("--timeout", type=float, default=60.0, help="per request, seconds (60)")
    group.add_argument(
        "--drain-timeout",
        type=float,
        default=30.0,
        help="after the last arrival, wait this long for answers (30)",
    )


def _add_mix(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("traffic mix")
    group.add_argument("--seed", type=int, default=0)
    group.add_argument("--sessions", type=int, default=16, help="concurrently open sessions (16)")
    group.add_argument("--max-turns", type=int, default=12, help="longest session (12)")
    group.add_argument("--stream-share", type=float, default=0.5, help="share streamed (0.5)")
    group.add_argument(
        "--repeat-share",
        type=float,
        default=0.4,
        help="share of questions from paraphrase families (0.4)",
    )
    group.add_argument(
        "--temperature",
        type=parse_temperatures,
        default=DEFAULT_TEMPERATURES,
        metavar="MIX",
        help=f"value:weight list, none = not sent ({format_temperatures(DEFAULT_TEMPERATURES)})",
    )
    group.add_argument("--max-tokens", type=int, default=32)
    group.add_argument(
        "--context-mode",
        choices=("header", "system"),
        default="header",
        help="session context in x-sits-context (default), or in the system "
        "message (prompt inflation; needs a ~1k-token context window)",
    )


def _add_output(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("output")
    group.add_argument("--out", type=Path, help="write one JSON line per request here")
    group.add_argument(
        "--progress-every",
        type=float,
        default=5.0,
        help="seconds between progress lines on stderr (0: none)",
    )
    group.add_argument(
        "--fail-under",
        type=float,
        metavar="RATE",
        help="exit 1 when the success rate is below RATE (0..1)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sits-loadgen",
        description="Open-loop, session-flow chat load (shop assistant journeys) through "
        "the official openai client; records per request, summary per variant.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for add in (_add_target, _add_bounds, _add_mix, _add_output):
        add(parser)
    return parser


def config_from(args: argparse.Namespace) -> LoadConfig:
    """The ``LoadConfig`` the parsed arguments describe (raises ValueError when invalid)."""
    return LoadConfig(
        base_url=args.base_url,
        model=args.model,
        api_key=args.api_key,
        extra_headers=dict(args.header),
        extra_body=args.extra_body,
        rate=args.rate,
        max_requests=args.max_requests,
        duration_s=args.duration,
        concurrency=args.concurrency,
        request_timeout_s=args.timeout,
        drain_timeout_s=args.drain_timeout,
        seed=args.seed,
        sessions=args.sessions,
        max_turns=args.max_turns,
        stream_share=args.stream_share,
        repeat_share=args.repeat_share,
        temperatures=args.temperature,
        max_tokens=args.max_tokens,
        context_mode=args.context_mode,
        out=args.out,
        progress_interval_s=args.progress_every,
    )


def _print_progress(progress: Progress) -> None:
    print(progress.line(), file=sys.stderr, flush=True)


def _exit_code(result: LoadResult, fail_under: float | None) -> int:
    rate = result.summary.overall.success_rate
    if fail_under is not None and (rate is None or rate < fail_under):
        print(f"success rate {rate} is below --fail-under {fail_under}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        config = config_from(args)
    except UnsafeTargetError as err:
        parser.exit(2, f"sits-loadgen: refused: {err}\n")
    except ValueError as err:
        parser.error(str(err))
    result = run_load_sync(config, on_progress=_print_progress)
    print(format_summary(result.summary), flush=True)
    return _exit_code(result, args.fail_under)


if __name__ == "__main__":
    sys.exit(main())
