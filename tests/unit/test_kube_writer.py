"""The real writer's one retry: a RoleBinding refused with 404 just after its Role."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sits_operator.adapters import kube


class Response:
    def __init__(self, status: int) -> None:
        self.status, self.reason = status, "Not Found" if status == 404 else "OK"

    async def read(self) -> bytes:
        return b"{}"

    def release(self) -> None:
        pass


@pytest.fixture
async def api_client() -> AsyncIterator[client.ApiClient]:
    api = client.ApiClient()
    yield api
    await api.close()


def writer(
    api_client: client.ApiClient, statuses: list[int], kind: str
) -> tuple[kube.ApiKubeWriter, list[str]]:
    """A writer whose typed patch for `kind` answers `statuses` in turn."""
    api = kube.ApiKubeWriter(api_client, field_manager="sits-test")
    seen: list[str] = []

    async def patch(name: str, namespace: str, body: Any, **_: Any) -> Response:
        seen.append(name)
        return Response(statuses[len(seen) - 1])

    api._calls[kind] = (patch, None)
    return api, seen


def manifest(kind: str) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": "chat-gateway", "namespace": "ns"}}


@pytest.fixture
def sleeps(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    waited: list[float] = []

    async def sleep(seconds: float) -> None:
        waited.append(seconds)

    monkeypatch.setattr(kube, "sleep", sleep)
    return waited


async def test_a_role_binding_refused_with_404_is_retried(
    api_client: client.ApiClient, sleeps: list[float]
) -> None:
    api, seen = writer(api_client, [404, 404, 200], "RoleBinding")
    await api.apply(manifest("RoleBinding"))
    assert len(seen) == 3
    assert sleeps == [0.25, 0.5]


async def test_a_role_binding_still_refused_fails_after_the_last_attempt(
    api_client: client.ApiClient, sleeps: list[float]
) -> None:
    api, seen = writer(api_client, [404] * kube.ROLE_BINDING_ATTEMPTS, "RoleBinding")
    with pytest.raises(ApiException) as error:
        await api.apply(manifest("RoleBinding"))
    assert error.value.status == 404
    assert len(seen) == kube.ROLE_BINDING_ATTEMPTS


@pytest.mark.parametrize(("kind", "status"), [("Deployment", 404), ("RoleBinding", 403)])
async def test_nothing_else_is_retried(
    api_client: client.ApiClient, sleeps: list[float], kind: str, status: int
) -> None:
    api, seen = writer(api_client, [status, 200], kind)
    with pytest.raises(ApiException):
        await api.apply(manifest(kind))
    assert (len(seen), sleeps) == (1, [])
