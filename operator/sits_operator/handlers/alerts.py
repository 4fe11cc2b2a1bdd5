"""Alert-driven rollback: an Alertmanager webhook receiver inside the operator.

A firing alert whose labels name a SitsDeployment (`namespace` and `sits_deployment`)
sets the `sits.dev/abort` annotation on it, with a value naming the alert; the reconcile
loop then rolls back exactly as for a manual abort, and acknowledges the value once, so
Alertmanager's repeats of the same alert do nothing more. Bad payloads get a 4xx and
change nothing.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from sits_operator.adapters.kube import create_event
from sits_operator.model.analysis import Command, command_annotation
from sits_operator.model.spec import API_GROUP, API_VERSION, PLURAL

log = logging.getLogger("sits_operator.alerts")
ABORT_ANNOTATION = command_annotation(Command.ABORT)
PATH = "/api/v1/alerts"
MAX_BODY = 1 << 20


@dataclass(frozen=True)
class AlertTarget:
    namespace: str
    name: str
    alert: str
    value: str


def targets_of(payload: Any) -> list[AlertTarget]:
    """Firing alerts that name a SitsDeployment; ValueError when the payload is malformed."""
    if not isinstance(payload, dict) or not isinstance(payload.get("alerts"), list):
        raise ValueError("not an Alertmanager webhook payload: no 'alerts' list")
    found = []
    for alert in payload["alerts"]:
        if not isinstance(alert, dict) or not isinstance(alert.get("labels"), dict):
            raise ValueError("every alert needs a 'labels' object")
        labels = alert["labels"]
        if alert.get("status", "firing") != "firing":
            continue
        name, namespace = labels.get("sits_deployment"), labels.get("namespace")
        if not isinstance(name, str) or not isinstance(namespace, str):
            continue
        alertname = str(labels.get("alertname", "unnamed"))
        identity = str(alert.get("fingerprint") or alert.get("startsAt") or "")
        found.append(AlertTarget(namespace, name, alertname, f"alert:{alertname}:{identity}"))
    return found


class AlertReceiver:
    def __init__(self, api: client.ApiClient) -> None:
        self._api = api
        self._custom = client.CustomObjectsApi(api)

    async def handle(self, request: web.Request) -> web.Response:
        try:
            payload = json.loads(await request.content.read(MAX_BODY))
            targets = targets_of(payload)
        except (ValueError, UnicodeDecodeError) as exc:
            return web.json_response({"error": str(exc)}, status=400)
        if not targets:
            return web.json_response(
                {
                    "error": "no firing alert names a SitsDeployment "
                    "(labels namespace and sits_deployment)"
                },
                status=422,
            )
        done, missing = [], []
        for target in targets:
            if await self._abort(target):
                done.append(f"{target.namespace}/{target.name}")
            else:
                missing.append(f"{target.namespace}/{target.name}")
        status = 200 if done else 404
        return web.json_response({"rolledBack": done, "notFound": missing}, status=status)

    async def _abort(self, target: AlertTarget) -> bool:
        try:
            body = await self._custom.get_namespaced_custom_object(
                API_GROUP, API_VERSION, target.namespace, PLURAL, target.name
            )
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
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
        await create_event(
            self._api, obj=body, type_="Warning", reason="AlertRollback", message=message
        )
        log.warning("alert %s rolls back %s/%s", target.alert, target.namespace, target.name)
        return True


async def start_alert_server(api: client.ApiClient, address: str) -> web.AppRunner:
    """Serve POST /api/v1/alerts on host:port; returns the runner to clean up."""
    host, _, port = address.rpartition(":")
    app = web.Application(client_max_size=MAX_BODY)
    app.router.add_post(PATH, AlertReceiver(api).handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host or "127.0.0.1", int(port)).start()
    log.info("alert webhook on http://%s%s", address, PATH)
    return runner
