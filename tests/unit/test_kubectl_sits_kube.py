"""sits_kubectl.kube against a fake apiserver on loopback: the HTTP the plugin really sends.

The fake speaks just enough of the Kubernetes API (the paths, Status bodies, watch
streams of JSON lines, 410 Gone) to check what no screen test can: the kubeconfig's
context and namespace, the token and impersonation headers, the merge patch of one
annotation, refusals in RBAC's terms, and a watch that follows changes and re-lists
after its resourceVersion expired.
"""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import pytest

from sits_kubectl.connection import Connection
from sits_kubectl.kube import KubeError, Session, open_session
from sits_operator.core.naming import LABEL_DEPLOYMENT
from sits_operator.model.analysis import Command, command_annotation
from sits_operator.model.spec import API_GROUP, API_VERSION, PLURAL
from tests.unit.kubectl_sits_apiserver import BASE, NS, FakeApiserver, changed
from tests.unit.kubectl_sits_apiserver import apiserver as apiserver  # the fixture


async def session(kubeconfig: Path, **flags: str) -> Session:
    return await open_session(Connection(kubeconfig=str(kubeconfig), **flags))


async def test_context_namespace_token_and_a_read(
    apiserver: tuple[FakeApiserver, Path],
) -> None:
    fake, kubeconfig = apiserver
    s = await session(kubeconfig)
    try:
        assert s.namespace == NS  # the context's
        found = await s.read("chat")
    finally:
        await s.close()
    assert found.obj == fake.obj
    assert found.pods is not None
    assert len(found.pods) == len(fake.pods)
    assert found.policy == fake.policy
    assert found.notes == ()
    assert {h["Authorization"] for h in fake.headers} == {"Bearer s3cret"}
    assert {"labelSelector": f"{LABEL_DEPLOYMENT}=chat"} in fake.queries


async def test_flags_choose_context_namespace_and_identity(
    apiserver: tuple[FakeApiserver, Path],
) -> None:
    fake, kubeconfig = apiserver
    bare = await session(kubeconfig, context="bare")
    assert bare.namespace == "default"
    await bare.close()
    s = await session(kubeconfig, context="bare", namespace=NS, as_user="jane", as_group="sre")
    try:
        await s.get_object("chat")
    finally:
        await s.close()
    assert fake.headers[-1]["Impersonate-User"] == "jane"
    assert fake.headers[-1]["Impersonate-Group"] == "sre"


async def test_unknown_context_and_missing_kubeconfig_are_one_line_errors(
    apiserver: tuple[FakeApiserver, Path], tmp_path: Path
) -> None:
    _, kubeconfig = apiserver
    with pytest.raises(KubeError, match="cannot use context 'nope' of kubeconfig"):
        await session(kubeconfig, context="nope")
    with pytest.raises(KubeError, match="no kubeconfig at"):
        await session(tmp_path / "absent")


async def test_annotate_is_a_merge_patch_of_one_annotation(
    apiserver: tuple[FakeApiserver, Path],
) -> None:
    fake, kubeconfig = apiserver
    before = copy.deepcopy(fake.obj)
    s = await session(kubeconfig)
    try:
        stored = await s.annotate("chat", Command.ABORT, "2026-05-28T20:29:31.000001Z")
    finally:
        await s.close()
    key = command_annotation(Command.ABORT)
    patch = {"metadata": {"annotations": {key: "2026-05-28T20:29:31.000001Z"}}}
    assert fake.patches == [("application/merge-patch+json", patch)]
    assert stored["metadata"]["annotations"][key] == "2026-05-28T20:29:31.000001Z"
    assert stored["spec"] == before["spec"]
    assert stored["status"] == before["status"]


async def test_a_refused_patch_names_the_verb_and_resource(
    apiserver: tuple[FakeApiserver, Path],
) -> None:
    fake, kubeconfig = apiserver
    fake.forbidden.add(("PATCH", BASE))
    s = await session(kubeconfig, as_user="jane")
    try:
        with pytest.raises(KubeError) as refused:
            await s.annotate("chat", Command.PAUSE, "v")
    finally:
        await s.close()
    text = str(refused.value)
    assert f'Forbidden: you (as jane) may not patch {PLURAL}.{API_GROUP} "chat"' in text
    assert 'User "jane" cannot do that' in text
    assert f"kubectl auth can-i patch {PLURAL}.{API_GROUP}/chat -n {NS} --as jane" in text


async def test_a_missing_object_is_not_found(apiserver: tuple[FakeApiserver, Path]) -> None:
    _, kubeconfig = apiserver
    s = await session(kubeconfig)
    try:
        with pytest.raises(KubeError, match=f'Not found: {PLURAL}.{API_GROUP} "nope"'):
            await s.read("nope")
    finally:
        await s.close()


async def test_unreadable_pods_and_policy_leave_notes_not_errors(
    apiserver: tuple[FakeApiserver, Path],
) -> None:
    fake, kubeconfig = apiserver
    fake.forbidden |= {
        ("GET", f"/api/v1/namespaces/{NS}/pods"),
        ("GET", f"/apis/{API_GROUP}/{API_VERSION}/sitspolicies"),
    }
    s = await session(kubeconfig)
    try:
        found = await s.read("chat")
    finally:
        await s.close()
    assert found.obj == fake.obj
    assert found.pods is None
    assert found.policy is None
    assert found.notes == (
        f'pods not shown: Forbidden: you may not list pods in namespace "{NS}".',
        f"SitsPolicy sits2026 not shown: Forbidden: you may not get sitspolicies.{API_GROUP} "
        '"sits2026" (cluster-wide).',
    )


async def watched(s: Session, count: int) -> list[str]:
    phases = []
    async with asyncio.timeout(10):
        stream = s.watch("chat")
        async for found in stream:
            phases.append(str((found.obj or {}).get("status", {}).get("phase")))
            if len(phases) == count:
                break
        await stream.aclose()
    return phases


async def test_watch_follows_the_object_from_its_resource_version(
    apiserver: tuple[FakeApiserver, Path],
) -> None:
    fake, kubeconfig = apiserver
    fake.object_watches = [
        [
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "4712"}}},
            {"type": "MODIFIED", "object": changed(fake.obj, "Paused", "4713")},
        ]
    ]
    s = await session(kubeconfig)
    try:
        assert await watched(s, 2) == ["Progressing", "Paused"]
    finally:
        await s.close()
    watches = [q for q in fake.queries if q.get("watch", "").lower() == "true"]
    objects = [q for q in watches if q.get("fieldSelector") == "metadata.name=chat"]
    assert objects[0]["resourceVersion"] == fake.obj["metadata"]["resourceVersion"]


async def test_watch_renews_from_the_last_version_it_saw(
    apiserver: tuple[FakeApiserver, Path],
) -> None:
    fake, kubeconfig = apiserver
    fake.object_watches = [
        [{"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "4712"}}}],
        [{"type": "MODIFIED", "object": changed(fake.obj, "Paused", "4713")}],
    ]
    s = await session(kubeconfig)
    try:
        assert await watched(s, 2) == ["Progressing", "Paused"]
    finally:
        await s.close()
    objects = [q for q in fake.queries if q.get("fieldSelector") == "metadata.name=chat"]
    assert [q["resourceVersion"] for q in objects][:2] == ["4711", "4712"]


async def test_watch_lists_again_when_its_version_expired(
    apiserver: tuple[FakeApiserver, Path],
) -> None:
    fake, kubeconfig = apiserver
    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "reason": "Expired"}}
    fake.object_watches = [[gone]]
    fake.listed = changed(fake.obj, "RolledBack", "950")
    s = await session(kubeconfig)
    try:
        assert await watched(s, 2) == ["Progressing", "RolledBack"]
    finally:
        await s.close()
    assert {"fieldSelector": "metadata.name=chat"} in fake.queries  # the list after the 410


async def test_a_refused_watch_ends_with_the_refusal(
    apiserver: tuple[FakeApiserver, Path],
) -> None:
    fake, kubeconfig = apiserver
    s = await session(kubeconfig)
    try:
        stream = s.watch("chat")
        await stream.__anext__()  # read; the watches start when the next one is asked for
        fake.forbidden.add(("GET", BASE))
        with pytest.raises(KubeError, match=f'may not watch {PLURAL}.{API_GROUP} "chat"'):
            async with asyncio.timeout(10):
                await stream.__anext__()
        await stream.aclose()
    finally:
        await s.close()


async def test_a_refused_pod_watch_only_stops_showing_pods(
    apiserver: tuple[FakeApiserver, Path],
) -> None:
    fake, kubeconfig = apiserver
    s = await session(kubeconfig)
    try:
        stream = s.watch("chat")
        first = await stream.__anext__()
        assert first.pods
        fake.forbidden.add(("GET", f"/api/v1/namespaces/{NS}/pods"))
        fake.object_watches = [[{"type": "MODIFIED", "object": changed(fake.obj, "Paused", "9")}]]
        async with asyncio.timeout(10):
            latest = await stream.__anext__()
            while latest.pods is not None or (latest.obj or {})["status"]["phase"] != "Paused":
                latest = await stream.__anext__()
        await stream.aclose()
    finally:
        await s.close()
    refused = f'pods not followed: Forbidden: you may not watch pods in namespace "{NS}".'
    assert latest.notes == (refused,)
