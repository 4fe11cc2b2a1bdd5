"""A fault-injecting HTTPS proxy in front of the local kube-apiserver (issue 18, item 4).

Why a proxy and not a mocked client: the operator under test is the real process with
its real clients (Kopf's watches and retries, kubernetes_asyncio's writes); only what an
overloaded or failing apiserver says changes. The proxy terminates TLS with the cluster's
own serving certificate (its SANs name 127.0.0.1 and its CA is the one in every
kubeconfig), so a kubeconfig whose server is the proxy is trusted as is, and the bearer
token the operator sends is forwarded untouched: the apiserver still authenticates and
authorizes every forwarded request as the operator's ServiceAccount.

At run time, from the test's thread:
- `fail(Fault(...))`: answer a share (or all) of the requests with 429 (+Retry-After) or a
  5xx, as a Kubernetes Status, until `fail(None)` (or within `storm(...)`);
- `cut_watches()`: abort every open watch stream (the TCP connection, as a load balancer
  or a restarted apiserver would), so the client must re-watch;
- `requests(since, until)`: every request it saw, forwarded or answered, with its time,
  to tell a client that backs off from one in a tight retry loop.

The server runs on its own event loop in a daemon thread: the tests are synchronous.
"""

from __future__ import annotations

import asyncio
import json
import random
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from sits_localcluster.prometheus import free_port

HOST = "127.0.0.1"
# Headers of one hop, not of the request or response (RFC 9110 7.6.1), and those aiohttp
# sets itself from what it sends.
HOP_BY_HOP = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "host",
        "content-length",
    }
)
REASONS = {429: "TooManyRequests", 500: "InternalError", 503: "ServiceUnavailable"}
STOP_SECONDS = 10.0


@dataclass(frozen=True)
class Fault:
    """What to answer instead of forwarding: `status` for a `share` of the requests that
    match `methods` (None: any) and `path_contains` (None: any path)."""

    status: int
    share: float = 1.0
    retry_after: int | None = 1
    methods: frozenset[str] | None = None
    path_contains: str | None = None

    def applies(self, method: str, path: str) -> bool:
        if self.methods is not None and method not in self.methods:
            return False
        return self.path_contains is None or self.path_contains in path


@dataclass(frozen=True)
class Seen:
    """One request the proxy received: `answered` is the injected status, None when it
    was forwarded."""

    at: float  # time.monotonic()
    method: str
    path: str
    watch: bool
    answered: int | None


def is_watch(request: web.Request) -> bool:
    return request.query.get("watch") in ("true", "1") or "/watch/" in request.path


def status_body(status: int, retry_after: int | None) -> bytes:
    """The apiserver's own way of saying it (a metav1.Status), so clients parse it."""
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": f"injected by the test's apiserver proxy: {status}",
        "reason": REASONS.get(status, "InternalError"),
        "code": status,
    }
    if retry_after is not None:
        body["details"] = {"retryAfterSeconds": retry_after}
    return json.dumps(body).encode()


def proxied_kubeconfig(source: Path, dest: Path, server: str) -> Path:
    """A copy of kubeconfig `source` whose clusters all point at `server`."""
    config = yaml.safe_load(source.read_text())
    for cluster in config["clusters"]:
        cluster["cluster"]["server"] = server
    dest.write_text(yaml.safe_dump(config))
    dest.chmod(0o600)
    return dest


class ApiserverProxy:
    """HTTPS on 127.0.0.1 (a free port) forwarding to `upstream`; see the module docstring."""

    def __init__(
        self,
        upstream: str,
        *,
        ca_cert: Path,
        serving_cert: Path,
        serving_key: Path,
        seed: int = 18,
    ) -> None:
        self.upstream = upstream.rstrip("/")
        self.port = free_port()
        self._ca, self._cert, self._key = ca_cert, serving_cert, serving_key
        self._rng = random.Random(seed)  # which requests of a share fail: reproducible
        self._fault: Fault | None = None
        self._seen: list[Seen] = []
        self._lock = threading.Lock()
        # id(request) -> the open watch stream's two ends (a Request is not hashable).
        self._watches: dict[int, tuple[web.Request, aiohttp.ClientResponse]] = {}
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def url(self) -> str:
        return f"https://{HOST}:{self.port}"

    # ----- lifecycle (test thread) ---------------------------------------------------

    def start(self) -> ApiserverProxy:
        self._thread.start()
        self._call(self._start())
        return self

    def stop(self) -> None:
        if not self._thread.is_alive():
            return
        try:
            self._call(self._stop())
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=STOP_SECONDS)
            self._loop.close()

    def __enter__(self) -> ApiserverProxy:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=STOP_SECONDS)

    async def _start(self) -> None:
        upstream_tls = ssl.create_default_context(cafile=str(self._ca))
        # No read timeout: watch streams stay open for minutes.
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10)
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=upstream_tls),
            timeout=timeout,
            auto_decompress=False,
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        serving.load_cert_chain(str(self._cert), str(self._key))
        await web.TCPSite(self._runner, HOST, self.port, ssl_context=serving).start()

    async def _stop(self) -> None:
        await self._cut()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()
        # Handlers of cut streams still unwinding, then the TLS transports' close: a
        # socket left open would be a ResourceWarning (an error under pytest's filters).
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for task in others:
            task.cancel()
        await asyncio.gather(*others, return_exceptions=True)
        await asyncio.sleep(0.25)

    # ----- faults and records (test thread) ------------------------------------------

    def fail(self, fault: Fault | None) -> None:
        """Answer requests as `fault` says from now on; None: forward everything again."""
        self._fault = fault

    @contextmanager
    def storm(self, fault: Fault) -> Iterator[tuple[float, float]]:
        """`fault` for the block; yields [start, end] (monotonic), the end set on exit."""
        window = [time.monotonic(), 0.0]
        self.fail(fault)
        try:
            yield window  # type: ignore[misc]  # a list the caller reads after the block
        finally:
            self.fail(None)
            window[1] = time.monotonic()

    def cut_watches(self) -> int:
        """Abort every open watch stream; returns how many were cut."""
        return int(self._call(self._cut()))

    def open_watches(self) -> int:
        return len(self._watches)

    def requests(self, since: float = 0.0, until: float = float("inf")) -> list[Seen]:
        with self._lock:
            return [s for s in self._seen if since <= s.at <= until]

    def rate(self, since: float, until: float) -> float:
        """Requests per second received in [since, until], watches and faults included."""
        return len(self.requests(since, until)) / max(until - since, 1e-9)

    def peak(self, since: float, until: float) -> int:
        """The most requests received in any one-second bucket of [since, until]."""
        buckets: dict[int, int] = {}
        for seen in self.requests(since, until):
            second = int(seen.at - since)
            buckets[second] = buckets.get(second, 0) + 1
        return max(buckets.values(), default=0)

    def kubeconfig(self, source: Path, dest: Path) -> Path:
        return proxied_kubeconfig(source, dest, self.url)

    # ----- the server (proxy loop) ---------------------------------------------------

    def _injected(self, method: str, path: str) -> Fault | None:
        fault = self._fault
        if fault is None or not fault.applies(method, path):
            return None
        return fault if self._rng.random() < fault.share else None

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        fault = self._injected(request.method, request.path)
        with self._lock:
            self._seen.append(
                Seen(
                    time.monotonic(),
                    request.method,
                    request.path,
                    is_watch(request),
                    fault.status if fault else None,
                )
            )
        if fault is not None:
            headers = {"Content-Type": "application/json"}
            if fault.retry_after is not None:
                headers["Retry-After"] = str(fault.retry_after)
            return web.Response(
                status=fault.status,
                body=status_body(fault.status, fault.retry_after),
                headers=headers,
            )
        return await self._forward(request)

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in HOP_BY_HOP}
        body = await request.read()
        try:
            upstream = await self._session.request(
                request.method,
                self.upstream + request.path_qs,
                headers=headers,
                data=body or None,
                allow_redirects=False,
            )
        except (aiohttp.ClientError, OSError) as exc:  # the apiserver itself is down
            return web.Response(status=502, text=f"apiserver unreachable: {exc}")
        try:
            return await self._relay(request, upstream)
        finally:
            upstream.release()

    async def _relay(
        self, request: web.Request, upstream: aiohttp.ClientResponse
    ) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
        for key, value in upstream.headers.items():
            if key.lower() not in HOP_BY_HOP:
                response.headers.add(key, value)
        if is_watch(request):
            self._watches[id(request)] = (request, upstream)
        try:
            await response.prepare(request)
            async for chunk in upstream.content.iter_any():
                await response.write(chunk)
            await response.write_eof()
        except (aiohttp.ClientError, ConnectionError, asyncio.CancelledError, RuntimeError):
            # Cut (cut_watches) or the client went away: nothing more to relay.
            if request.transport is not None:
                request.transport.abort()
        finally:
            self._watches.pop(id(request), None)
        return response

    async def _cut(self) -> int:
        cut = list(self._watches.values())
        for request, upstream in cut:
            if request.transport is not None:
                request.transport.abort()
            upstream.close()
        return len(cut)
