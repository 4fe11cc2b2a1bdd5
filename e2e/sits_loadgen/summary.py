"""The end-of-run summary: per-variant counts, success rate, latency and TTFT percentiles.

Definitions, so the numbers can be compared with the gateway's SLIs knowingly:
- ``success_rate`` = successes / (successes + errors). Dropped requests (never sent) and
  cancelled ones (cut off by the drain timeout) are counted apart, not in the rate. The
  client's view is stricter than the gateway's ``outcome`` label: a 4xx is an error here.
- Latency and TTFT percentiles are over successful requests only (a fast-failing error
  would otherwise pull p50 down), by linear interpolation between closest ranks (numpy's
  default), in milliseconds.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from .records import CANCELLED, DROPPED, ERROR, SUCCESS, RequestRecord

NO_VARIANT = "-"  # no x-sits-variant header: not behind the gateway, or no answer at all


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q`` quantile (0..1) by linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclass(frozen=True)
class Stats:
    """Counts and percentiles over a set of sent requests."""

    requests: int
    success: int
    errors: int
    cancelled: int
    success_rate: float | None
    latency_p50_ms: float | None
    latency_p95_ms: float | None
    latency_p99_ms: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    cache_hits: int


def stats_of(records: Iterable[RequestRecord]) -> Stats:
    """Stats over ``records``, ignoring dropped ones (they were never sent)."""
    sent = [r for r in records if r.outcome != DROPPED]
    ok = [r for r in sent if r.outcome == SUCCESS]
    errors = sum(r.outcome == ERROR for r in sent)
    latencies = [r.latency_ms for r in ok if r.latency_ms is not None]
    ttfts = [r.ttft_ms for r in ok if r.ttft_ms is not None]
    answered = len(ok) + errors
    return Stats(
        requests=len(sent),
        success=len(ok),
        errors=errors,
        cancelled=sum(r.outcome == CANCELLED for r in sent),
        success_rate=len(ok) / answered if answered else None,
        latency_p50_ms=percentile(latencies, 0.50),
        latency_p95_ms=percentile(latencies, 0.95),
        latency_p99_ms=percentile(latencies, 0.99),
        ttft_p50_ms=percentile(ttfts, 0.50),
        ttft_p95_ms=percentile(ttfts, 0.95),
        cache_hits=sum(r.cache == "hit" for r in sent),
    )


@dataclass(frozen=True)
class Summary:
    """The whole run: overall and per-variant stats, plus what the table cannot show."""

    planned: int
    dropped: int
    elapsed_s: float
    sent_rate: float  # requests sent per second of the run
    overall: Stats
    per_variant: Mapping[str, Stats]
    errors_by_kind: Mapping[str, int]
    cache: Mapping[str, int]
    prompt_tokens: int
    completion_tokens: int


def error_kind(record: RequestRecord) -> str:
    """``"InternalServerError (500)"``, ``"APIConnectionError"``..."""
    name = record.error or "error"
    return f"{name} ({record.status})" if record.status is not None else name


def summarize(records: Sequence[RequestRecord], elapsed_s: float) -> Summary:
    """The summary of a run that took ``elapsed_s`` seconds."""
    sent = [r for r in records if r.outcome != DROPPED]
    by_variant: dict[str, list[RequestRecord]] = {}
    for record in sent:
        by_variant.setdefault(record.variant or NO_VARIANT, []).append(record)
    return Summary(
        planned=len(records),
        dropped=len(records) - len(sent),
        elapsed_s=elapsed_s,
        sent_rate=len(sent) / elapsed_s if elapsed_s > 0 else 0.0,
        overall=stats_of(sent),
        per_variant={name: stats_of(by_variant[name]) for name in sorted(by_variant)},
        errors_by_kind=dict(Counter(error_kind(r) for r in sent if r.outcome == ERROR)),
        cache=dict(Counter(r.cache for r in sent if r.cache)),
        prompt_tokens=sum(r.prompt_tokens or 0 for r in sent),
        completion_tokens=sum(r.completion_tokens or 0 for r in sent),
    )


def _num(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _rate(value: float | None) -> str:
    return "-" if value is None else f"{100.0 * value:.1f}%"


HEADER = (
    "variant",
    "sent",
    "ok",
    "err",
    "success",
    "p50 ms",
    "p95 ms",
    "ttft p50",
    "ttft p95",
    "hits",
)


def _row(name: str, s: Stats) -> tuple[str, ...]:
    return (
        name,
        str(s.requests),
        str(s.success),
        str(s.errors),
        _rate(s.success_rate),
        _num(s.latency_p50_ms),
        _num(s.latency_p95_ms),
        _num(s.ttft_p50_ms),
        _num(s.ttft_p95_ms),
        str(s.cache_hits),
    )


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]


def _counts(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{key}: {counts[key]}" for key in sorted(counts)) or "none"


def format_summary(summary: Summary) -> str:
    """A few lines for a terminal: totals, the per-variant table, errors, cache, tokens."""
    s = summary
    rows = [HEADER, *(_row(n, st) for n, st in s.per_variant.items()), _row("all", s.overall)]
    head = (
        f"sits-loadgen: {s.planned} planned, {s.overall.requests} sent, {s.dropped} "
        f"dropped, {s.overall.cancelled} cancelled in {s.elapsed_s:.1f} s "
        f"({s.sent_rate:.2f} req/s sent)"
    )
    return "\n".join(
        [
            head,
            *_table(rows),
            f"errors: {_counts(s.errors_by_kind)}",
            f"cache: {_counts(s.cache)}",
            f"tokens: prompt {s.prompt_tokens}, completion {s.completion_tokens}",
        ]
    )
