"""The JSON shapes of POST /v1/retrieve and its OpenAI-style errors.

Request: ``{"query": "text"}`` or ``{"vector": [floats]}`` (exactly one), ``"k"`` (1 to
the configured maximum, default 10), ``"filter"``: ``{"field": value, ...}`` (equality on
metadata stored with each document; all must match).

Response: ``{"object": "list", "data": [{"object": "retrieval.result", "index", "id",
"score", "text", "metadata"}], "model", "index": {"kind", "digest", "count"},
"cache": {"hit", "lists"}}``; results best first, `score` the cosine similarity.

Unknown request fields are rejected rather than ignored: a misspelt "filters" that was
silently dropped would return unfiltered documents to a RAG pipeline.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from ...openai.errors import ApiError, ErrorType
from .base import Vector
from .loaded import Retrieved
from .manifest import Manifest

FIELDS: Final = frozenset({"query", "vector", "k", "filter"})
DEFAULT_K: Final = 10


@dataclass(frozen=True)
class RetrieveRequest:
    k: int = DEFAULT_K
    text: str | None = None
    vector: Vector | None = None
    filter: Mapping[str, Any] = field(default_factory=dict)


def invalid(message: str, param: str | None, code: str) -> ApiError:
    return ApiError(400, message, param=param, code=code)


def unavailable(message: str, code: str) -> ApiError:
    return ApiError(503, message, type=ErrorType.UNAVAILABLE, code=code)


def _parse_vector(raw: Any) -> Vector:
    if not isinstance(raw, list) or not raw:
        raise invalid("`vector` must be a non-empty array of numbers.", "vector", "invalid_vector")
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in raw):
        raise invalid("`vector` must contain only numbers.", "vector", "invalid_vector")
    try:
        wide = np.asarray(raw, dtype=np.float64)
    except OverflowError:
        wide = np.full(1, np.inf)
    if not np.isfinite(wide).all():
        raise invalid("`vector` contains NaN or infinite values.", "vector", "invalid_vector")
    scale = float(np.abs(wide).max())
    if scale == 0.0:
        raise invalid("`vector` is all zeros: it has no direction.", "vector", "invalid_vector")
    # Only the direction matters (cosine): scaling first keeps huge values from overflowing.
    return (wide / scale).astype(np.float32)


def _parse_k(raw: Any, max_k: int) -> int:
    if isinstance(raw, bool) or not isinstance(raw, int):
        raise invalid("`k` must be an integer.", "k", "invalid_type")
    if not 1 <= raw <= max_k:
        raise invalid(f"`k` must be between 1 and {max_k}, got {raw}.", "k", "k_out_of_range")
    return raw


def parse_request(body: bytes, *, max_k: int) -> RetrieveRequest:
    try:
        data = json.loads(body)
    except (ValueError, UnicodeDecodeError) as err:
        raise invalid(f"The body is not valid JSON ({err}).", None, "invalid_json") from None
    if not isinstance(data, dict):
        raise invalid("The body must be a JSON object.", None, "invalid_json")
    unknown = sorted(set(data) - FIELDS)
    if unknown:
        known = ", ".join(sorted(FIELDS))
        raise invalid(
            f"Unknown field `{unknown[0]}` (fields: {known}).", unknown[0], "unknown_field"
        )
    has_text, has_vector = data.get("query") is not None, data.get("vector") is not None
    if has_text == has_vector:
        raise invalid(
            "Send exactly one of `query` (text) and `vector` (numbers).", "query", "missing_query"
        )
    text = None
    if has_text:
        text = data["query"]
        if not isinstance(text, str) or not text.strip():
            raise invalid("`query` must be a non-empty string.", "query", "invalid_query")
    conditions = data.get("filter") or {}
    if not isinstance(conditions, dict):
        raise invalid("`filter` must be an object of field: value.", "filter", "invalid_filter")
    return RetrieveRequest(
        k=_parse_k(data.get("k", DEFAULT_K), max_k),
        text=text,
        vector=_parse_vector(data["vector"]) if has_vector else None,
        filter=conditions,
    )


def check_dimension(vector: Vector, dimension: int) -> Vector:
    """The unit-length query; a vector of another dimension is the client's error."""
    if vector.shape != (dimension,):
        raise invalid(
            f"`vector` has {vector.size} dimensions; this index has {dimension}.",
            "vector",
            "wrong_dimension",
        )
    norm = float(np.linalg.norm(vector))
    if not math.isfinite(norm) or norm == 0.0:
        raise invalid("`vector` has no direction.", "vector", "invalid_vector")
    return (vector / norm).astype(np.float32)


def response_body(result: Retrieved, manifest: Manifest) -> bytes:
    data = [
        {
            "object": "retrieval.result",
            "index": rank,
            "id": doc.id,
            "score": round(score, 6),
            "text": doc.text,
            "metadata": dict(doc.metadata),
        }
        for rank, (doc, score) in enumerate(zip(result.documents, result.scores, strict=True))
    ]
    body = {
        "object": "list",
        "data": data,
        "model": manifest.embedding_model,
        "index": {"kind": manifest.kind, "digest": manifest.digest, "count": manifest.count},
        "cache": {"hit": result.hit, "lists": result.lists},
    }
    return json.dumps(body, ensure_ascii=False).encode()
