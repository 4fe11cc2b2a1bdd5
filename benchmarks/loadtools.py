"""Load and measurement tools for benchmarks on a small shared machine.

An open-loop HTTP/1.1 load generator for latency at a fixed request rate:

Closed-loop tools (wrk, a pool of clients each waiting for its answer) slow down when the
server does, so a stall delays the requests that would have seen it and they are never
measured: coordinated omission. Here request ``i`` is due at ``start + i / rate`` whatever
the answers do, and its latency counts from that scheduled time, so a stall shows in full
in every request it delayed, queueing for a connection included.

Raw keep-alive sockets on asyncio streams rather than an HTTP client library: at 500
requests/s a library's own per-request work (and its variance) would be of the size of
what is measured, a proxy's sub-millisecond share. Bounded: ``rate x (warm-up + seconds)``
requests, then at most ``cap_s`` for the last answers; at most 256 connections.


:class:`StallProbe` tells rounds in which the machine itself stalled from the others;
:func:`cpu_meter` reads from /proc what CPU a process and a set of cores used meanwhile;
:class:`Processes` starts pinned helper processes and stops every one of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

MAX_CONNECTIONS = 256


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest-rank percentile of sorted ``values``: always a real sample, no interpolation
    between two (NaN for no samples)."""
    if not 0 < p <= 100:
        raise ValueError(f"percentile out of (0, 100]: {p}")
    if not values:
        return math.nan
    rank = math.ceil(round(p * len(values) / 100, 9))  # round: 99.9 % of 10,000 is 9,990
    return values[max(0, rank - 1)]


@dataclass
class LoadResult:
    latencies_ms: list[float]  # sorted; answered 200, after the warm-up
    errors: int = 0  # other statuses and broken connections
    late: int = 0  # still unanswered at the hard time cap
    labels: Counter[str] = field(default_factory=Counter)  # label(body) of the 200s
    send_lag_p99_ms: float = 0.0  # how late the client itself sent (timer granularity)

    def merge(self, other: LoadResult) -> None:
        """Pool another round's samples, so percentiles cover every round."""
        self.latencies_ms = sorted([*self.latencies_ms, *other.latencies_ms])
        self.errors, self.late = self.errors + other.errors, self.late + other.late
        self.labels.update(other.labels)
        self.send_lag_p99_ms = max(self.send_lag_p99_ms, other.send_lag_p99_ms)


async def exchange(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, payload: bytes
) -> tuple[int, bytes, bool]:
    """One request on a kept-alive connection: (status, body, whether the server closes)."""
    writer.write(payload)
    head = await reader.readuntil(b"\r\n\r\n")
    status, length, chunked, close = int(head[9:12]), -1, False, False
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == b"content-length":
            length = int(value)
        elif name == b"transfer-encoding":
            chunked = b"chunked" in value
        elif name == b"connection":
            close = value == b"close"
    if length >= 0:
        return status, await reader.readexactly(length), close
    if not chunked:
        raise ValueError("response without a length")
    parts: list[bytes] = []
    for _ in range(10_000):  # bounded; small bodies come in one or two chunks
        size = int((await reader.readline()).split(b";")[0], 16)
        chunk = await reader.readexactly(size + 2)
        if size == 0:
            break
        parts.append(chunk[:-2])
    return status, b"".join(parts), close


def post_request(host: str, port: int, path: str, body: bytes) -> bytes:
    return (
        f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


async def open_loop(
    host: str,
    port: int,
    payload: bytes,
    *,
    rate: float,
    seconds: float,
    warmup: float = 0.0,
    label: Callable[[bytes], str] = lambda body: "",
    cap_s: float = 10.0,
) -> LoadResult:
    """Send ``payload`` at ``rate`` per second for ``warmup + seconds``; the warm-up's
    answers are not recorded (it fills connection pools on both sides)."""
    idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    slots = asyncio.Semaphore(MAX_CONNECTIONS)
    total, skip = round(rate * (warmup + seconds)), round(rate * warmup)
    result, lags = LoadResult([]), []

    async def one(index: int, scheduled: float) -> None:
        async with slots:  # waiting here is part of the latency: it counts from `scheduled`
            conn = idle.pop() if idle else None
            try:
                conn = conn or await asyncio.open_connection(host, port)
                status, body, close = await exchange(conn[0], conn[1], payload)
            except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                if conn is not None:
                    conn[1].close()
                result.errors += index >= skip
                return
            done = time.perf_counter()
            if close:
                conn[1].close()
            else:
                idle.append(conn)
        if index < skip:
            return
        if status != 200:
            result.errors += 1
            return
        result.latencies_ms.append((done - scheduled) * 1000)
        result.labels[label(body)] += 1

    tasks: set[asyncio.Task[None]] = set()
    start = time.perf_counter() + 0.01
    for index in range(total):
        scheduled = start + index / rate
        delay = scheduled - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        lags.append((time.perf_counter() - scheduled) * 1000)
        task = asyncio.create_task(one(index, scheduled))
        tasks.add(task)
        task.add_done_callback(tasks.discard)
    if tasks:
        _, pending = await asyncio.wait(set(tasks), timeout=cap_s)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        result.late = len(pending)
    for _, writer in idle:
        writer.close()
    result.latencies_ms.sort()
    result.send_lag_p99_ms = percentile(sorted(lags), 99)
    return result


def run_open_loop(
    host: str,
    port: int,
    payload: bytes,
    *,
    rate: float,
    seconds: float,
    warmup: float = 0.0,
    label: Callable[[bytes], str] = lambda body: "",
) -> LoadResult:
    """:func:`open_loop` on its own uvloop event loop (the cheapest client loop; uvloop is
    a dependency of the gateway, hence of this project)."""
    import uvloop

    return uvloop.run(
        open_loop(host, port, payload, rate=rate, seconds=seconds, warmup=warmup, label=label)
    )


# A process that only sleeps 1 ms at a time, on one CPU, printing every oversleep above a
# threshold: "<monotonic time> <ms late>". CLOCK_MONOTONIC is one clock for the whole
# machine, so the benchmark can tell which of its rounds a stall fell into.
_PROBE = """
import os, sys, time
cpu, prio = int(sys.argv[1]), int(sys.argv[2])
threshold, limit = float(sys.argv[3]), float(sys.argv[4])
os.sched_setaffinity(0, {cpu})
if prio:
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(prio))
end = time.monotonic() + limit
while time.monotonic() < end:
    t = time.monotonic()
    time.sleep(0.001)
    late = (time.monotonic() - t - 0.001) * 1000
    if late > threshold:
        print(f"{t:.6f} {late:.3f}", flush=True)
"""


class StallProbe:
    """Sees the machine itself stall: on a small shared VM a process with nothing to wait
    for is sometimes not run for tens of milliseconds (the host, a kernel section, other
    jobs), which at 500 requests/s lands in the p99 of whatever was being measured. With
    a real-time priority above the benchmark's own processes, none of those can delay
    the probe: what it sees is outside the measured paths. ~2 % of a core per CPU."""

    def __init__(
        self, cpus: Sequence[int], logs: Path, *, priority: int = 0, threshold_ms: float = 2.0
    ) -> None:
        self.cpus, self.logs = list(cpus), logs
        self.priority, self.threshold_ms = priority, threshold_ms
        self._procs: list[subprocess.Popen[bytes]] = []

    def start(self, limit_s: float) -> None:
        """Start one probe per CPU; each ends by itself after ``limit_s`` at the latest."""
        for cpu in self.cpus:
            argv = [
                sys.executable,
                "-c",
                _PROBE,
                str(cpu),
                str(self.priority),
                str(self.threshold_ms),
                str(limit_s),
            ]
            with open(self.logs / f"stall-probe-{cpu}.log", "wb") as out:
                self._procs.append(subprocess.Popen(argv, stdout=out, start_new_session=True))

    def stop(self) -> None:
        for proc in self._procs:
            proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
        self._procs.clear()

    def stalls(self, since: float, until: float) -> list[float]:
        """Milliseconds late of each stall that began within [since, until] (monotonic)."""
        found: list[float] = []
        for cpu in self.cpus:
            path = self.logs / f"stall-probe-{cpu}.log"
            for line in path.read_text().splitlines() if path.exists() else []:
                at, _, late = line.partition(" ")
                with contextlib.suppress(ValueError):
                    if since <= float(at) <= until:
                        found.append(float(late))
        return found


def family(pid: int) -> list[int]:
    """``pid`` and its direct children (nginx's worker), from /proc."""
    pids = [pid]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                    pids.append(int(entry.name))
    return pids


def cpu_seconds(pids: Sequence[int]) -> float:
    """User + system CPU time of the processes (clock ticks from /proc/<pid>/stat)."""
    ticks = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def core_times(cpus: Sequence[int]) -> tuple[float, float]:
    """(busy, total) jiffies of the given CPUs, from /proc/stat."""
    busy = total = 0.0
    for line in Path("/proc/stat").read_text().splitlines():
        name, *values = line.split()
        if name.startswith("cpu") and name[3:].isdigit() and int(name[3:]) in cpus:
            v = [float(x) for x in values[:8]]
            total += sum(v)
            busy += sum(v) - v[3] - v[4]  # minus idle and iowait
    return busy, total


@contextlib.contextmanager
def cpu_meter(
    pids: Sequence[int], proxy_cpus: Sequence[int], load_cpus: Sequence[int]
) -> Iterator[dict[str, float]]:
    """Measures a block, each as a fraction of one core's time: ``proxy`` = CPU the pids
    used, ``other`` = what else ran on the proxy's CPUs (the machine is shared), ``load`` =
    busy share of the load-side CPUs (near 1.0: the load side may be the limit)."""
    result: dict[str, float] = {}
    t0, c0 = time.monotonic(), cpu_seconds(pids)
    (p0, pn0), (l0, ln0) = core_times(proxy_cpus), core_times(load_cpus)
    yield result
    t1, c1 = time.monotonic(), cpu_seconds(pids)
    (p1, pn1), (l1, ln1) = core_times(proxy_cpus), core_times(load_cpus)
    result["proxy"] = (c1 - c0) / max(t1 - t0, 1e-9)
    core_busy = (p1 - p0) / max(pn1 - pn0, 1e-9) * len(proxy_cpus)
    result["other"] = max(0.0, core_busy - result["proxy"]) if pids else 0.0
    result["load"] = (l1 - l0) / max(ln1 - ln0, 1e-9)


def pinned(cpus: Sequence[int], nice: int = 0) -> list[str]:
    """Command prefix: run on ``cpus`` at ``nice`` (both exec: the pid is the real one's)."""
    renice = ["nice", "-n", str(nice)] if nice else []
    return [*renice, "taskset", "-c", ",".join(map(str, cpus))]


def free_port(host: str) -> int:
    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class Processes:
    """Every process the benchmark starts, stopped on exit whatever happens (each in its
    own session, so a Ctrl-C reaches only the benchmark, which then stops them)."""

    def __init__(self, logs: Path, *, nice: int = 0) -> None:
        self.logs, self.nice = logs, nice
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, argv: Sequence[str], cpus: Sequence[int]) -> subprocess.Popen[bytes]:
        with open(self.logs / f"{name}.log", "wb") as log:
            proc = subprocess.Popen(
                [*pinned(cpus, self.nice), *argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started.append((name, proc))
        return proc

    def log_tail(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace")[-2000:] if path.exists() else ""

    def stop_all(self) -> None:
        for _, proc in reversed(self.started):
            if proc.poll() is None:
                proc.terminate()  # SIGTERM: nginx's fast shutdown, stops its worker too
        for name, proc in reversed(self.started):
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                print(f"  {name} ignored SIGTERM; killing it", flush=True)
                proc.kill()
                proc.wait(timeout=5)
        self.started.clear()
