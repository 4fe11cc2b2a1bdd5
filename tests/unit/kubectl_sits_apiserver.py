"""A fake apiserver on loopback for the `kubectl sits` tests: just enough of the Kubernetes API
(the paths, Status bodies, watch streams of JSON lines, 410 Gone) to drive sits_kubectl.kube
with a real kubeconfig, token and HTTP."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

from sits_operator.model.spec import API_GROUP, API_VERSION, PLURAL
from tests.unit.kubectl_sits_fixtures import recorded

NS = "sits-demo"
BASE = f"/apis/{API_GROUP}/{API_VERSION}/namespaces/{NS}/{PLURAL}"


def watching(request: web.Request) -> bool:
    """The client sends Python's True; the apiserver parses bools as Go's ParseBool does."""
    return request.query.get("watch", "").lower() in ("true", "1")


def status_body(code: int, message: str) -> web.Response:
    body = {"kind": "Status", "status": "Failure", "code": code, "message": message}
    return web.json_response(body, status=code)


class FakeApiserver:
    def __init__(self) -> None:
        found = recorded("progressing")
        self.obj: dict[str, Any] = found["object"]
        self.pods: list[dict[str, Any]] = found["pods"]
        self.policy: dict[str, Any] = found["policy"]
        self.headers: list[dict[str, str]] = []
        self.queries: list[dict[str, str]] = []
        self.forbidden: set[tuple[str, str]] = set()  # (method, path prefix)
        self.object_watches: list[list[dict[str, Any]]] = []  # events of each watch request
        self.patches: list[tuple[str, Any]] = []
        self.listed: dict[str, Any] | None = None  # what a list answers (default: self.obj)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._record])
        app.router.add_get(f"{BASE}/{{name}}", self._get)
        app.router.add_patch(f"{BASE}/{{name}}", self._patch)
        app.router.add_get(BASE, self._list)
        app.router.add_get(f"/api/v1/namespaces/{NS}/pods", self._pods)
        app.router.add_get(f"/apis/{API_GROUP}/{API_VERSION}/sitspolicies/{{name}}", self._policy)
        return app

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.headers.append(dict(request.headers))
        self.queries.append(dict(request.query))
        if any(request.method == m and request.path.startswith(p) for m, p in self.forbidden):
            return status_body(403, f'{request.path} is forbidden: User "jane" cannot do that')
        return await handler(request)  # type: ignore[no-any-return]

    async def _get(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name != self.obj["metadata"]["name"]:
            return status_body(404, f'{PLURAL}.{API_GROUP} "{name}" not found')
        return web.json_response(self.obj)

    async def _patch(self, request: web.Request) -> web.Response:
        patch = await request.json()
        self.patches.append((request.headers["Content-Type"], patch))
        annotations = self.obj["metadata"].setdefault("annotations", {})
        annotations.update(patch["metadata"]["annotations"])
        return web.json_response(self.obj)

    async def _list(self, request: web.Request) -> web.StreamResponse:
        if not watching(request):
            items = [self.listed or self.obj]
            return web.json_response({"items": items, "metadata": {"resourceVersion": "900"}})
        events = self.object_watches.pop(0) if self.object_watches else None
        return await self._stream(request, events)

    async def _pods(self, request: web.Request) -> web.StreamResponse:
        if watching(request):
            return await self._stream(request, None)
        return web.json_response({"items": self.pods, "metadata": {"resourceVersion": "800"}})

    async def _policy(self, request: web.Request) -> web.Response:
        return web.json_response(self.policy)

    async def _stream(
        self, request: web.Request, events: list[dict[str, Any]] | None
    ) -> web.StreamResponse:
        """A watch: the given events, one JSON line each, then the end; None: hold open."""
        response = web.StreamResponse()
        await response.prepare(request)
        if events is None:
            await asyncio.sleep(3600)
        for event in events or ():
            await response.write(json.dumps(event).encode() + b"\n")
        await response.write_eof()
        return response


@pytest.fixture
async def apiserver(tmp_path: Path) -> AsyncIterator[tuple[FakeApiserver, Path]]:
    fake = FakeApiserver()
    runner = web.AppRunner(fake.app(), shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    kubeconfig = tmp_path / "config"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "main",
                "clusters": [{"name": "fake", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "me", "user": {"token": "s3cret"}}],
                "contexts": [
                    {"name": "main", "context": {"cluster": "fake", "user": "me", "namespace": NS}},
                    {"name": "bare", "context": {"cluster": "fake", "user": "me"}},
                ],
            }
        )
    )
    yield fake, kubeconfig
    await runner.cleanup()


def changed(obj: dict[str, Any], phase: str, version: str) -> dict[str, Any]:
    new = copy.deepcopy(obj)
    new["status"]["phase"] = phase
    new["metadata"]["resourceVersion"] = version
    return new
