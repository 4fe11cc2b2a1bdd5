"""The live view in the terminal: one line per variant per sample, the operator's events as
they happen.

Plain lines, not a full-screen UI: the demo's output stays readable when it is piped into
a file or a CI log, and an event is printed once, at the moment it is seen.
"""

from __future__ import annotations

from collections.abc import Callable

from .timeline import Event, Sample, VariantSample


def _num(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def variant_cell(name: str, v: VariantSample) -> str:
    weight = "-" if v.weight is None else f"{v.weight:3d}%"
    return (
        f"{name} {weight} ok {_num(v.success_rate, '.3f')} "
        f"p95 {_num(v.p95_ms, '.0f')}ms {_num(v.rps, '.1f')}/s"
    )


def sample_line(sample: Sample) -> str:
    cells = " | ".join(variant_cell(n, v) for n, v in sorted(sample.variants.items()))
    return f"  {sample.t:6.1f}s {sample.phase:<11} {cells}"


def event_line(event: Event) -> str:
    mark = "!!" if event.type == "Warning" else ">>"
    return f"  {event.t:6.1f}s {mark} {event.reason}: {event.message}"


class LiveView:
    """Prints each new sample (when it differs from the last one printed, or every
    ``every`` samples) and each new event."""

    def __init__(self, out: Callable[[str], None] = print, every: int = 5) -> None:
        self._out, self._every = out, every
        self._last = ""
        self._count = 0
        self._events = 0

    def show(self, sample: Sample, events: list[Event]) -> None:
        for event in events[self._events :]:
            self._out(event_line(event))
        self._events = len(events)
        line = sample_line(sample)
        self._count += 1
        # The time column always changes; compare the rest to skip repeats.
        body = line.split("s ", 1)[-1]
        if body != self._last or self._count % self._every == 0:
            self._out(line)
            self._last = body
