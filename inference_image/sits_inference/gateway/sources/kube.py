"""Routing followed from the Kubernetes API with kubernetes_asyncio list+watch loops.

Two loops: the SitsDeployment (field selector on its name; the operator's built-in router
writes the weights into its status) and the namespace's EndpointSlices that belong to a
Service (filtered by Service name in memory, so a variant added later is picked up
without restarting a watch). Watch events arrive within milliseconds of the write, so
a weight change is in force well within the 1 s the design asks for.

Each loop lists (a consistent snapshot and a resourceVersion), then watches from there
for a bounded time, then lists again: a relist every few minutes is cheap and resets
anything a missed event could have left wrong, and a watch that fails for any reason
(410 Gone, apiserver restart) just falls back to the relist, with capped backoff. The
table in force stays in force while the API is unreachable: traffic keeps flowing to the
last known endpoints rather than stopping.

Objects are handled as plain JSON dicts (``_preload_content=False`` on lists,
``raw_object`` on events): no model deserialisation, one parser shared with the tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from collections.abc import Awaitable, Callable
from typing import Any

from kubernetes_asyncio import client, config, watch

from ..table import RoutingTable
from .kube_model import (
    SERVICE_NAME_LABEL,
    SliceIndex,
    build_table,
    routing_origin,
    slice_endpoints,
)
from .static import describe

log = logging.getLogger(__name__)

GROUP, VERSION, PLURAL = "sits.dev", "v1alpha1", "sitsdeployments"
Apply = Callable[[str, dict[str, Any]], None]


async def make_api_client(kubeconfig: str | None = None) -> Any:
    """An ApiClient from a kubeconfig file, or in-cluster credentials inside a pod."""
    configuration = client.Configuration()
    if kubeconfig or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    else:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return client.ApiClient(configuration=configuration)


class KubernetesSource:
    """Follows one SitsDeployment's weights and its variants' ready endpoints."""

    def __init__(
        self,
        *,
        namespace: str,
        deployment: str,
        api_client: Any = None,
        kubeconfig: str | None = None,
        watch_seconds: int = 240,
        max_backoff: float = 5.0,
    ) -> None:
        self.namespace, self.deployment = namespace, deployment
        self._api = api_client
        self._owns_api = api_client is None
        self._kubeconfig = kubeconfig
        self._watch_seconds, self._max_backoff = watch_seconds, max_backoff
        self._object: dict[str, Any] | None = None
        self._slices: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._synced: set[str] = set()
        self._table = build_table(namespace, deployment, None, {})
        self._origin: dict[str, Any] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._ready_event = asyncio.Event()

    def current(self) -> RoutingTable:
        return self._table

    @property
    def origin(self) -> dict[str, Any]:
        """The SitsDeployment state the table in force was built from (routing_origin)."""
        return self._origin

    @property
    def ready(self) -> bool:
        return self._synced >= {"deployment", "slices"}

    async def start(self) -> None:
        if self._api is None:
            self._api = await make_api_client(self._kubeconfig)
        custom, discovery = client.CustomObjectsApi(self._api), client.DiscoveryV1Api(self._api)
        deployment_list = _bind(
            custom.list_namespaced_custom_object,
            GROUP,
            VERSION,
            self.namespace,
            PLURAL,
            field_selector=f"metadata.name={self.deployment}",
        )
        slice_list = _bind(
            discovery.list_namespaced_endpoint_slice,
            self.namespace,
            label_selector=SERVICE_NAME_LABEL,
        )
        self._tasks = [
            asyncio.create_task(self._loop("deployment", deployment_list, self._on_deployment)),
            asyncio.create_task(self._loop("slices", slice_list, self._on_slice)),
        ]

    async def wait_ready(self) -> None:
        """For callers that want the first table before going on (wrap in a timeout)."""
        await self._ready_event.wait()

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        if self._owns_api and self._api is not None:
            await self._api.close()
            self._api = None
            # TLS transports finish closing on the next loop iterations (aiohttp's advice
            # for a graceful shutdown); without this pause they are reported unclosed.
            await asyncio.sleep(0.25)

    # -- events --------------------------------------------------------------------------

    def _on_deployment(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "RESET":
            items = obj.get("items") or []
            self._object = items[0] if items else None
        elif kind == "DELETED":
            self._object = None
        else:
            self._object = obj

    def _on_slice(self, kind: str, obj: dict[str, Any]) -> None:
        if kind == "RESET":
            self._slices = {_name(item): slice_endpoints(item) for item in obj.get("items") or []}
        elif kind == "DELETED":
            self._slices.pop(_name(obj), None)
        else:
            self._slices[_name(obj)] = slice_endpoints(obj)

    def _rebuild(self) -> None:
        slices: SliceIndex = self._slices
        table = build_table(self.namespace, self.deployment, self._object, slices)
        self._origin = routing_origin(self._object)
        if table != self._table:
            self._table = table
            log.info("routing from the cluster: %s", describe(table))

    # -- list + watch --------------------------------------------------------------------

    async def _loop(self, what: str, list_call: _ListCall, apply: Apply) -> None:
        backoff = 0.1
        while True:
            try:
                await self._list_then_watch(what, list_call, apply)
                backoff = 0.1
            except asyncio.CancelledError:
                raise
            except Exception as err:  # any API trouble: keep the table, retry with backoff
                log.warning(
                    "watching %s of %s/%s failed (%s); retrying in %.1f s",
                    what,
                    self.namespace,
                    self.deployment,
                    err,
                    backoff,
                )
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self._max_backoff)

    async def _list_then_watch(self, what: str, list_call: _ListCall, apply: Apply) -> None:
        response = await list_call.call(_preload_content=False)
        try:
            listing = json.loads(await response.read())
        finally:
            response.release()
        apply("RESET", listing)
        self._synced.add(what)
        self._rebuild()
        if self.ready:
            self._ready_event.set()
        version = (listing.get("metadata") or {}).get("resourceVersion")
        async with watch.Watch(return_type="object") as stream:
            events = stream.stream(
                list_call.func,
                *list_call.args,
                **list_call.kwargs,
                resource_version=version,
                timeout_seconds=self._watch_seconds,
                allow_watch_bookmarks=True,
            )
            async for event in events:
                if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    apply(event["type"], event["raw_object"])
                    self._rebuild()


class _ListCall:
    """A list function with its arguments, callable as a list or handed to a watch."""

    def __init__(self, func: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> None:
        self.func, self.args, self.kwargs = func, args, kwargs

    async def call(self, **extra: Any) -> Any:
        return await self.func(*self.args, **self.kwargs, **extra)


def _bind(func: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> _ListCall:
    return _ListCall(func, *args, **kwargs)


def _name(obj: dict[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
