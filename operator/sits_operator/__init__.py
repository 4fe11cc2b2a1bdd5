"""SITS operator: progressive delivery of LLM inference services on Kubernetes."""
