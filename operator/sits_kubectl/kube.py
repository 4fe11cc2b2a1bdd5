"""Every apiserver call of the plugin, with the user's own kubeconfig and RBAC.

Reads (get, list and watch of the SitsDeployment and its pods, get of the SitsPolicy) and
the one write (a JSON merge patch of one annotation). An API error becomes a KubeError
whose text names the refused verb and resource (messages.py); a missing permission for
the pods or the policy only leaves them out of the screen, since reading the rollout
itself is what the user asked for.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from sits_kubectl.commands import patch_body
from sits_kubectl.connection import Connection
from sits_kubectl.messages import Call, apiserver_message, refusal
from sits_kubectl.snapshot import Obj, Snapshot
from sits_kubectl.view import policy_name
from sits_operator.core.naming import LABEL_DEPLOYMENT
from sits_operator.model.analysis import Command
from sits_operator.model.spec import API_GROUP, API_VERSION, PLURAL

POLICY_PLURAL = "sitspolicies"  # crds/sitspolicy.yaml
RESOURCE = f"{PLURAL}.{API_GROUP}"
POLICY_RESOURCE = f"{POLICY_PLURAL}.{API_GROUP}"
REQUEST_SECONDS = 30
# A watch request ends after this long on the server (then it is renewed from the last
# resourceVersion); the client gives up on a silent connection 30 s later.
WATCH_SECONDS = 240
RENEW_SECONDS = 1.0
BOOKMARK, DELETED, ERROR = "BOOKMARK", "DELETED", "ERROR"  # watch event types
WATCH_TIMEOUT = aiohttp.ClientTimeout(sock_connect=10, sock_read=WATCH_SECONDS + 30)
IN_CLUSTER_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class KubeError(Exception):
    """A failure worth one paragraph to the user (no stack trace)."""


class _GoneError(Exception):
    """The watch's resourceVersion is too old (410): list again."""


async def open_session(conn: Connection) -> Session:
    """An API client as kubectl would build it from the same flags."""
    configuration = client.Configuration()
    namespace = await _load(conn, configuration)
    api = client.ApiClient(configuration)
    if conn.as_user:
        api.set_default_header("Impersonate-User", conn.as_user)
    if conn.as_group:
        api.set_default_header("Impersonate-Group", conn.as_group)
    return Session(api, conn.namespace or namespace, conn.as_user, str(configuration.host or ""))


async def _load(conn: Connection, configuration: client.Configuration) -> str:
    """Load credentials; return the namespace of the chosen context ("default" if none)."""
    paths = conn.kubeconfig or os.environ.get("KUBECONFIG") or "~/.kube/config"
    found = _existing(paths)
    if not found:
        if conn.kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            return _in_cluster(configuration)
        raise KubeError(f"no kubeconfig at {paths} (set --kubeconfig or KUBECONFIG)")
    try:
        loader = await config.load_kube_config(
            config_file=os.pathsep.join(found),
            context=conn.context,
            client_configuration=configuration,
            persist_config=False,
        )
    except Exception as exc:  # the loader raises whatever a broken file makes it raise
        what = f"context {conn.context!r}" if conn.context else "the current context"
        raise KubeError(f"cannot use {what} of kubeconfig {paths}: {exc}") from exc
    context = (loader.current_context or {}).get("context") or {}
    return str(context.get("namespace") or "default")


def _existing(paths: str) -> list[str]:
    """The files of a KUBECONFIG-style list that exist (kubectl skips the others too)."""
    return [p for p in paths.split(os.pathsep) if p and Path(p).expanduser().exists()]


def _in_cluster(configuration: client.Configuration) -> str:
    """In a pod without a kubeconfig: its ServiceAccount, its namespace (as kubectl does)."""
    config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    return IN_CLUSTER_NAMESPACE.read_text().strip() or "default"


@dataclass
class _Watched:
    """What a running watch has seen so far."""

    obj: Obj | None
    pods: dict[str, Obj] | None
    policy: Obj | None
    notes: tuple[str, ...]
    changed: asyncio.Event = field(default_factory=asyncio.Event)


@dataclass
class Session:
    api: client.ApiClient
    namespace: str
    impersonating: str | None
    host: str

    async def close(self) -> None:
        await self.api.close()

    # ------------------------------------------------------------------ reads

    async def get_object(self, name: str) -> dict[str, Any]:
        custom = client.CustomObjectsApi(self.api)
        with self._calling(Call("get", RESOURCE, self.namespace, name)):
            found = await custom.get_namespaced_custom_object(
                API_GROUP,
                API_VERSION,
                self.namespace,
                PLURAL,
                name,
                _request_timeout=REQUEST_SECONDS,
            )
        return dict(found)

    async def read(self, name: str) -> Snapshot:
        """The SitsDeployment (a KubeError when it cannot be read), its pods and policy."""
        snapshot, _ = await self._read(name)
        return snapshot

    async def _read(self, name: str) -> tuple[Snapshot, str]:
        """The snapshot and the pod list's resourceVersion (a watch starts from it)."""
        obj = await self.get_object(name)
        pods: tuple[Obj, ...] | None = None
        version, pod_note = "", ""
        try:
            listed, version = await self._list_pods(name, Call("list", "pods", self.namespace))
            pods = tuple(listed)
        except KubeError as exc:
            pod_note = f"pods not shown: {exc}".splitlines()[0]
        policy, policy_note = await self._policy(obj)
        notes = tuple(n for n in (pod_note, policy_note) if n)
        return Snapshot(name, self.namespace, obj, pods, policy, notes), version

    async def _list_pods(self, name: str, call: Call) -> tuple[list[Obj], str]:
        core = client.CoreV1Api(self.api)
        with self._calling(call):
            response = await core.list_namespaced_pod(
                self.namespace,
                label_selector=f"{LABEL_DEPLOYMENT}={name}",
                _preload_content=False,
                _request_timeout=REQUEST_SECONDS,
            )
            body = await _json(response)
        return list(body.get("items") or ()), str(body["metadata"].get("resourceVersion", ""))

    async def _policy(self, obj: Obj | None) -> tuple[Obj | None, str]:
        name = policy_name(obj) if obj is not None else None
        if not name:
            return None, ""
        custom = client.CustomObjectsApi(self.api)
        try:
            with self._calling(Call("get", POLICY_RESOURCE, None, name)):
                found = await custom.get_cluster_custom_object(
                    API_GROUP, API_VERSION, POLICY_PLURAL, name, _request_timeout=REQUEST_SECONDS
                )
        except KubeError as exc:
            return None, f"SitsPolicy {name} not shown: {exc}".splitlines()[0]
        return dict(found), ""

    # ------------------------------------------------------------------ the write

    async def annotate(self, name: str, command: Command, value: str) -> dict[str, Any]:
        """Set sits.dev/<command>=value by JSON merge patch; returns the stored object."""
        custom = client.CustomObjectsApi(self.api)
        with self._calling(Call("patch", RESOURCE, self.namespace, name)):
            stored = await custom.patch_namespaced_custom_object(
                API_GROUP,
                API_VERSION,
                self.namespace,
                PLURAL,
                name,
                patch_body(command, value),
                _content_type="application/merge-patch+json",  # type: ignore[call-arg]
                _request_timeout=REQUEST_SECONDS,
            )
        return dict(stored)

    # ------------------------------------------------------------------ watch

    async def watch(self, name: str) -> AsyncGenerator[Snapshot, None]:
        """A snapshot now, then one after every change of the object or one of its pods.

        Watches (not polls) the SitsDeployment by name and its pods by label, each renewed
        from its last resourceVersion and listed again when that expired (410).
        """
        first, pods_version = await self._read(name)
        seen = _Watched(
            first.obj,
            None if first.pods is None else {_name(p): p for p in first.pods},
            first.policy,
            first.notes,
        )
        yield first
        followers = [asyncio.create_task(self._follow_object(name, seen))]
        if seen.pods is not None:
            followers.append(asyncio.create_task(self._follow_pods(name, pods_version, seen)))
        policy = policy_name(first.obj)
        try:
            while True:
                await _next_change(seen.changed, followers)
                seen.changed.clear()
                if seen.obj is not None and policy_name(seen.obj) != policy:
                    policy = policy_name(seen.obj)
                    seen.policy, _ = await self._policy(seen.obj)
                gone = () if seen.obj is not None else (f"{name} was deleted; still watching",)
                pods = None if seen.pods is None else tuple(seen.pods.values())
                yield Snapshot(name, self.namespace, seen.obj, pods, seen.policy, seen.notes + gone)
        finally:
            for task in followers:
                task.cancel()
            await asyncio.gather(*followers, return_exceptions=True)

    async def _follow_object(self, name: str, seen: _Watched) -> None:
        custom = client.CustomObjectsApi(self.api)
        call = Call("watch", RESOURCE, self.namespace, name)
        selector = f"metadata.name={name}"
        version = str(((seen.obj or {}).get("metadata") or {}).get("resourceVersion", ""))

        def request(**kwargs: Any) -> Awaitable[Any]:
            return custom.list_namespaced_custom_object(
                API_GROUP, API_VERSION, self.namespace, PLURAL, field_selector=selector, **kwargs
            )

        while True:
            started = time.monotonic()
            try:
                async for kind, obj in self._events(request, version, call):
                    version = _version(obj) or version
                    if kind != BOOKMARK:
                        seen.obj = None if kind == DELETED else obj
                        seen.changed.set()
            except _GoneError:
                with self._calling(Call("list", RESOURCE, self.namespace)):
                    body = await _json(await request(_preload_content=False))
                items = body.get("items") or []
                seen.obj = items[0] if items else None
                version = str(body["metadata"].get("resourceVersion", ""))
                seen.changed.set()
            await _pace(started)

    async def _follow_pods(self, name: str, version: str, seen: _Watched) -> None:
        """Keep `seen.pods` current; a refused pod watch only stops showing pods."""
        try:
            await self._watch_pods(name, version, seen)
        except KubeError as exc:
            seen.pods = None
            seen.notes = (*seen.notes, f"pods not followed: {exc}".splitlines()[0])
            seen.changed.set()

    async def _watch_pods(self, name: str, version: str, seen: _Watched) -> None:
        core = client.CoreV1Api(self.api)
        call = Call("watch", "pods", self.namespace)
        selector = f"{LABEL_DEPLOYMENT}={name}"

        def request(**kwargs: Any) -> Awaitable[Any]:
            return core.list_namespaced_pod(self.namespace, label_selector=selector, **kwargs)

        while True:
            started = time.monotonic()
            try:
                async for kind, pod in self._events(request, version, call):
                    version = _version(pod) or version
                    if kind != BOOKMARK:
                        seen.pods = _applied(seen.pods or {}, kind, pod)
                        seen.changed.set()
            except _GoneError:
                listed, version = await self._list_pods(name, Call("list", "pods", self.namespace))
                seen.pods = {_name(p): p for p in listed}
                seen.changed.set()
            await _pace(started)

    async def _events(
        self, request: Callable[..., Awaitable[Any]], version: str, call: Call
    ) -> AsyncIterator[tuple[str, Obj]]:
        """(type, object) of one watch request until the server ends it; _Gone on 410."""
        with self._calling(call):
            response = await request(
                watch=True,
                resource_version=version,
                allow_watch_bookmarks=True,
                timeout_seconds=WATCH_SECONDS,
                _preload_content=False,
                _request_timeout=WATCH_TIMEOUT,
            )
            try:
                if not 200 <= response.status <= 299:
                    raise _api_error(response.status, str(response.reason), await response.read())
                buffer = b""
                # Whole chunks rather than readline(): an object's line can outgrow its limit.
                async for chunk in response.content.iter_any():
                    *lines, buffer = (buffer + chunk).split(b"\n")
                    for line in lines:
                        event = _event(line)
                        if event is not None:
                            yield event
            finally:
                response.release()

    @contextlib.contextmanager
    def _calling(self, call: Call) -> Iterator[None]:
        """API and connection errors of `call` as one KubeError paragraph."""
        try:
            yield
        except ApiException as exc:
            said = apiserver_message(exc.body, str(exc.reason or ""))
            raise KubeError(refusal(call, int(exc.status or 0), said, self.impersonating)) from exc
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise KubeError(f"cannot reach the apiserver at {self.host}: {exc}") from exc


async def _json(response: Any) -> dict[str, Any]:
    """A raw (not decoded) response: read, release, check by hand."""
    try:
        body = await response.read()
    finally:
        response.release()
    if not 200 <= response.status <= 299:
        raise _api_error(response.status, str(response.reason), body)
    parsed = json.loads(body)
    return parsed if isinstance(parsed, dict) else {}


def _api_error(status: int, reason: str, body: bytes) -> ApiException:
    """The ApiException a decoded call would raise, with the Status body for its message."""
    error = ApiException(status=status, reason=reason)
    error.body = body
    return error


def _event(line: bytes) -> tuple[str, Obj] | None:
    """One watch event line: (type, object); None for a blank line. A BOOKMARK only
    carries a newer resourceVersion to renew the watch from."""
    if not line.strip():
        return None
    event = json.loads(line)
    if not isinstance(event, dict) or "type" not in event:
        return None  # not a watch event (a proxy's answer?): nothing to apply
    kind, obj = str(event["type"]), event.get("object") or {}
    if kind == ERROR:
        if obj.get("code") == 410:
            raise _GoneError
        status = int(obj.get("code") or 500)
        raise _api_error(status, str(obj.get("reason")), json.dumps(obj).encode())
    return kind, obj


async def _next_change(changed: asyncio.Event, followers: list[asyncio.Task[None]]) -> None:
    """Wait for a change. A follower that failed ends the watch with its error; one that
    gave up (pods no longer watched) is dropped from `followers`."""
    waiter = asyncio.create_task(changed.wait())
    try:
        await asyncio.wait([waiter, *followers], return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    for task in [t for t in followers if t.done()]:
        task.result()  # raises the follower's KubeError
        followers.remove(task)


def _applied(pods: dict[str, Obj], kind: str, pod: Obj) -> dict[str, Obj]:
    """The pods after one watch event (a new dict: a snapshot keeps the old one)."""
    updated = dict(pods)
    if kind == DELETED:
        updated.pop(_name(pod), None)
    else:
        updated[_name(pod)] = pod
    return updated


async def _pace(started: float) -> None:
    """A watch the server ended at once (a proxy's timeout, an overloaded apiserver) is
    renewed at most once a second, never in a tight loop."""
    await asyncio.sleep(max(0.0, RENEW_SECONDS - (time.monotonic() - started)))


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _version(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion", ""))
