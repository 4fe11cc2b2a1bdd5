"""The few Kubernetes API calls ``up()`` needs, over HTTPS with the admin cert.

Why not kubectl here: ``up()`` on a running cluster should cost well under a second, and
each kubectl invocation costs ~0.2 s of start-up on 2 cores. Tests use kubectl (through
``LocalCluster.kubectl``) because that is what people debug with.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"


class ApiError(RuntimeError):
    """A request answered with an unexpected HTTP status."""

    def __init__(self, method: str, path: str, status: int, body: str) -> None:
        super().__init__(f"{method} {path} -> HTTP {status}: {body[-500:]}")
        self.status = status


@dataclass(frozen=True)
class ApiClient:
    """Minimal JSON client bound to one apiserver and one TLS identity."""

    server: str
    context: ssl.SSLContext
    timeout: float = 10.0

    def request(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, dict[str, Any]]:
        """Send one request; returns (status, decoded JSON body or {}). Never raises on 4xx."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method)
        req.add_header("Accept", "application/json")
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout, context=self.context) as resp:
                return resp.status, _decode(resp.read())
        except urllib.error.HTTPError as err:
            return err.code, _decode(err.read())

    def get(self, path: str) -> dict[str, Any] | None:
        """The object at ``path``, or None when it does not exist (404)."""
        status, obj = self.request("GET", path)
        if status == 404:
            return None
        if status != 200:
            raise ApiError("GET", path, status, json.dumps(obj))
        return obj

    def apply(self, path: str, obj: dict[str, Any], manager: str = "sits-cluster") -> None:
        """Server-side apply (creates when missing): idempotent, safe to repeat on reuse."""
        full = f"{path}?fieldManager={manager}&force=true"
        status, answer = self.request("PATCH", full, obj, APPLY_PATCH)
        if status not in (200, 201):
            raise ApiError("PATCH", full, status, json.dumps(answer))

    def merge_patch(self, path: str, patch: dict[str, Any]) -> None:
        status, answer = self.request("PATCH", path, patch, MERGE_PATCH)
        if status != 200:
            raise ApiError("PATCH", path, status, json.dumps(answer))


def _decode(raw: bytes) -> dict[str, Any]:
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        return {"raw": raw.decode(errors="replace")}
    return value if isinstance(value, dict) else {"value": value}
