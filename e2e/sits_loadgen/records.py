"""Per-request records: what was sent, when, who answered, how it went. JSON lines on disk.

Why one flat record per request: the e2e scenarios and benchmarks compare the client's
view with the gateway's per-variant SLIs (outcome and latency by ``variant``), and count
L1 hits by paraphrase family; flat JSON lines load straight into pandas, jq or a test.
Records are written as each request completes, so a run stopped half-way still leaves
everything it measured.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import IO

from .plan import PlannedRequest

SUCCESS = "success"  # 2xx, and for a stream, a finished one
ERROR = "error"  # an HTTP error status, a transport failure or a broken stream
DROPPED = "dropped"  # never sent: the concurrency cap was reached (open loop)
CANCELLED = "cancelled"  # sent, but still unanswered when the drain time ran out


@dataclass(frozen=True)
class SendResult:
    """What the client saw of one request (the sender's result); its record's ``outcome``
    is SUCCESS when ``ok``, else ERROR."""

    ok: bool
    latency_s: float
    status: int | None = None
    error: str | None = None  # exception class, e.g. "InternalServerError", "APITimeoutError"
    ttft_s: float | None = None  # streams: to the first chunk with content
    variant: str | None = None  # the gateway's x-sits-variant
    cache: str | None = None  # the sidecar's x-sits-cache (hit, miss, skip, bypass)
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


@dataclass(frozen=True)
class RequestRecord:
    """One line of ``--out``. Times: ``start`` is epoch seconds (ms resolution), durations
    are milliseconds; ``scheduled_s`` is the planned offset from the run's start."""

    index: int
    session: str
    turn: int
    state: str
    fingerprint: str
    context_fields: int
    family: str | None
    stream: bool
    temperature: float | None
    scheduled_s: float
    start: float
    outcome: str
    status: int | None = None
    error: str | None = None
    variant: str | None = None
    cache: str | None = None
    latency_ms: float | None = None
    ttft_ms: float | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000.0, 3)


def _base(planned: PlannedRequest, start: float, outcome: str) -> RequestRecord:
    turn = planned.turn
    return RequestRecord(
        index=planned.index,
        session=turn.session_id,
        turn=turn.turn,
        state=turn.state,
        fingerprint=turn.fingerprint,
        context_fields=len(turn.context),
        family=turn.utterance.family,
        stream=planned.stream,
        temperature=planned.temperature,
        scheduled_s=round(planned.at_s, 6),
        start=round(start, 3),
        outcome=outcome,
    )


def completed_record(planned: PlannedRequest, start: float, result: SendResult) -> RequestRecord:
    """The record of a request that got an answer (or a definite failure)."""
    return dataclasses.replace(
        _base(planned, start, SUCCESS if result.ok else ERROR),
        status=result.status,
        error=result.error,
        variant=result.variant,
        cache=result.cache,
        latency_ms=_ms(result.latency_s),
        ttft_ms=_ms(result.ttft_s),
        prompt_tokens=result.prompt_tokens,
        completion_tokens=result.completion_tokens,
    )


def unsent_record(
    planned: PlannedRequest, start: float, kind: str, latency_s: float | None = None
) -> RequestRecord:
    """The record of a request that was dropped, or cancelled before its answer."""
    return dataclasses.replace(_base(planned, start, kind), latency_ms=_ms(latency_s))


def to_json(record: RequestRecord) -> str:
    """One JSON line (no trailing newline)."""
    return json.dumps(dataclasses.asdict(record), separators=(",", ":"))


class JsonlWriter:
    """Appends records to a file as they complete, one flushed line each."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[str] = path.open("w", encoding="utf-8")

    def write(self, record: RequestRecord) -> None:
        self._file.write(to_json(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> JsonlWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
