"""Shared pytest wiring: the local control plane fixture lives with the cluster code."""

pytest_plugins = ["sits_localcluster.pytest_plugin", "sits_vllm.pytest_plugin"]
