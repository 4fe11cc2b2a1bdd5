"""L1 semantic cache: answers a question again when it was asked before in other words.

The sidecar's contract (see the cache package README):

    admission = cache.admit(CacheRequest(kind, body, model, revision, adapter_digest))
    if admission.cacheable:                   # else admission.reason says why not
        hit = cache.lookup(admission)         # blocking: call it in a worker thread
        ... on a miss, after the complete response: cache.store(admission, payload)
    cache.invalidate(model=..., revision=..., adapter_digest=...)

Modules: `request` (admission, partition key), `normalise` (what is embedded),
`guard` (near-miss guard), `clusters` (online mini-batch k-means, representatives),
`index` (faiss IVF), `store` (entries, TTL, GDSF eviction), `cache` (the whole).
"""

from sits_inference.cache.semantic.cache import Hit, Probe, SemanticCache, SemanticStats
from sits_inference.cache.semantic.config import DEFAULT_THRESHOLD, SemanticConfig
from sits_inference.cache.semantic.normalise import SkipReason
from sits_inference.cache.semantic.request import Admission, CacheRequest

__all__ = [
    "DEFAULT_THRESHOLD",
    "Admission",
    "CacheRequest",
    "Hit",
    "Probe",
    "SemanticCache",
    "SemanticConfig",
    "SemanticStats",
    "SkipReason",
]
