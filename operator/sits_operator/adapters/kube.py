"""Writes to the Kubernetes API: server-side apply of children, deletes, status patches.

Reads come from Kopf's watch caches (indexes) in the handlers layer; this adapter only
writes. One Protocol, a real implementation on kubernetes_asyncio (shares Kopf's event
loop, no threads), a no-op implementation that records calls, and a factory.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypeAlias

from kubernetes_asyncio import client, config
from kubernetes_asyncio.client.exceptions import ApiException

from sits_operator.model.events import EventReason
from sits_operator.model.spec import API_GROUP, API_VERSION, PLURAL

APPLY = "application/apply-patch+yaml"
MERGE = "application/merge-patch+json"
# A RoleBinding refused with 404 just after its Role was applied: tries, and the first wait
# (doubled, then tripled: 0.25 + 0.5 + 0.75 s at most).
ROLE_BINDING_ATTEMPTS = 4
ROLE_BINDING_RETRY_SECONDS = 0.25
sleep = asyncio.sleep  # a module attribute, so tests wait in simulated time

Manifest = dict[str, Any]
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")

# The client's connection and its error under this adapter's names: the handlers hold an
# ApiClient and catch KubeApiError without importing kubernetes_asyncio (import-linter,
# "Only the adapters import the API clients").
ApiClient: TypeAlias = client.ApiClient
KubeApiError = ApiException


class KubeWriter(Protocol):
    async def apply(self, manifest: Manifest) -> None:
        """Server-side apply under the operator's field manager (force: we own these)."""

    async def delete(self, *, kind: str, namespace: str, name: str) -> None:
        """Delete a child; a child that is already gone is not an error."""

    async def patch_status(self, *, namespace: str, name: str, status: dict[str, Any]) -> None:
        """Merge-patch the SitsDeployment's status subresource."""


@dataclass
class NoopKubeWriter:
    """Writes nothing; records what would have been written (dry runs, tests)."""

    calls: list[tuple[str, Any]] = field(default_factory=list)

    async def apply(self, manifest: Manifest) -> None:
        self.calls.append(("apply", manifest))

    async def delete(self, *, kind: str, namespace: str, name: str) -> None:
        self.calls.append(("delete", (kind, namespace, name)))

    async def patch_status(self, *, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.calls.append(("status", (namespace, name, status)))


async def _check(response: Any) -> None:
    """Raw responses (no model decoding) must be read, released, and checked by hand."""
    body = await response.read()
    response.release()
    if not 200 <= response.status <= 299:
        raise ApiException(status=response.status, reason=f"{response.reason}: {body[:300]!r}")


class ApiKubeWriter:
    """The real writer. Typed APIs for the few kinds the operator owns."""

    def __init__(self, api_client: client.ApiClient, *, field_manager: str) -> None:
        apps, core = client.AppsV1Api(api_client), client.CoreV1Api(api_client)
        rbac, policy = client.RbacAuthorizationV1Api(api_client), client.PolicyV1Api(api_client)
        self._custom = client.CustomObjectsApi(api_client)
        self._field_manager = field_manager
        # kind -> (patch, delete) of the typed API; the gateway's kinds (core/gateway.py)
        # beside the variants' Deployments and Services.
        self._calls: dict[str, tuple[Any, Any]] = {
            "Deployment": (apps.patch_namespaced_deployment, apps.delete_namespaced_deployment),
            "Service": (core.patch_namespaced_service, core.delete_namespaced_service),
            "ServiceAccount": (
                core.patch_namespaced_service_account,
                core.delete_namespaced_service_account,
            ),
            "Role": (rbac.patch_namespaced_role, rbac.delete_namespaced_role),
            "RoleBinding": (
                rbac.patch_namespaced_role_binding,
                rbac.delete_namespaced_role_binding,
            ),
            "PodDisruptionBudget": (
                policy.patch_namespaced_pod_disruption_budget,
                policy.delete_namespaced_pod_disruption_budget,
            ),
        }

    def _call(self, kind: str, which: int) -> Any:
        if kind not in self._calls:
            raise ValueError(f"the operator does not own objects of kind {kind}")
        return self._calls[kind][which]

    async def apply(self, manifest: Manifest) -> None:
        # A RoleBinding applied right after its Role can be refused with 404 while the
        # apiserver's RBAC cache has not seen the Role yet (the escalation check looks it
        # up there): a moment later it is accepted. Retry that briefly instead of failing
        # the pass with a Warning event.
        attempts = ROLE_BINDING_ATTEMPTS if manifest["kind"] == "RoleBinding" else 1
        for attempt in range(1, attempts + 1):
            try:
                await self._apply_once(manifest)
                return
            except ApiException as exc:
                if exc.status != 404 or attempt == attempts:
                    raise
                await sleep(ROLE_BINDING_RETRY_SECONDS * attempt)

    async def _apply_once(self, manifest: Manifest) -> None:
        meta = manifest["metadata"]
        patch = self._call(manifest["kind"], 0)
        response = await patch(
            meta["name"],
            meta["namespace"],
            manifest,
            field_manager=self._field_manager,
            force=True,
            _content_type=APPLY,
            _preload_content=False,  # the response is not needed: skip model decoding
        )
        await _check(response)

    async def delete(self, *, kind: str, namespace: str, name: str) -> None:
        delete = self._call(kind, 1)
        try:
            # Background: the Deployment's ReplicaSets and pods go after it, not before.
            await delete(name, namespace, propagation_policy="Background")
        except ApiException as exc:
            if exc.status != 404:
                raise

    async def patch_status(self, *, namespace: str, name: str, status: dict[str, Any]) -> None:
        await self._custom.patch_namespaced_custom_object_status(
            API_GROUP,
            API_VERSION,
            namespace,
            PLURAL,
            name,
            {"status": status},
            _content_type=MERGE,  # type: ignore[call-arg]  # accepted via **kwargs at run time
        )


async def api_client_from_environment(kubeconfig: str | None = None) -> client.ApiClient:
    """In-cluster service account when running in a pod, else the given or default kubeconfig."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    return client.ApiClient(configuration)


def make_kube_writer(api_client: client.ApiClient | None, *, field_manager: str) -> KubeWriter:
    """Factory: no client means dry run."""
    if api_client is None:
        return NoopKubeWriter()
    return ApiKubeWriter(api_client, field_manager=field_manager)


def operator_namespace(
    env: Mapping[str, str] | None = None, namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE
) -> str | None:
    """The operator's own namespace: POD_NAMESPACE (the chart's downward API), else the
    service account's namespace file; None outside a pod with neither."""
    env = os.environ if env is None else env
    namespace = env.get("POD_NAMESPACE") or ""
    if not namespace:
        with contextlib.suppress(OSError):
            namespace = namespace_file.read_text().strip()
    return namespace or None


async def create_event(
    api_client: client.ApiClient,
    *,
    obj: dict[str, Any],
    type_: str,
    reason: EventReason,
    message: str,
) -> None:
    """A core/v1 Event on `obj`, for code that runs outside Kopf's handlers (webhooks)."""
    import datetime
    import uuid

    meta = obj["metadata"]
    now = datetime.datetime.now(datetime.UTC)
    event = client.CoreV1Event(
        metadata=client.V1ObjectMeta(
            name=f"{meta['name']}.{uuid.uuid4().hex[:12]}", namespace=meta["namespace"]
        ),
        involved_object=client.V1ObjectReference(
            api_version=obj["apiVersion"],
            kind=obj["kind"],
            name=meta["name"],
            namespace=meta["namespace"],
            uid=meta["uid"],
        ),
        type=type_,
        reason=reason,
        message=message[:1024],
        first_timestamp=now,
        last_timestamp=now,
        count=1,
        source=client.V1EventSource(component="sits-operator"),
    )
    await client.CoreV1Api(api_client).create_namespaced_event(meta["namespace"], event)
