"""Admin endpoints: invalidate L1 entries, and look inside the sidecar.

``POST /admin/cache/invalidate`` takes a JSON object of filters, all optional and ANDed:
``model`` (the name clients asked for: base model or adapter), ``adapter`` (an adapter
name; the same as ``model`` for an adapter), ``adapter_digest``, ``revision``. No filter
(or an empty body) drops everything. It answers ``{"removed": N}``.

``GET /admin/cache/stats`` shows L1's counters, vLLM's state as the sidecar sees it, L3's
adapters and the settings in force.

Why a token option: the builtin gateway forwards only the OpenAI paths, so these are
reachable only inside the cluster network; where the pod's port is exposed more widely,
``SITS_CACHE_ADMIN_TOKEN`` makes them require ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import dataclasses
import hmac
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from ..openai.errors import ApiError, ErrorType, bad_json
from .relay import reply
from .sidecar_metrics import Invalidation

if TYPE_CHECKING:
    from .app import Sidecar

_FILTERS = frozenset({"model", "adapter", "adapter_digest", "revision"})
_MAX_BODY = 1 << 16


def routes(sidecar: Sidecar) -> list[web.RouteDef]:
    async def invalidate(request: web.Request) -> web.Response:
        try:
            _authorise(sidecar, request)
            filters = _filters(await request.read())
        except ApiError as err:
            return reply(err)
        semantic = sidecar.tiers.semantic
        removed = 0
        if semantic is not None:
            await sidecar.settle_stores()  # an answer sent before this request goes too
            removed = await sidecar.in_thread(lambda: semantic.invalidate(**filters))
        sidecar.metrics.invalidations.labels(Invalidation.ADMIN).inc(removed)
        return web.json_response({"removed": removed, "filters": filters})

    async def stats(request: web.Request) -> web.Response:
        try:
            _authorise(sidecar, request)
        except ApiError as err:
            return reply(err)
        return web.json_response(await _stats(sidecar), dumps=_dumps)

    return [
        web.post("/admin/cache/invalidate", invalidate),
        web.get("/admin/cache/stats", stats),
    ]


def _authorise(sidecar: Sidecar, request: web.Request) -> None:
    token = sidecar.settings.admin_token
    if token is None:
        return
    given = request.headers.get("Authorization", "")
    if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        raise ApiError(
            401,
            "The admin endpoints need 'Authorization: Bearer <token>'.",
            type=ErrorType.AUTHENTICATION,
            code="invalid_admin_token",
        )


def _filters(raw: bytes) -> dict[str, str]:
    """The L1 ``invalidate`` keyword arguments for a request body."""
    if len(raw) > _MAX_BODY:
        raise ApiError(413, "The invalidation request is too large.", code="body_too_large")
    if not raw.strip():
        return {}
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as err:
        raise bad_json(str(err)) from None
    if not isinstance(doc, dict):
        raise bad_json("the body must be a JSON object")
    unknown = sorted(set(doc) - _FILTERS)
    if unknown:
        raise ApiError(
            400, f"Unknown filters {unknown}; use {sorted(_FILTERS)}.", code="unknown_filter"
        )
    values = {k: v for k, v in doc.items() if v is not None}
    for key, value in values.items():
        if not isinstance(value, str) or not value:
            raise ApiError(400, f"'{key}' must be a non-empty string.", param=key)
    if "adapter" in values:
        adapter = values.pop("adapter")
        if values.setdefault("model", adapter) != adapter:
            raise ApiError(400, "'model' and 'adapter' name different models.", param="adapter")
    return values


def _plain(value: Any) -> Any:
    """Stats objects of any shape (dataclass, mapping, object) as JSON-ready values."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _plain(dataclasses.asdict(value))
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "__dict__"):
        return {k: _plain(v) for k, v in vars(value).items() if not k.startswith("_")}
    return str(value)


def _dumps(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()


async def _stats(sidecar: Sidecar) -> dict[str, Any]:
    tiers = sidecar.tiers
    await sidecar.settle_stores()
    semantic = await sidecar.in_thread(tiers.semantic.stats) if tiers.semantic else None
    return {
        "settings": _plain({**dataclasses.asdict(sidecar.settings), "admin_token": None}),
        "upstream": sidecar.monitor.describe(),
        "semantic": _plain(semantic) if semantic is not None else {"enabled": False},
        "lora": tiers.lora.describe() if tiers.lora is not None else [],
        "vector": {"enabled": tiers.vector is not None},
    }
