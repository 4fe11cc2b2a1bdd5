"""Leader election's Kubernetes side: the Lease (coordination.k8s.io/v1) and the task that
keeps looking at it. The decisions are core/leadership.py's.

Every write carries the resourceVersion just read (a replace, never a patch), so two
candidates racing for one expired Lease cannot both win: the loser gets 409 and simply
looks again. Bodies are plain JSON (raw responses, no model decoding): MicroTime must be
written with exactly six fractional digits, which the client's datetime serialisation
does not guarantee.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sits_operator.adapters.kube import SERVICE_ACCOUNT_NAMESPACE, operator_namespace
from sits_operator.core import leadership
from sits_operator.core.leadership import Action, ElectionState, LeaseRecord, Timing

log = logging.getLogger("sits_operator.leader")

DEFAULT_LEASE_NAME = "sits-operator"
TRUE = {"1", "true", "yes", "on"}
# One API call of the election may take at most this long (a hung connection must not
# keep a leader from noticing its deadline; `may_act` does not wait for it anyway).
CALL_TIMEOUT_SECONDS = 5.0


class LeaseConflictError(Exception):
    """409: someone wrote the Lease since we read it (or created it first)."""


def micro_time(seconds: float | None = None) -> str:
    """MicroTime as the apiserver writes it: RFC 3339, UTC, six fractional digits."""
    moment = datetime.now(UTC) if seconds is None else datetime.fromtimestamp(seconds, UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_body(
    name: str, namespace: str, record: LeaseRecord, resource_version: str | None = None
) -> dict[str, Any]:
    """The Lease as written: metadata (with the resourceVersion read, for a replace) and
    the spec from the record."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if resource_version is not None:
        metadata["resourceVersion"] = resource_version
    spec: dict[str, Any] = {
        "holderIdentity": record.holder,
        "leaseDurationSeconds": record.lease_duration_seconds,
        "leaseTransitions": record.transitions,
    }
    if record.acquire_time is not None:
        spec["acquireTime"] = record.acquire_time
    if record.renew_time is not None:
        spec["renewTime"] = record.renew_time
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": spec,
    }


def record_of(lease: Mapping[str, Any]) -> LeaseRecord:
    spec = lease.get("spec") or {}
    return LeaseRecord(
        holder=str(spec.get("holderIdentity") or ""),
        lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
        acquire_time=spec.get("acquireTime"),
        renew_time=spec.get("renewTime"),
        transitions=int(spec.get("leaseTransitions") or 0),
    )


class LeaseLock:
    """get / create / replace of one Lease."""

    def __init__(self, api_client: client.ApiClient, *, name: str, namespace: str) -> None:
        # Untyped: raw responses (_preload_content=False) and plain-dict bodies.
        self._api: Any = client.CoordinationV1Api(api_client)
        self.name, self.namespace = name, namespace

    async def get(self) -> tuple[LeaseRecord, str] | None:
        """The record and its resourceVersion; None when there is no Lease."""
        response = await self._api.read_namespaced_lease(
            self.name, self.namespace, _preload_content=False
        )
        if response.status == 404:
            response.release()
            return None
        lease = json.loads(await _checked(response))
        return record_of(lease), str(lease["metadata"]["resourceVersion"])

    async def create(self, record: LeaseRecord) -> None:
        body = lease_body(self.name, self.namespace, record)
        await _written(
            self._api.create_namespaced_lease(self.namespace, body, _preload_content=False)
        )

    async def replace(self, record: LeaseRecord, resource_version: str) -> None:
        body = lease_body(self.name, self.namespace, record, resource_version)
        call = self._api.replace_namespaced_lease(
            self.name, self.namespace, body, _preload_content=False
        )
        await _written(call)


async def _checked(response: Any) -> bytes:
    """Raw responses (no model decoding) must be read, released, and checked by hand."""
    body: bytes = await response.read()
    response.release()
    if not 200 <= response.status <= 299:
        raise ApiException(status=response.status, reason=f"{response.reason}: {body[:300]!r}")
    return body


async def _written(call: Any) -> None:
    try:
        await _checked(await call)
    except ApiException as exc:
        if exc.status == 409:
            raise LeaseConflictError(str(exc.reason)) from exc
        raise


Transition = Callable[[bool, str], None]


class LeaderElector:
    """The background task: look at the Lease every retry period and act on core's step.

    `on_transition(leading, why)` is called on every change of this process's role (became
    the leader, stepped down); `may_act()` is the check every write of the operator makes.
    """

    def __init__(
        self,
        lock: LeaseLock,
        *,
        identity: str,
        timing: Timing | None = None,
        on_transition: Transition | None = None,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], str] = micro_time,
    ) -> None:
        self.lock, self.identity = lock, identity
        self.timing = timing or Timing()
        self.state = ElectionState()
        self._on_transition = on_transition
        self._clock, self._wall_clock = clock, wall_clock
        self._task: asyncio.Task[None] | None = None
        self._resource_version: str | None = None
        self._followed = ""  # the holder last logged as followed

    def may_act(self) -> bool:
        return leadership.may_act(self.state, self._clock(), self.timing)

    @property
    def term(self) -> int:
        return self.state.term

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="sits-leader-election")

    async def _run(self) -> None:
        log.info(
            "leader election: %s candidate for Lease %s/%s",
            self.identity,
            self.lock.namespace,
            self.lock.name,
        )
        while True:
            try:
                await self.look()
            except asyncio.CancelledError:
                raise
            except Exception:  # an election that stops looking would lead or follow forever
                log.exception("leader election: look at the Lease failed")
            delay = leadership.next_look_in(self.state, self._clock(), self.timing)
            await asyncio.sleep(delay)

    async def look(self) -> None:
        """One look: read the Lease, decide, write when the step says so."""
        if self.state.leading and not self.may_act():
            self._step_down(
                leadership.decide(
                    self.state,
                    None,
                    identity=self.identity,
                    now=self._clock(),
                    wall_now=self._wall_clock(),
                    timing=self.timing,
                )
            )
            return
        try:
            found = await asyncio.wait_for(self.lock.get(), CALL_TIMEOUT_SECONDS)
        except (ApiException, TimeoutError) as exc:
            log.warning("leader election: reading the Lease failed: %s", _why(exc))
            return
        record, self._resource_version = found if found is not None else (None, None)
        sent_at = self._clock()
        step = leadership.decide(
            self.state,
            record,
            identity=self.identity,
            now=sent_at,
            wall_now=self._wall_clock(),
            timing=self.timing,
        )
        if step.action is Action.STEP_DOWN:
            self._step_down(step)
            return
        if step.action is Action.FOLLOW or step.write is None:
            self.state = step.state
            if record is not None and record.holder != self._followed:
                self._followed = record.holder
                log.info("leader election: %s follows %s", self.identity, record.holder)
            return
        try:
            if step.action is Action.CREATE:
                await asyncio.wait_for(self.lock.create(step.write), CALL_TIMEOUT_SECONDS)
            else:
                rv = self._resource_version or ""
                await asyncio.wait_for(self.lock.replace(step.write, rv), CALL_TIMEOUT_SECONDS)
        except LeaseConflictError:
            log.info("leader election: lost the race for the Lease (%s)", step.action.value)
            self.state = step.state
            return
        except (ApiException, TimeoutError) as exc:
            log.warning("leader election: %s failed: %s", step.action.value, _why(exc))
            self.state = step.state
            return
        was_leading = self.state.leading
        self._followed = ""
        self.state = leadership.written(
            step.state, step.write, sent_at=sent_at, now=self._clock(), timing=self.timing
        )
        if self.state.leading and not was_leading:
            why = step.reason or "the Lease names this process"
            log.info(
                "leader election: %s became the leader (%s: %s; transitions %d)",
                self.identity,
                step.action.value,
                why,
                step.write.transitions,
            )
            self._notify(True, why)

    def _step_down(self, step: leadership.Step) -> None:
        self.state = step.state
        log.warning("leader election: %s stepped down: %s", self.identity, step.reason)
        self._notify(False, step.reason)

    def _notify(self, leading: bool, why: str) -> None:
        if self._on_transition is not None:
            try:
                self._on_transition(leading, why)
            except Exception:
                log.exception("leader election: transition callback failed")

    async def stop(self, *, release: bool = True) -> None:
        """Stop looking; a leader stops acting first, then releases the Lease so another
        candidate takes over at once."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        if not self.state.leading:
            return
        self.state = ElectionState(term=self.state.term)  # may_act() is False from here on
        self._notify(False, "shutting down")
        if not release:
            return
        try:
            found = await asyncio.wait_for(self.lock.get(), CALL_TIMEOUT_SECONDS)
            if found is None or found[0].holder != self.identity:
                return
            record = leadership.released(found[0], wall_now=self._wall_clock())
            await asyncio.wait_for(self.lock.replace(record, found[1]), CALL_TIMEOUT_SECONDS)
            log.info("leader election: %s released the Lease", self.identity)
        except (ApiException, LeaseConflictError, TimeoutError) as exc:
            log.warning("leader election: releasing the Lease failed: %s", _why(exc))


def _why(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"{exc.status} {exc.reason}"
    return type(exc).__name__


def enabled_from_env(env: Mapping[str, str] | None = None) -> bool:
    env = os.environ if env is None else env
    return env.get("SITS_LEADER_ELECTION", "").strip().lower() in TRUE


def identity_from_env(env: Mapping[str, str] | None = None) -> str:
    """The pod's name (downward API); outside a pod, host name and process id."""
    env = os.environ if env is None else env
    return env.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"


def lease_location_from_env(
    env: Mapping[str, str] | None = None, namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE
) -> tuple[str, str]:
    """(namespace, name) of the Lease: SITS_LEADER_ELECTION_NAMESPACE, else the pod's own
    namespace (POD_NAMESPACE, or the service account's namespace file)."""
    env = os.environ if env is None else env
    name = env.get("SITS_LEADER_ELECTION_NAME") or DEFAULT_LEASE_NAME
    namespace = env.get("SITS_LEADER_ELECTION_NAMESPACE") or operator_namespace(env, namespace_file)
    if not namespace:
        raise RuntimeError(
            "leader election needs the Lease's namespace: set SITS_LEADER_ELECTION_NAMESPACE "
            "(or POD_NAMESPACE; in a pod, the service account's namespace is used)"
        )
    return namespace, name


def make_elector(
    api_client: client.ApiClient, *, on_transition: Transition | None = None
) -> LeaderElector:
    """The elector configured from the environment (not started)."""
    namespace, name = lease_location_from_env()
    lock = LeaseLock(api_client, name=name, namespace=namespace)
    return LeaderElector(lock, identity=identity_from_env(), on_transition=on_transition)
