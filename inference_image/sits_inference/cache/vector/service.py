"""The vector tier (L2) as the sidecar runs it: `VectorService` and its HTTP routes.

Lifecycle: `start()` opens the index directory (memory-mapped), warms it (HNSW: whole
file and synthetic queries; IVF-PQ: the lists the saved statistics make hot) and only then
returns, so the sidecar reports ready with a warm index. A background task then follows
the access window (promote/demote lists every `refresh_seconds`) and saves the statistics
every `persist_seconds`; `close()` saves them once more.

A missing or unreadable index does not stop the sidecar (its chat proxy must keep
working): /v1/retrieve answers 503 `index_unavailable` with Retry-After, and the task
tries to open the directory again on every refresh, so an index copied onto the volume
later is picked up. 503 rather than 404: the route exists and the condition is the
server's and usually temporary (volume still being filled, index being rebuilt);
clients and the gateway treat 503 as retryable, 404 as "wrong URL".

All blocking work (faiss, page reads, embedding) runs on worker threads: searches on a
small pool, maintenance on its own thread so that warming hundreds of megabytes never
queues in front of a query.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web

from ...openai.errors import ApiError, ErrorType
from ...openai.replies import error_reply
from ..embedding import Embedder
from ..metrics import CacheMetrics
from .api import (
    RetrieveRequest,
    check_dimension,
    invalid,
    parse_request,
    response_body,
    unavailable,
)
from .base import Vector, one_faiss_thread
from .docs import FilterError
from .loaded import LoadedIndex, Options, Retrieved
from .manifest import IndexFormatError, Manifest
from .telemetry import TIER, VectorMetrics

log = logging.getLogger(__name__)
T = TypeVar("T")
# What `sits-index build --embed` records; text queries need the same model at run time.
EMBEDDING_MODEL = "sentence-transformers/all-MiniLM-L6-v2"
RETRY_AFTER_S = 10


@dataclass(frozen=True)
class VectorConfig:
    index_dir: Path
    hot_min_hits: int = 50
    hot_window_seconds: float = 3600.0
    stats_path: Path | None = None
    max_k: int = 100
    refresh_seconds: float = 30.0
    persist_seconds: float = 300.0
    # mlock hot pages when the process may (CAP_IPC_LOCK); else keep them warm by touch.
    lock_memory: bool = True
    max_resident_bytes: int | None = None
    warmup_queries: int = 32
    search_threads: int = 2

    def __post_init__(self) -> None:
        if self.hot_min_hits < 1:
            raise ValueError("hot_min_hits must be at least 1")
        if self.hot_window_seconds <= 0 or self.refresh_seconds <= 0:
            raise ValueError("hot_window_seconds and refresh_seconds must be positive")
        if not 1 <= self.max_k <= 10_000:
            raise ValueError("max_k must be between 1 and 10000")
        if self.search_threads < 1:
            raise ValueError("search_threads must be at least 1")

    def options(self) -> Options:
        return Options(
            self.hot_min_hits,
            self.hot_window_seconds,
            self.lock_memory,
            self.max_resident_bytes,
            self.warmup_queries,
        )


class VectorService:
    def __init__(
        self,
        config: VectorConfig,
        *,
        metrics: CacheMetrics,
        embedder: Embedder | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.metrics = VectorMetrics(metrics)
        self._embedder = embedder
        self._clock = clock
        self._state: LoadedIndex | None = None
        self._reason = "not started"
        self._text_error: ApiError | None = None
        self._search_pool: ThreadPoolExecutor | None = None
        self._maintenance_pool: ThreadPoolExecutor | None = None
        self._task: asyncio.Task[None] | None = None
        self._last_save = time.monotonic()

    # -- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        self._search_pool = ThreadPoolExecutor(
            self.config.search_threads,
            thread_name_prefix="sits-vector",
            initializer=one_faiss_thread,
        )
        self._maintenance_pool = ThreadPoolExecutor(
            1, thread_name_prefix="sits-vector-bg", initializer=one_faiss_thread
        )
        await self._in(self._maintenance_pool, self._try_open)
        self._task = asyncio.create_task(self._maintain(), name="sits-vector-maintenance")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        for pool in (self._search_pool, self._maintenance_pool):
            if pool is not None:
                await asyncio.get_running_loop().run_in_executor(None, pool.shutdown, True)
        self._search_pool = self._maintenance_pool = None
        state, self._state = self._state, None
        if state is not None:
            self._save(state)
            state.close()
        self.metrics.available.set(0)

    @property
    def available(self) -> bool:
        return self._state is not None

    @property
    def manifest(self) -> Manifest | None:
        return self._state.manifest if self._state is not None else None

    async def refresh(self) -> None:
        """One maintenance round now (the background task does this periodically)."""
        if self._maintenance_pool is None:
            raise RuntimeError("the service is not started")
        await self._in(self._maintenance_pool, self._maintenance_round)

    async def _maintain(self) -> None:
        assert self._maintenance_pool is not None
        while True:
            await asyncio.sleep(self.config.refresh_seconds)
            try:
                await self._in(self._maintenance_pool, self._maintenance_round)
            except Exception:
                log.exception("vector index maintenance failed")

    def _maintenance_round(self) -> None:
        state = self._state
        if state is None:
            self._try_open()
            return
        state.refresh()
        if time.monotonic() - self._last_save >= self.config.persist_seconds:
            self._save(state)

    def _save(self, state: LoadedIndex) -> None:
        if self.config.stats_path is None:
            return
        try:
            state.save_stats(self.config.stats_path)
            self._last_save = time.monotonic()
        except OSError as err:
            log.warning("could not save list statistics to %s: %s", self.config.stats_path, err)

    def _try_open(self) -> None:
        try:
            state = LoadedIndex(
                self.config.index_dir, self.config.options(), self.metrics, self._clock
            )
        except (IndexFormatError, OSError, RuntimeError) as err:
            # faiss reports unreadable files as RuntimeError.
            self._reason = str(err)
            self.metrics.available.set(0)
            log.warning("vector index unavailable: %s", err)
            return
        try:
            state.warm_up(self.config.stats_path)
            self._text_error = self._prepare_embedder(state.manifest)
        except BaseException:
            state.close()
            raise
        manifest = state.manifest
        self.metrics.info.labels(manifest.kind, manifest.digest).set(1)
        self.metrics.lists.set(state.index.nlist)
        self.metrics.shared.entries.labels(TIER).set(manifest.count)
        self.metrics.available.set(1)
        self._state = state
        self._reason = ""
        log.info("vector index %s: %s, %d vectors", manifest.digest, manifest.kind, manifest.count)

    def _prepare_embedder(self, manifest: Manifest) -> ApiError | None:
        """Load (and warm) the query embedder now, or say why text queries cannot work."""
        model = manifest.embedding_model
        if model is None:
            return invalid(
                "This index was built from precomputed vectors: send `vector`, not `query`.",
                "query",
                "text_not_supported",
            )
        if self._embedder is None:
            if model != EMBEDDING_MODEL:
                return unavailable(
                    f"The index was embedded with {model}; this sidecar embeds with "
                    f"{EMBEDDING_MODEL}. Send `vector`, or rebuild the index.",
                    "embedder_mismatch",
                )
            from ..embedding import default_embedder

            self._embedder = default_embedder()
        if self._embedder.dimension != manifest.dimension:
            return unavailable(
                f"The query embedder gives {self._embedder.dimension} dimensions; the index "
                f"has {manifest.dimension}.",
                "embedder_mismatch",
            )
        self._embedder.embed(["warm-up"])
        return None

    # -- queries ------------------------------------------------------------------------

    async def _in(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    async def retrieve(self, request: RetrieveRequest) -> tuple[Retrieved, Manifest]:
        """Answer one parsed request; raises ApiError (4xx/503) for what cannot be."""
        state, pool = self._state, self._search_pool
        if state is None or pool is None:
            raise unavailable(f"No vector index is loaded: {self._reason}", "index_unavailable")
        if request.vector is not None:
            vector = check_dimension(request.vector, state.manifest.dimension)
        else:
            vector = await self._embed(pool, request.text or "")
        try:
            result = await self._in(pool, state.query, vector, request.k, request.filter)
        except FilterError as err:
            raise invalid(str(err), "filter", "invalid_filter") from None
        return result, state.manifest

    async def _embed(self, pool: ThreadPoolExecutor, text: str) -> Vector:
        if self._text_error is not None:
            raise self._text_error
        embedder = self._embedder
        assert embedder is not None
        rows: Vector = await self._in(pool, embedder.embed, [text])
        vector: Vector = rows[0]
        return vector

    def routes(self) -> list[web.RouteDef]:
        return [
            web.post("/v1/retrieve", self._handle_retrieve),
            web.get("/v1/vector/index", self._handle_describe),
        ]

    async def _handle_retrieve(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        try:
            parsed = parse_request(await request.read(), max_k=self.config.max_k)
            result, manifest = await self.retrieve(parsed)
            response = web.Response(
                body=response_body(result, manifest), content_type="application/json"
            )
            source = "text" if parsed.text is not None else "vector"
            self.metrics.retrieval_seconds.labels(source).observe(time.perf_counter() - started)
        except ApiError as err:
            response = error_reply(err, retry_after_s=RETRY_AFTER_S)
        except Exception:
            log.exception("retrieval failed")
            response = error_reply(ApiError(500, "Retrieval failed.", type=ErrorType.INTERNAL))
        self.metrics.requests.labels(str(response.status)).inc()
        return response

    async def _handle_describe(self, request: web.Request) -> web.Response:
        return web.json_response(self.describe())

    def describe(self) -> dict[str, Any]:
        """The open index and its residency, for GET /v1/vector/index and admin pages."""
        state = self._state
        if state is None:
            return {
                "available": False,
                "reason": self._reason,
                "index_dir": str(self.config.index_dir),
            }
        manifest = state.manifest
        resident = int(state.hot.resident.sum()) if state.hot is not None else 0
        return {
            "available": True,
            "index_dir": str(self.config.index_dir),
            "kind": manifest.kind,
            "digest": manifest.digest,
            "count": manifest.count,
            "dimension": manifest.dimension,
            "metric": manifest.metric,
            "embedding_model": manifest.embedding_model,
            "filter_fields": list(manifest.filter_fields),
            "params": manifest.params,
            "lists": state.index.nlist,
            "resident_lists": resident,
            "text_queries": self._text_error is None,
        }
