"""Kopf registrations. Thin: each handler hands over to the reconciler or an index.

Design: one daemon per SitsDeployment runs a level-triggered loop (reconcile, then
sleep until a watch event of the object or one of its children, or the resync period).
Children are read from Kopf indexes, which Kopf fills completely before any daemon
starts, so a restarted operator sees every existing child and writes nothing. Their watches
carry label selectors (handlers/watching.py): the apiserver sends only the children.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from typing import Any

import kopf

from sits_operator.adapters.gateway import make_gateway_reader
from sits_operator.adapters.kube import (
    KubeApiError,
    api_client_from_environment,
    make_kube_writer,
)
from sits_operator.adapters.routers import make_router
from sits_operator.adapters.settings import settings_from_env
from sits_operator.core import observe
from sits_operator.handlers.alerts import start_alert_server
from sits_operator.handlers.analysis import Analyzer
from sits_operator.handlers.leadership import (
    FOLLOWER_RECHECK_SECONDS,
    LeaderOnlyWriter,
    Leadership,
    NotLeaderError,
    leader_only_poster,
    leader_only_routers,
    start_leadership,
)
from sits_operator.handlers.metrics import WATCH_EVENTS, observe_lag
from sits_operator.handlers.notifications import notifying_poster, start_notifier
from sits_operator.handlers.reconcile import Reconciler, post_event
from sits_operator.handlers.wakeups import Wakeups
from sits_operator.handlers.watching import (
    OWNED,
    SELECTED,
    child_filter,
    matches,
    scope_watches,
    server_side_enabled,
)
from sits_operator.model.events import EventReason
from sits_operator.model.spec import API_GROUP, API_VERSION, PLURAL

log = logging.getLogger("sits_operator")
WAKEUPS = Wakeups()
# Coalesce bursts (a rollout's pods turn ready one by one) into fewer status writes.
DEBOUNCE_SECONDS = 0.5


def loop_time() -> float:
    return asyncio.get_running_loop().time()


ERROR_BACKOFF_SECONDS = 5.0


@kopf.on.startup()
async def configure(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    """Annotations instead of status for Kopf's bookkeeping; our own finalizer name."""
    settings.persistence.finalizer = "sits.dev/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="sits.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="sits.dev")
    # Our own events are explicit (kopf.event); do not turn every "handler succeeded"
    # log line of every watched pod into an Event.
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 300
    # The apiserver sends only the operator's children (handlers/watching.py), not every
    # Pod, Deployment, Service... of the cluster; set before Kopf's watchers start.
    scope_watches(settings, enabled=server_side_enabled())
    operator_settings = settings_from_env()
    api = await api_client_from_environment()
    memo["api"] = api
    # Only the leader writes (handlers/leadership.py): every writer below is guarded.
    leadership = memo["leadership"] = start_leadership(api, settings, on_leading=WAKEUPS.wake_all)
    may_act = leadership.guard()
    # Webhooks hear of every decision and phase change (handlers/notifications.py).
    notifier = memo["notifier"] = await start_notifier(operator_settings.notifications)
    post = post_event if notifier is None else notifying_poster(post_event, notifier)
    memo["reconciler"] = Reconciler(
        writer=LeaderOnlyWriter(
            make_kube_writer(api, field_manager=operator_settings.field_manager), may_act
        ),
        settings=operator_settings,
        analyzer=Analyzer(
            api,
            router_factory=leader_only_routers(
                may_act,
                functools.partial(make_router, field_manager=operator_settings.field_manager),
            ),
        ),
        gateway_reader=make_gateway_reader(True),
        post=leader_only_poster(post, may_act),
    )
    address = os.environ.get("SITS_ALERT_WEBHOOK_ADDRESS", "")
    if address:
        # Namespaced (--namespace): alerts about other namespaces are not this operator's.
        watched = tuple(memo.get("watch_namespaces") or ())
        memo["alerts"] = await start_alert_server(api, address, namespaces=watched)
    log.info("sits-operator started (field manager %s)", operator_settings.field_manager)


@kopf.on.cleanup()
async def close(memo: kopf.Memo, **_: Any) -> None:
    if "leadership" in memo:  # stop acting, then hand the Lease over at once
        await memo["leadership"].stop()
    if memo.get("notifier") is not None:  # drains what is queued, within its bound
        await memo["notifier"].close()
    if "alerts" in memo:
        await memo["alerts"].cleanup()
    await memo["api"].close()


# Every watch and index handler is a coroutine. Kopf runs plain functions in its thread
# pool: each watch event would cost a thread hop, and `Wakeups` sets asyncio.Events, which
# is not thread-safe (from a worker thread the loop is not woken to run the waiter).
@kopf.index("apps", "v1", "deployments", labels=OWNED)
async def child_deployments(
    *, namespace: str | None, meta: kopf.Meta, labels: kopf.Labels, status: kopf.Status, **_: Any
) -> Any:
    key = observe.parent_key(namespace, labels)
    return {key: observe.deployment_entry(meta, labels, status)} if key else None


# Every kind the operator applies (core/render.py, core/gateway.py): the plan deletes an
# indexed child that is no longer rendered (e.g. the gateway's, when the router changes).
CHILD_KINDS = {
    "deployments": "Deployment",
    "services": "Service",
    "serviceaccounts": "ServiceAccount",
    "roles": "Role",
    "rolebindings": "RoleBinding",
    "poddisruptionbudgets": "PodDisruptionBudget",
}


@kopf.index("apps", "v1", "deployments", labels=OWNED)
@kopf.index("", "v1", "services", labels=OWNED)
@kopf.index("", "v1", "serviceaccounts", labels=OWNED)
@kopf.index("rbac.authorization.k8s.io", "v1", "roles", labels=OWNED)
@kopf.index("rbac.authorization.k8s.io", "v1", "rolebindings", labels=OWNED)
@kopf.index("policy", "v1", "poddisruptionbudgets", labels=OWNED)
async def child_objects(
    *,
    namespace: str | None,
    meta: kopf.Meta,
    labels: kopf.Labels,
    resource: kopf.Resource,
    **_: Any,
) -> Any:
    key = observe.parent_key(namespace, labels)
    kind = CHILD_KINDS[resource.plural]
    return {key: observe.child_entry(kind, meta, labels)} if key else None


@kopf.index("", "v1", "pods", labels=SELECTED)
async def child_pods(
    *,
    namespace: str | None,
    name: str,
    labels: kopf.Labels,
    spec: kopf.Spec,
    status: kopf.Status,
    **_: Any,
) -> Any:
    key = observe.parent_key(namespace, labels)
    return {key: observe.pod_entry(name, labels, spec, status)} if key else None


@kopf.index(API_GROUP, API_VERSION, "sitspolicies")
async def policies(*, name: str, spec: kopf.Spec, **_: Any) -> Any:
    return {name: dict(spec)}


@kopf.on.event(API_GROUP, API_VERSION, "sitspolicies")
async def wake_on_policy_change(**_: Any) -> None:
    """A policy change may change the interval or rules of every rollout using it."""
    WAKEUPS.wake_all()


@kopf.on.event("apps", "v1", "deployments", labels=OWNED)
@kopf.on.event("", "v1", "services", labels=OWNED)
@kopf.on.event("", "v1", "serviceaccounts", labels=OWNED)
@kopf.on.event("rbac.authorization.k8s.io", "v1", "roles", labels=OWNED)
@kopf.on.event("rbac.authorization.k8s.io", "v1", "rolebindings", labels=OWNED)
@kopf.on.event("policy", "v1", "poddisruptionbudgets", labels=OWNED)
@kopf.on.event("", "v1", "pods", labels=SELECTED)
async def wake_parent(*, namespace: str | None, labels: kopf.Labels, **_: Any) -> None:
    key = observe.parent_key(namespace, labels)
    if key is not None:
        WAKEUPS.wake(key)


# No label filter on purpose: counts whatever the watches deliver, selected or not.
@kopf.on.event("apps", "v1", "deployments")
@kopf.on.event("", "v1", "services")
@kopf.on.event("", "v1", "serviceaccounts")
@kopf.on.event("rbac.authorization.k8s.io", "v1", "roles")
@kopf.on.event("rbac.authorization.k8s.io", "v1", "rolebindings")
@kopf.on.event("policy", "v1", "poddisruptionbudgets")
@kopf.on.event("", "v1", "pods")
async def count_watch_event(*, resource: kopf.Resource, labels: kopf.Labels, **_: Any) -> None:
    selected = matches(child_filter(resource.plural), labels)
    WATCH_EVENTS.labels(resource.plural, "true" if selected else "false").inc()


@kopf.on.event(API_GROUP, API_VERSION, PLURAL)
async def wake_self(*, namespace: str | None, name: str, **_: Any) -> None:
    if namespace is not None:
        WAKEUPS.wake((namespace, name))


@kopf.daemon(API_GROUP, API_VERSION, PLURAL, cancellation_timeout=2.0)
async def reconcile_loop(
    *,
    stopped: kopf.DaemonStopped,
    body: kopf.Body,
    namespace: str | None,
    name: str,
    memo: Any,
    **kwargs: Any,
) -> None:
    """Level-triggered loop for one SitsDeployment; never dies on a transient error.

    Acts only while `leadership.may_act()` (handlers/leadership.py); a follower's loop
    keeps sleeping and re-checking, and every write is guarded again where it is made."""
    reconciler: Reconciler = memo["reconciler"]
    leadership: Leadership = memo["leadership"]
    if namespace is None:  # the CRD is namespaced; Kopf types allow cluster objects
        return
    key = (namespace, name)
    WAKEUPS.event_for(key)
    log.info("reconcile loop started for %s/%s", namespace, name)
    analysis_due_at = 0.0  # analyse on the first pass
    acting_term: int | None = None  # the leadership term of this loop's last pass
    try:
        while not stopped:
            WAKEUPS.event_for(key).clear()
            if not leadership.may_act():  # a follower: caches stay warm, nothing is written
                if acting_term is not None:  # just stepped down: its memory and gauges go
                    reconciler.forget(namespace, name)
                    acting_term = None
                    log.info("%s/%s: not the leader, following", namespace, name)
                await WAKEUPS.wait(key, resync=FOLLOWER_RECHECK_SECONDS, debounce=0)
                continue
            if acting_term != leadership.term:  # a new term: the other leader wrote since
                reconciler.forget(namespace, name)
                acting_term = leadership.term
                analysis_due_at = 0.0
            observed = observe.observed_state(
                key,
                children=kwargs["child_objects"],
                deployments=kwargs["child_deployments"],
                pods=kwargs["child_pods"],
            )
            delay = reconciler.settings.resync_seconds
            now = loop_time()
            try:
                next_in = await reconciler.reconcile(
                    body, observed, policies=kwargs["policies"], analyze=now >= analysis_due_at
                )
                if next_in is not None:
                    if now >= analysis_due_at:
                        observe_lag(analysis_due_at, loop_time())
                        analysis_due_at = now + next_in
                    delay = min(delay, max(analysis_due_at - loop_time(), 0.05))
                recheck = reconciler.recheck_in(namespace, name)
                if recheck is not None:  # a gateway still applying the last decision
                    delay = min(delay, max(recheck, 0.05))
            except NotLeaderError as exc:  # lost the lead mid-pass: the rest is not written
                log.warning("reconcile of %s/%s abandoned: %s", namespace, name, exc)
                delay = FOLLOWER_RECHECK_SECONDS
            except KubeApiError as exc:
                log.warning(
                    "reconcile of %s/%s failed: %s %s: %s",
                    namespace,
                    name,
                    exc.status,
                    exc.reason,
                    str(exc.body)[:500],
                )
                kopf.warn(
                    body, reason=EventReason.RECONCILE_FAILED, message=f"{exc.status} {exc.reason}"
                )
                delay = ERROR_BACKOFF_SECONDS
            except Exception as exc:  # a bug must not stop this object's loop for good
                log.exception("reconcile of %s/%s crashed", namespace, name)
                kopf.warn(
                    body,
                    reason=EventReason.RECONCILE_FAILED,
                    message=f"{type(exc).__name__}: {exc}",
                )
                delay = ERROR_BACKOFF_SECONDS
            await WAKEUPS.wait(key, resync=delay, debounce=DEBOUNCE_SECONDS)
    except asyncio.CancelledError:
        pass
    finally:
        WAKEUPS.drop(key)
        reconciler.forget(namespace, name)
