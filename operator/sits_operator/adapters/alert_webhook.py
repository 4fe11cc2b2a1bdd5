"""The Alertmanager webhook receiver inside the operator: alert-driven rollback.

POST /api/v1/alerts with Alertmanager's webhook payload. Each firing alert that names a
SitsDeployment is judged by `core.alerts.judge`; a rollback sets the `sits.dev/abort`
annotation (the reconcile loop then rolls back exactly as for a manual abort and
acknowledges the value once, so repeats of one alert do nothing more) and posts an
`AlertRollback` event naming the alert; an alert about a variant that is not a candidate
under analysis gets an `AlertIgnored` event and changes nothing.

Authentication: with a token file (`SITS_ALERT_WEBHOOK_TOKEN_FILE`, the chart mounts a
Secret there) every request needs `Authorization: Bearer <token>`, which Alertmanager's
`http_config.authorization` sends; anything else gets 401, is logged, and changes
nothing. The file is re-read when it changes, so a rotated Secret takes effect without a
restart. Without a token file the receiver is open, which only a loopback address (tests,
a laptop) should be: the start-up log says so loudly.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sits_operator.adapters.kube import create_event
from sits_operator.core.alerts import AlertAction, AlertTarget, authorized, judge, targets_of
from sits_operator.model.analysis import Command, command_annotation
from sits_operator.model.events import EventReason
from sits_operator.model.spec import API_GROUP, API_VERSION, PLURAL

log = logging.getLogger("sits_operator.alerts")
ABORT_ANNOTATION = command_annotation(Command.ABORT)
PATH = "/api/v1/alerts"
MAX_BODY = 1 << 20
TOKEN_FILE_ENV = "SITS_ALERT_WEBHOOK_TOKEN_FILE"


@dataclass
class TokenFile:
    """The shared secret, re-read whenever the file's modification time changes (a Secret
    volume is updated in place by the kubelet when the Secret is rotated)."""

    path: Path
    _stamp: float = field(default=-1.0, init=False)
    _token: str = field(default="", init=False)

    def token(self) -> str:
        try:
            stamp = self.path.stat().st_mtime
        except OSError as exc:
            log.error("alert webhook token file %s unreadable: %s", self.path, exc)
            return ""  # nothing matches: refuse rather than open up
        if stamp != self._stamp:
            self._token, self._stamp = self.path.read_text().strip(), stamp
        return self._token


class AlertReceiver:
    """`namespaces`: the operator's watched namespaces (--namespace); an alert naming any
    other is not found, without asking the API (a namespaced install may not read there).
    Empty: every namespace."""

    def __init__(
        self,
        api: client.ApiClient,
        token: TokenFile | None = None,
        *,
        namespaces: Collection[str] = (),
    ) -> None:
        self._api = api
        self._custom = client.CustomObjectsApi(api)
        self._token = token
        self._namespaces = frozenset(namespaces)

    async def handle(self, request: web.Request) -> web.Response:
        if self._token is not None and not authorized(
            request.headers.get("Authorization"), self._token.token()
        ):
            log.warning(
                "alert webhook: refused a request from %s without valid credentials", request.remote
            )
            return web.json_response(
                {"error": "missing or wrong bearer token"},
                status=401,
                headers={"WWW-Authenticate": 'Bearer realm="sits-alerts"'},
            )
        try:
            payload = json.loads(await request.content.read(MAX_BODY))
            targets = targets_of(payload)
        except (ValueError, UnicodeDecodeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        if not targets:
            error = "no firing alert names a SitsDeployment (labels namespace and sits_deployment)"
            return web.json_response({"error": error}, status=422)
        outcome: dict[AlertAction, list[str]] = {action: [] for action in AlertAction}
        for target in targets:
            action, why = await self._act(target)
            outcome[action].append(f"{target.key}: {why}")
        done = outcome[AlertAction.ROLL_BACK] or outcome[AlertAction.IGNORE]
        return web.json_response(
            {
                "rolledBack": outcome[AlertAction.ROLL_BACK],
                "ignored": outcome[AlertAction.IGNORE],
                "notFound": outcome[AlertAction.NOT_FOUND],
            },
            status=200 if done else 404,
        )

    async def _act(self, target: AlertTarget) -> tuple[AlertAction, str]:
        if self._namespaces and target.namespace not in self._namespaces:
            return (
                AlertAction.NOT_FOUND,
                f"namespace {target.namespace} is not watched by this operator",
            )
        body = await self._read(target)
        action, why = judge(target, body)
        if action is AlertAction.NOT_FOUND or body is None:
            return action, why
        if action is AlertAction.IGNORE:
            message = f"alert {target.alert}: {why}"
            await self._event(body, "Normal", EventReason.ALERT_IGNORED, message)
            log.info("alert %s ignored: %s", target.alert, why)
            return action, why
        patch = {"metadata": {"annotations": {ABORT_ANNOTATION: target.value}}}
        await self._custom.patch_namespaced_custom_object(
            API_GROUP,
            API_VERSION,
            target.namespace,
            PLURAL,
            target.name,
            patch,
            _content_type="application/merge-patch+json",  # type: ignore[call-arg]
        )
        message = f"alert {target.alert} is firing: rolling back ({target.value})"
        await self._event(body, "Warning", EventReason.ALERT_ROLLBACK, message)
        log.warning("alert %s rolls back %s", target.alert, target.key)
        return action, why

    async def _read(self, target: AlertTarget) -> dict[str, Any] | None:
        try:
            body: dict[str, Any] = await self._custom.get_namespaced_custom_object(
                API_GROUP, API_VERSION, target.namespace, PLURAL, target.name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return body

    async def _event(
        self, body: dict[str, Any], type_: str, reason: EventReason, message: str
    ) -> None:
        await create_event(self._api, obj=body, type_=type_, reason=reason, message=message)


def token_from_environment() -> TokenFile | None:
    path = os.environ.get(TOKEN_FILE_ENV, "")
    return TokenFile(Path(path)) if path else None


async def start_alert_server(
    api: client.ApiClient, address: str, *, namespaces: Collection[str] = ()
) -> web.AppRunner:
    """Serve POST /api/v1/alerts on host:port; returns the runner to clean up.
    `namespaces`: the watched ones (empty: all), as AlertReceiver takes them."""
    host, _, port = address.rpartition(":")
    token = token_from_environment()
    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post(PATH, AlertReceiver(api, token, namespaces=namespaces).handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or "127.0.0.1", int(port)).start()
    if token is None:
        log.warning(
            "alert webhook on http://%s%s WITHOUT authentication (set %s)",
            address,
            PATH,
            TOKEN_FILE_ENV,
        )
    else:
        log.info("alert webhook on http://%s%s (bearer token from %s)", address, PATH, token.path)
    return runner
