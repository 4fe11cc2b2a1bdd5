"""Data plane of SITS: the A/B gateway and the cache sidecar (see the gateway and cache issues)."""
