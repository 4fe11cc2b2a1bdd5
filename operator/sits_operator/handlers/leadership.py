"""Two operator replicas, one acting: leader election in the operator.

With `SITS_LEADER_ELECTION` on (`--leader-elect`; the chart's default), every replica is
a candidate for one Lease (adapters/lease.py, decisions in core/leadership.py). Only the
leader acts; a follower is a warm standby:

- Followers run everything that only reads: Kopf's watches, the indexes of children,
  pods and policies, and one reconcile daemon per SitsDeployment, which checks
  `may_act()` before each pass and otherwise sleeps (woken by watch events, by this
  process becoming the leader, and at least every `FOLLOWER_RECHECK_SECONDS`). A
  takeover therefore starts from complete caches, as a restart does, without the
  restart's initial listing.
- Every write is guarded where it is made, not only at the start of a pass: the
  Reconciler's writer (children, status), its event poster (decisions, phase changes)
  and the analysis' router (weights) raise `NotLeaderError` unless `may_act()`. `may_act`
  reads the monotonic clock at the call and compares it with the last successful renewal:
  a leader that was paused (SIGSTOP, a partition, a stalled loop) is past its renew
  deadline the instant it resumes and refuses its very next write, before the renew task
  has had a chance to run and notice. A pass abandoned that way is logged and dropped.
- A process that becomes the leader again drops what it remembered of each rollout (its
  own last status writes and applies may be older than the other leader's) and analyses
  at once, as a restarted operator does; the analysis state in status makes that safe
  (a period already counted is not counted again). One that steps down drops its
  per-rollout gauges, so only the leader exports `sits_rollout_*` series.

What Kopf itself still writes in a follower, and why that is harmless:

- The finalizer `sits.dev/finalizer`: Kopf puts it on every SitsDeployment that has a
  daemon, in every process, so that it can stop the daemon before the object goes. Both
  replicas use the same name, so the second finds it present and writes nothing. On
  deletion each process stops its own daemon and removes the finalizer; whichever does
  so first lets the object go. The operator has nothing to do at deletion (its children
  carry owner references; the garbage collector deletes them), so an early release
  changes nothing; the other process then finds the object gone (its daemon is
  cancelled, its finalizer patch has nothing left to do).
- Handler progress and diff-base annotations (`settings.persistence`): Kopf writes them
  only for change handlers (on.create/update/resume/delete/field). The operator has none:
  daemons, indexes and event handlers keep no persisted state, so no replica writes them.
- Kopf's own events (its WARNING log lines about an object): `settings.posting.enabled`
  follows the role, off while following. Events already queued when a leader is paused
  may still be posted when it resumes (milliseconds of work queued before the pause), as
  may a request that was in flight; everything started after the resume is refused.
- The Alertmanager webhook receiver answers on every replica (the Service picks one): it
  writes the `sits.dev/abort` annotation and an event, a request like `kubectl annotate`
  that only the leader then acts on (once per value), not a decision of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import kopf

from sits_operator.adapters.kube import ApiClient, KubeWriter, Manifest
from sits_operator.adapters.lease import LeaderElector, enabled_from_env, make_elector
from sits_operator.adapters.routers import TrafficRouter, make_router
from sits_operator.handlers import metrics
from sits_operator.handlers.analysis import RouterFactory
from sits_operator.handlers.reconcile import EventPoster
from sits_operator.model.events import EventReason
from sits_operator.model.spec import ObjectRef, SitsDeploymentSpec

log = logging.getLogger("sits_operator.leader")

# A follower's reconcile loop looks again this often (besides the wake-up on takeover).
FOLLOWER_RECHECK_SECONDS = 1.0

MayAct = Callable[[], bool]


class NotLeaderError(Exception):
    """A write refused because this process is not (or no longer) the leader."""


def _always() -> bool:
    return True


@dataclass
class Leadership:
    """Whether this process may act now. Without an elector (election off) it always may:
    the single standalone replica the chart then allows."""

    elector: LeaderElector | None = None

    def may_act(self) -> bool:
        return True if self.elector is None else self.elector.may_act()

    @property
    def term(self) -> int:
        """Changes each time this process becomes the leader."""
        return 1 if self.elector is None else self.elector.term

    def guard(self) -> MayAct:
        return self.may_act if self.elector is not None else _always

    async def stop(self) -> None:
        if self.elector is not None:
            await self.elector.stop(release=True)


def refuse_unless(may_act: MayAct, what: str) -> None:
    if not may_act():
        raise NotLeaderError(f"not the leader: {what} refused")


@dataclass
class LeaderOnlyWriter:
    """The Reconciler's writer, refusing every write unless this process may act."""

    inner: KubeWriter
    may_act: MayAct

    async def apply(self, manifest: Manifest) -> None:
        refuse_unless(self.may_act, f"apply of {manifest['kind']} {manifest['metadata']['name']}")
        await self.inner.apply(manifest)

    async def delete(self, *, kind: str, namespace: str, name: str) -> None:
        refuse_unless(self.may_act, f"delete of {kind} {namespace}/{name}")
        await self.inner.delete(kind=kind, namespace=namespace, name=name)

    async def patch_status(self, *, namespace: str, name: str, status: dict[str, Any]) -> None:
        refuse_unless(self.may_act, f"status of {namespace}/{name}")
        await self.inner.patch_status(namespace=namespace, name=name, status=status)


@dataclass
class LeaderOnlyRouter:
    """A traffic router whose weights are set only by the leader (reads are free)."""

    inner: TrafficRouter
    may_act: MayAct

    async def read_weights(self, owner: ObjectRef, spec: SitsDeploymentSpec) -> dict[str, int]:
        return await self.inner.read_weights(owner, spec)

    async def set_weights(
        self, owner: ObjectRef, spec: SitsDeploymentSpec, weights: dict[str, int]
    ) -> None:
        refuse_unless(self.may_act, f"weights of {owner.namespace}/{owner.name}")
        await self.inner.set_weights(owner, spec, weights)


def leader_only_routers(may_act: MayAct, factory: RouterFactory = make_router) -> RouterFactory:
    def make(kind: str, api: ApiClient | None) -> TrafficRouter:
        return LeaderOnlyRouter(factory(kind, api), may_act)

    return make


def leader_only_poster(post: EventPoster, may_act: MayAct) -> EventPoster:
    def post_if_leader(body: Any, type_: str, reason: EventReason, message: str) -> None:
        refuse_unless(may_act, f"event {reason.value}")
        post(body, type_, reason, message)

    return post_if_leader


@dataclass
class RoleReporter:
    """On each change of role: log, metrics, Kopf's own event posting, and a callback
    (the reconcile loops' wake-up, so a new leader acts at once)."""

    settings: kopf.OperatorSettings
    on_leading: Callable[[], None] = field(default=lambda: None)

    def __call__(self, leading: bool, why: str) -> None:
        role = "leader" if leading else "follower"
        log.info("this process is now the %s (%s)", role, why)
        metrics.LEADER.set(1 if leading else 0)
        metrics.LEADER_TRANSITIONS.labels(to=role).inc()
        self.settings.posting.enabled = leading
        if leading:
            self.on_leading()


def start_leadership(
    api: ApiClient, settings: kopf.OperatorSettings, *, on_leading: Callable[[], None]
) -> Leadership:
    """Election on (SITS_LEADER_ELECTION): start the elector, follow until it leads.
    Off: lead always."""
    for role in ("leader", "follower"):
        metrics.LEADER_TRANSITIONS.labels(to=role)
    if not enabled_from_env():
        metrics.LEADER.set(1)
        return Leadership()
    reporter = RoleReporter(settings, on_leading)
    elector = make_elector(api, on_transition=reporter)
    metrics.LEADER.set(0)
    settings.posting.enabled = False  # Kopf's own events: the leader's only
    settings.posting.reporting_instance = elector.identity
    elector.start()
    return Leadership(elector)
