"""The cache sidecar (`sits-cache`): an OpenAI-compatible proxy in every vLLM pod.

Three tiers sit behind one HTTP front: L1 semantic cache (`semantic/`), L2 vector-index
retrieval (`retrieval/`) and L3 LoRA adapter residency (`lora/`). Each tier receives the
shared `CacheMetrics` so that every `sits_cache_*` series comes from one registry.
"""
