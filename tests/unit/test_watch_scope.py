"""Server-side watch scope (handlers/watching.py): the label selectors Kopf sends to the
apiserver for the child kinds, checked against the handlers' own filters and through
Kopf's real list and watch requests (its HTTP calls replaced by recorders)."""

from __future__ import annotations

import asyncio
import inspect
import urllib.parse
from collections.abc import AsyncIterator
from typing import Any

import kopf
import pytest
from kopf._cogs.clients import api as kopf_api
from kopf._cogs.clients import fetching as kopf_fetching
from kopf._cogs.clients import watching as kopf_watching
from prometheus_client import REGISTRY

from sits_operator.handlers import operator as handlers
from sits_operator.handlers.watching import (
    CHILD_RESOURCES,
    ENV_SWITCH,
    OWNED,
    SELECTED,
    child_filter,
    label_selector,
    matches,
    scope_watches,
    server_side_enabled,
)

MANAGED_BY = "app.kubernetes.io/managed-by=sits-operator"
DEPLOYMENT = "sits.dev/deployment"


def resource(group: str, version: str, plural: str, **extra: Any) -> kopf.Resource:
    return kopf.Resource(group, version, plural, **{"namespaced": True, **extra})


@pytest.mark.parametrize(
    ("labels", "selector"),
    [
        (OWNED, MANAGED_BY),
        (SELECTED, DEPLOYMENT),
        ({"b": "2", "a": "1"}, "a=1,b=2"),
        ({"gone": kopf.ABSENT}, "!gone"),
        ({"x": kopf.PRESENT, "y": "v", "z": kopf.ABSENT}, "x,y=v,!z"),
        ({}, ""),
    ],
)
def test_label_filters_become_the_apiservers_selectors(labels: Any, selector: str) -> None:
    assert label_selector(labels) == selector


def test_a_callable_filter_cannot_be_sent_to_the_server() -> None:
    with pytest.raises(TypeError, match="no server-side selector"):
        label_selector({"tier": lambda value, **_: value == "gpu"})


@pytest.mark.parametrize(
    ("labels", "actual", "expected"),
    [
        (OWNED, {"app.kubernetes.io/managed-by": "sits-operator"}, True),
        (OWNED, {"app.kubernetes.io/managed-by": "helm"}, False),  # a near miss
        (OWNED, {}, False),
        (SELECTED, {DEPLOYMENT: ""}, True),  # present, whatever its value
        (SELECTED, {DEPLOYMENT: "chat", "app": "x"}, True),
        (SELECTED, {"app": "x"}, False),
        ({"gone": kopf.ABSENT}, {}, True),
        ({"gone": kopf.ABSENT}, {"gone": "1"}, False),
    ],
)
def test_matches_decides_as_the_apiserver(labels: Any, actual: Any, expected: bool) -> None:
    assert matches(labels, actual) is expected


@pytest.mark.parametrize(
    ("env", "enabled"),
    [
        ({}, True),
        ({ENV_SWITCH: "1"}, True),
        ({ENV_SWITCH: "true"}, True),
        ({ENV_SWITCH: "0"}, False),
        ({ENV_SWITCH: "false"}, False),
        ({ENV_SWITCH: " Off "}, False),
    ],
)
def test_the_selectors_are_on_unless_switched_off(env: dict[str, str], enabled: bool) -> None:
    assert server_side_enabled(env) is enabled


def scoped_settings() -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    scope_watches(settings)
    return settings


@pytest.mark.parametrize(
    ("res", "selectors"),
    [
        (resource("apps", "v1", "deployments", kind="Deployment"), [MANAGED_BY]),
        (resource("", "v1", "services", kind="Service"), [MANAGED_BY]),
        (resource("", "v1", "serviceaccounts", kind="ServiceAccount"), [MANAGED_BY]),
        (resource("rbac.authorization.k8s.io", "v1", "roles"), [MANAGED_BY]),
        (resource("rbac.authorization.k8s.io", "v1", "rolebindings"), [MANAGED_BY]),
        (resource("policy", "v1", "poddisruptionbudgets"), [MANAGED_BY]),
        (resource("", "v1", "pods", kind="Pod", shortcuts=frozenset({"po"})), [DEPLOYMENT]),
        # Not children: everything of these still comes (the operator's own resources).
        (resource("sits.dev", "v1alpha1", "sitsdeployments"), []),
        (resource("sits.dev", "v1alpha1", "sitspolicies", namespaced=False), []),
        (resource("coordination.k8s.io", "v1", "leases"), []),
        (resource("", "v1", "namespaces", namespaced=False), []),
        (resource("", "v1", "events"), []),
        # Same plural in another group: metrics-server's PodMetrics are not pods.
        (resource("metrics.k8s.io", "v1beta1", "pods", kind="PodMetrics"), []),
        (resource("extensions", "v1beta1", "deployments"), []),
    ],
    ids=lambda value: repr(value) if isinstance(value, kopf.Resource) else None,
)
def test_each_child_kind_gets_its_selector_and_nothing_else_does(
    res: kopf.Resource, selectors: list[str]
) -> None:
    assert scoped_settings().watching.label_selectors.collect(res) == selectors


def test_switched_off_no_selector_is_sent() -> None:
    settings = kopf.OperatorSettings()
    scope_watches(settings, enabled=False)
    assert len(settings.watching.label_selectors) == 0


def test_child_filter_by_plural() -> None:
    assert child_filter("pods") is SELECTED
    assert child_filter("rolebindings") is OWNED
    with pytest.raises(KeyError):
        child_filter("secrets")


def child_handlers() -> list[tuple[tuple[str, str, str], str, Any]]:
    """(group, version, plural), handler name, labels filter of every handler the operator
    registers on a resource other than its own."""
    registry = kopf.get_default_registry()
    found = []
    for kind in (registry._indexing, registry._watching, registry._spawning, registry._changing):
        for handler in kind.get_all_handlers():
            selector = handler.selector
            if selector is None or selector.group == "sits.dev":
                continue
            key = (str(selector.group), str(selector.version), str(selector.any_name))
            found.append((key, getattr(handler.fn, "__name__", "?"), handler.labels))
    return found


def test_every_handler_on_a_child_kind_is_covered_by_the_server_side_selector() -> None:
    """A handler that needs objects without the operator's labels would get none of them
    from the scoped watch: the only label-less one is the counter of watch events."""
    found = child_handlers()
    assert {key for key, _, _ in found} == set(CHILD_RESOURCES)
    for key, name, labels in found:
        if name == "count_watch_event":
            assert labels is None, "the counter must see what arrives, selected or not"
        else:
            assert labels == CHILD_RESOURCES[key], f"{name} on {key}"
    for key in CHILD_RESOURCES:  # each kind feeds an index or a wake-up, and is counted
        names = {name for k, name, _ in found if k == key}
        assert "count_watch_event" in names
        assert names & {"child_objects", "child_deployments", "child_pods", "wake_parent"}


def counted(plural: str, selected: str) -> float:
    value = REGISTRY.get_sample_value(
        "sits_operator_watch_events_total", {"resource": plural, "selected": selected}
    )
    return value or 0.0


@pytest.mark.parametrize(
    ("plural", "labels", "selected"),
    [
        ("pods", {DEPLOYMENT: "chat"}, "true"),
        ("pods", {"app": "unrelated"}, "false"),
        ("services", {"app.kubernetes.io/managed-by": "sits-operator"}, "true"),
        ("services", {"app.kubernetes.io/managed-by": "helm"}, "false"),
    ],
)
def test_the_counter_tells_selected_from_unrelated_objects(
    plural: str, labels: dict[str, str], selected: str
) -> None:
    before = counted(plural, selected)
    count: Any = handlers.count_watch_event  # as Kopf calls it, with the kwargs it reads
    asyncio.run(count(resource=resource("", "v1", plural), labels=labels))
    assert counted(plural, selected) == before + 1


def test_every_handler_runs_on_the_event_loop() -> None:
    """Kopf runs a plain function in its thread pool: one thread hop per watch event, and
    `Wakeups` would set asyncio.Events from a worker thread, where the loop is not woken.
    So every handler the operator registers must be a coroutine function (Kopf's registry
    has no public listing; its per-kind registries are read here)."""
    registry = kopf.get_default_registry()
    kinds = (registry._indexing, registry._watching, registry._spawning, registry._activities)
    registered: list[Any] = [h.fn for kind in kinds for h in kind.get_all_handlers()]
    names = {fn.__name__ for fn in registered}
    assert {"child_pods", "wake_parent", "count_watch_event", "reconcile_loop"} <= names
    assert [fn.__name__ for fn in registered if not inspect.iscoroutinefunction(fn)] == []


# Kopf's own request path, with its HTTP calls recorded instead of sent.


class Recorder:
    """Answers Kopf's list with no items at resourceVersion 7, and its watches with the
    scripted streams in turn (then empty ones: the server closed them at once)."""

    def __init__(self) -> None:
        self.urls: list[str] = []
        self.streams: list[list[dict[str, Any]]] = []

    async def get(self, url: str, **_: Any) -> dict[str, Any]:
        self.urls.append(url)
        return {"items": [], "metadata": {"resourceVersion": "7", "continue": ""}}

    async def stream(self, url: str, **_: Any) -> AsyncIterator[dict[str, Any]]:
        self.urls.append(url)
        for event in self.streams.pop(0) if self.streams else []:
            yield event

    def query(self, index: int) -> dict[str, list[str]]:
        return urllib.parse.parse_qs(urllib.parse.urlsplit(self.urls[index]).query)

    def path(self, index: int) -> str:
        return urllib.parse.urlsplit(self.urls[index]).path


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    monkeypatch.setattr(kopf_api, "get", recorder.get)
    monkeypatch.setattr(kopf_api, "stream", recorder.stream)
    return recorder


@pytest.mark.parametrize(
    ("namespace", "path"),
    [
        (None, "/api/v1/pods"),  # cluster-wide install
        ("team-a", "/api/v1/namespaces/team-a/pods"),  # --namespace: one watch per namespace
    ],
)
async def test_kopf_lists_and_watches_pods_with_the_selector(
    recorder: Recorder, namespace: Any, path: str
) -> None:
    settings = scoped_settings()
    pods = resource("", "v1", "pods", kind="Pod")
    logger = kopf_watching.logger
    async for _ in kopf_fetching.fetch_objs(
        settings=settings, resource=pods, namespace=namespace, logger=logger
    ):
        pass
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    async for _ in kopf_watching.watch_objs(
        settings=settings,
        resource=pods,
        namespace=namespace,
        since="7",
        operator_pause_waiter=waiter,
    ):
        pass
    waiter.cancel()
    assert [recorder.path(0), recorder.path(1)] == [path, path]
    listing, watching = recorder.query(0), recorder.query(1)
    assert listing["labelSelector"] == [DEPLOYMENT]
    assert watching["labelSelector"] == [DEPLOYMENT]
    assert watching["watch"] == ["true"]
    assert watching["resourceVersion"] == ["7"]  # continues from the list


async def test_kopf_lists_owned_kinds_with_the_managed_by_selector(recorder: Recorder) -> None:
    settings = scoped_settings()
    for group, version, plural in CHILD_RESOURCES:
        async for _ in kopf_fetching.fetch_objs(
            settings=settings,
            resource=resource(group, version, plural),
            namespace=None,
            logger=kopf_watching.logger,
        ):
            pass
    selectors = [recorder.query(i)["labelSelector"][0] for i in range(len(CHILD_RESOURCES))]
    expected = [label_selector(labels) for labels in CHILD_RESOURCES.values()]
    assert selectors == expected


async def test_switched_off_kopf_lists_everything(recorder: Recorder) -> None:
    settings = kopf.OperatorSettings()
    scope_watches(settings, enabled=False)
    async for _ in kopf_fetching.fetch_objs(
        settings=settings,
        resource=resource("", "v1", "pods"),
        namespace=None,
        logger=kopf_watching.logger,
    ):
        pass
    assert "labelSelector" not in recorder.query(0)


def pod_event(kind: str, version: str) -> dict[str, Any]:
    meta = {"name": "p", "namespace": "ns", "resourceVersion": version}
    return {"type": kind, "object": {"metadata": meta}}


async def test_after_410_gone_kopf_relists_with_the_selector(recorder: Recorder) -> None:
    """The watch continues from the last resourceVersion seen (a bookmark's too); when the
    apiserver has compacted it (410 Gone) Kopf lists again: scoped like the first list."""
    settings = scoped_settings()
    pods = resource("", "v1", "pods")
    recorder.streams = [
        [
            pod_event("ADDED", "8"),
            {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "9"}}},
            pod_event("DELETED", "10"),
        ],
        [{"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}],
    ]
    waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    seen: list[Any] = []
    for _ in range(2):  # what kopf's infinite_watch does after each return
        async for event in kopf_watching.continuous_watch(
            settings=settings, resource=pods, namespace=None, operator_pause_waiter=waiter
        ):
            seen.append(event if isinstance(event, kopf_watching.Bookmark) else event["type"])
            if len(recorder.urls) == 4:  # the second list's watch: enough
                waiter.set_result(None)
    kinds = [recorder.query(i).get("watch", ["list"])[0] for i in range(4)]
    assert kinds == ["list", "true", "true", "list"]
    assert [recorder.query(i)["labelSelector"] for i in range(4)] == [[DEPLOYMENT]] * 4
    versions = [recorder.query(i).get("resourceVersion") for i in range(4)]
    assert versions == [None, ["7"], ["10"], None]  # from the list, then from the last event
    listed = kopf_watching.Bookmark.LISTED
    assert seen[:4] == [listed, "ADDED", "BOOKMARK", "DELETED"]
