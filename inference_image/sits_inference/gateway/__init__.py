"""The SITS A/B gateway: an OpenAI-compatible reverse proxy that splits traffic between the
variants of one SitsDeployment by the operator's weights and measures every request per
variant. Those measurements (``sits_*`` metrics, exported for Prometheus through
OpenTelemetry) are the SLIs the operator's analysis acts on, so the gateway is the A/B
probe point of the design (docs/architecture.md). The OpenAI plumbing it shares with the
cache sidecar, and the request-metric contract, are ``sits_inference.openai``.

Entry points: ``sits-gateway`` (``sits_inference.gateway.cli:main``) and
:func:`sits_inference.gateway.app.start_gateway` for embedding in tests and tools.
"""
