"""The cache sidecar (`sits-cache`): an OpenAI-compatible proxy in every vLLM pod.

Three tiers sit behind one HTTP front, each named by one word everywhere (package,
settings, `SITS_CACHE_<TIER>_*` variables, the `tier` metric label): L1 `semantic` (the
semantic cache, `semantic/`), L2 `vector` (the vector index, `vector/`) and L3 `lora`
(LoRA adapter residency, `lora/`). Each tier receives the shared `CacheMetrics` so that
every `sits_cache_*` series comes from one registry. What the sidecar shares with the
gateway (errors, headers, SSE, request checks) is `sits_inference.openai`.
"""
