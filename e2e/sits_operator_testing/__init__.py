"""Tooling to run and drive the real operator, for tests and benchmarks (not in any image).

``manifests`` builds the analysis scenarios' objects (SITS2026 on short windows, the chat
example as a canary); ``process`` runs ``python -m sits_operator`` as a child process
against the local cluster; ``watch_scope`` makes unrelated pods and reads what the
operator's watches delivered (issue 15). Integration tests and benchmarks import them from here; a
benchmark never imports from ``tests/``.
"""
